/**
 * The trace-replay benchmark: `node bench/run.ts [flags]` (npm run bench).
 *
 * Replays each workload at each speed through every policy on a fresh simulated fleet, in
 * simulated time, and writes bench/RESULTS.md with SVG charts under bench/charts/. Deterministic:
 * the same flags give byte-identical output. Routers go through the production RegionRouter.
 *
 * Flags (defaults in brackets):
 *   --quick                 CI slice: fewer requests and load levels [off]
 *   --workload a,b          mooncake, chat-heavy, template-heavy, agentic [all four]
 *   --speeds 0.5,1,...      arrival-rate multipliers [0.5,1,1.5,2,2.5,3; quick: 1,2,3]
 *   --noise S               lognormal sigma of hidden prefill-time noise, main sweep [0]
 *   --noise-check S         extra pass at each workload's heavy level with this sigma; 0 = skip [1]
 *   --rate-check F          extra warmpath passes at the light and heavy levels with its configured
 *                           prefill rate F x and 1/F x the fleet's true rate; 0 = skip [4]
 *   --agreement-check       warmpath at the heavy level with and without learning from usage,
 *                           under evictions the router does not expect and under a silent node
 *                           restart; --no-agreement-check skips it [on]
 *   --nodes N [8] --capacity TOKENS [500000] --prefill-rate TOK/S [10000]
 *   --decode-rate TOK/S [40] --slots N [64] --report-interval MS [1000]
 *   --trace PATH            Mooncake trace [../shared/traces/mooncake_conversation_trace.jsonl from the repo]
 *   --policies a,b          subset of policies (for exploration; the report expects all)
 *   --out DIR               where RESULTS.md and charts/ go [bench]
 */
import { parseArgs } from "node:util";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_FLEET, silentRestartAt, simulate, type Dispatcher, type Faults, type FleetConfig } from "./fleet.ts";
import { RouterDispatcher } from "./router-driver.ts";
import { OracleDispatcher, PooledDispatcher, pooledFleet } from "./oracle.ts";
import { indexAgreement, summarise, type RunMetrics } from "./metrics.ts";
import { DEFAULT_TRACE, loadWorkload as loadBenchWorkload } from "./workloads/load.ts";
import type { Workload } from "./workloads/types.ts";
import { levels, writeReport } from "./report.ts";
import { POLICY_NAMES, type PolicyName } from "../src/core/policies/index.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Routers compared (all in src/core/policies), then the two references. */
export const ROUTERS: PolicyName[] = [...POLICY_NAMES.filter((p) => p !== "warmpath"), "warmpath"];
export const REFERENCES = ["oracle", "pooled"] as const;

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    workload: { type: "string" },
    speeds: { type: "string" },
    noise: { type: "string", default: "0" },
    "noise-check": { type: "string", default: "1" },
    "rate-check": { type: "string", default: "4" },
    "agreement-check": { type: "boolean", default: true },
    nodes: { type: "string" },
    capacity: { type: "string" },
    "prefill-rate": { type: "string" },
    "decode-rate": { type: "string" },
    slots: { type: "string" },
    "report-interval": { type: "string" },
    trace: { type: "string", default: DEFAULT_TRACE },
    policies: { type: "string" },
    out: { type: "string", default: join(REPO, "bench") },
  },
  strict: true,
  allowNegative: true,
});

const num = (v: string | undefined, d: number) => (v === undefined ? d : Number(v));
const fleet: FleetConfig = {
  nodes: num(values.nodes, DEFAULT_FLEET.nodes),
  capacityTokens: num(values.capacity, DEFAULT_FLEET.capacityTokens),
  prefillRate: num(values["prefill-rate"], DEFAULT_FLEET.prefillRate),
  decodeRate: num(values["decode-rate"], DEFAULT_FLEET.decodeRate),
  slots: num(values.slots, DEFAULT_FLEET.slots),
  reportIntervalMs: num(values["report-interval"], DEFAULT_FLEET.reportIntervalMs),
  noiseSigma: Number(values.noise),
};
const quick = values.quick!;
const speeds = (values.speeds ?? (quick ? "1,2,3" : "0.5,1,1.5,2,2.5,3")).split(",").map(Number);
let workloadNames = (values.workload ?? "mooncake,chat-heavy,template-heavy,agentic").split(",");
// The trace lives beside the repository (../shared/traces), not in it. A clone without it can
// still run the generated workloads; a trace asked for explicitly must exist.
if (workloadNames.includes("mooncake") && values.workload === undefined && values.trace === DEFAULT_TRACE && !existsSync(DEFAULT_TRACE)) {
  process.stderr.write(`WARNING: Mooncake trace not found at ${DEFAULT_TRACE}: skipping the mooncake workload (pass --trace PATH)\n`);
  workloadNames = workloadNames.filter((n) => n !== "mooncake");
}
const policies = values.policies ? values.policies.split(",") : [...ROUTERS, ...REFERENCES];
const noiseCheck = Number(values["noise-check"]);
const rateCheck = Number(values["rate-check"]);

function loadWorkload(name: string): Workload {
  return loadBenchWorkload(name, { trace: values.trace!, quick });
}

/** How a run departs from the plain sweep. */
interface Variant {
  /** The router is configured with this multiple of the fleet's true prefill rate. Default 1. */
  rateFactor?: number;
  /** The router is told each node's KV capacity times this. Default 1. */
  capacityFactor?: number;
  /** Correct the index from usage (default: warmpath only, see router-driver.ts). */
  learnFromUsage?: boolean;
  faults?: Faults;
}

function dispatcherFor(policy: string, cfg: FleetConfig, v: Variant): { d: Dispatcher; cfg: FleetConfig } {
  if (policy === "oracle") return { d: new OracleDispatcher(), cfg };
  if (policy === "pooled") return { d: new PooledDispatcher(), cfg: pooledFleet(cfg) };
  const d = new RouterDispatcher(policy, { name: policy as PolicyName }, cfg.prefillRate * (v.rateFactor ?? 1), {
    learnFromUsage: v.learnFromUsage,
    capacityFactor: v.capacityFactor,
  });
  return { d, cfg };
}

/** Requests to the restarted node right after a silent restart that its agreement is measured on. */
const AFTER_RESTART_REQUESTS = 50;

function runOne(w: Workload, speed: number, policy: string, cfg: FleetConfig, v: Variant = {}): RunMetrics {
  const { d, cfg: c } = dispatcherFor(policy, cfg, v);
  const { lives, fleet: f } = simulate(w.requests, speed, c, w.trueBlockTokens, d, v.faults);
  const m = summarise(w.name, speed, policy, cfg.noiseSigma, lives, f);
  const restart = v.faults?.silentRestart;
  if (restart) {
    // Over the whole run one node's restart is diluted; what matters is how soon the index
    // stops believing in the lost cache: agreement on the node's next requests.
    const at = silentRestartAt(lives, restart);
    const after = lives.filter((l) => l.node === restart.node && l.arrival >= at).slice(0, AFTER_RESTART_REQUESTS);
    m.indexAgreement = indexAgreement(after);
  }
  return m;
}

/** The index-agreement scenarios: what the router's LRU model cannot foresee. */
const AGREEMENT_SCENARIOS: Array<{ name: string; description: string; variant: Variant }> = [
  {
    name: "evictions",
    description: "nodes evict more than the router expects (it is told twice their real KV capacity)",
    variant: { capacityFactor: 2 },
  },
  {
    name: "silent restart",
    description: "one node loses its whole cache halfway through the run, with no new boot id; agreement is over its next 50 requests",
    variant: { faults: { silentRestart: { node: 0, atFraction: 0.5 } } },
  },
];

const started = performance.now();
const results: RunMetrics[] = [];
const noiseResults: RunMetrics[] = [];
const rateResults: Array<RunMetrics & { rateFactor: number }> = [];
const agreementResults: Array<RunMetrics & { scenario: string; learnFromUsage: boolean }> = [];
const workloads: Array<{ name: string; description: string; requests: number }> = [];
for (const name of workloadNames) {
  const t0 = performance.now();
  const w = loadWorkload(name);
  workloads.push({ name: w.name, description: w.description, requests: w.requests.length });
  process.stderr.write(`${w.name}: ${w.requests.length} requests, loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  for (const speed of speeds) {
    for (const p of policies) {
      const m = runOne(w, speed, p, fleet);
      results.push(m);
      process.stderr.write(
        `  x${speed} ${p.padEnd(19)} hit ${(m.hitRate * 100).toFixed(1).padStart(5)}%  ttft mean ${(m.ttftMean / 1000).toFixed(2).padStart(7)} s  p99 ${(m.ttftP99 / 1000).toFixed(2).padStart(7)} s  load ${m.prefillLoad.toFixed(2)}\n`,
      );
    }
  }
  const { light, heavy } = levels(results, w.name, speeds);
  if (noiseCheck > 0 && fleet.noiseSigma !== noiseCheck) {
    for (const p of policies) {
      const m = runOne(w, heavy, p, { ...fleet, noiseSigma: noiseCheck });
      noiseResults.push(m);
      process.stderr.write(`  noise ${noiseCheck} x${heavy} ${p.padEnd(19)} ttft mean ${(m.ttftMean / 1000).toFixed(2)} s\n`);
    }
  }
  // Only warmpath's policy reads the prefill rate, so only warmpath is rerun with it wrong.
  if (rateCheck > 0 && policies.includes("warmpath")) {
    for (const factor of [rateCheck, 1 / rateCheck]) {
      for (const speed of [...new Set([light, heavy])]) {
        const m = runOne(w, speed, "warmpath", fleet, { rateFactor: factor });
        rateResults.push({ ...m, rateFactor: factor });
        process.stderr.write(
          `  rate x${factor} x${speed} warmpath ttft mean ${(m.ttftMean / 1000).toFixed(2)} s  hit ${(m.hitRate * 100).toFixed(1)}%\n`,
        );
      }
    }
  }
  if (values["agreement-check"] && policies.includes("warmpath")) {
    for (const scenario of AGREEMENT_SCENARIOS) {
      for (const learnFromUsage of [true, false]) {
        const m = runOne(w, heavy, "warmpath", fleet, { ...scenario.variant, learnFromUsage });
        agreementResults.push({ ...m, scenario: scenario.name, learnFromUsage });
        process.stderr.write(
          `  agreement ${scenario.name}, learning ${learnFromUsage ? "on" : "off"}: ${(m.indexAgreement * 100).toFixed(1)}%  hit ${(m.hitRate * 100).toFixed(1)}%  ttft mean ${(m.ttftMean / 1000).toFixed(2)} s\n`,
        );
      }
    }
  }
}

const command = ["node bench/run.ts", ...process.argv.slice(2)].join(" ");
writeReport({
  outDir: values.out!,
  command,
  fleet,
  workloads,
  speeds,
  results,
  noiseResults,
  noiseCheck,
  rateResults,
  agreementResults,
  agreementScenarios: AGREEMENT_SCENARIOS.map(({ name, description }) => ({ name, description })),
  quick,
});
process.stderr.write(`done in ${((performance.now() - started) / 1000).toFixed(0)} s; wrote ${join(values.out!, "RESULTS.md")}\n`);
mkdirSync(values.out!, { recursive: true });
writeFileSync(
  join(values.out!, "results.json"),
  JSON.stringify({ command, fleet, results, noiseResults, rateResults, agreementResults }, null, 1) + "\n",
);
