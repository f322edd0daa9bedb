/**
 * The goodput benchmark: `node bench/goodput.ts [flags]` (npm run bench:goodput), issue 30's proof.
 *
 * Sweeps offered load (multiples of what the fleet can serve, harness.ts capacitySpeed) on the
 * Mooncake conversation trace and a generated multi-tenant mix with a batch tenant, with and
 * without hidden prefill noise, through warmpath (the production RegionRouter with its default
 * settings, and without admission), the anchors with their defaults and with their documented
 * opt-in overload protections, and the SLO-aware greedy oracle; then one tenant's flood. Writes
 * bench/GOODPUT.md, bench/goodput.json and bench/charts/goodput-*.svg. Deterministic: the same
 * flags give byte-identical files, whatever `--jobs`.
 *
 * Flags (defaults in brackets):
 *   --quick                the CI slice, written to .tmp/goodput-quick [off]
 *   --workload a,b         mooncake, mix [both]
 *   --loads 0.5,1,...      offered loads, x capacity [0.5,1,1.5,2,2.5,3; quick: 0.5,2,3]
 *   --noise 0,1            lognormal sigmas of hidden prefill-time noise [0,1; quick: 0]
 *   --jobs N               worker threads [2]
 *   --no-tune              skip the protections' tuning grids (tuned rows = first grid entry)
 *   --no-flood             skip the flood scenario
 *   --trace PATH           Mooncake trace [../shared/traces/mooncake_conversation_trace.jsonl]
 *   --seed N               the mix drawn anew: N added to every tenant's seed [0]; a held-out
 *                          check, never the committed results (needs --out, or writes .tmp/goodput-seed-N)
 *   --out DIR              [bench; quick: .tmp/goodput-quick]
 */
import { parseArgs } from "node:util";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_FLEET, type FleetConfig } from "./fleet.ts";
import {
  capacitySpeed,
  commitmentsAt,
  DEFAULT_TRACE,
  dynamoLabel,
  pickTuned,
  routerEntries,
  SMG_GRID,
  smgLabel,
  TUNE_LOADS,
  tuningEntries,
} from "./goodput/harness.ts";
import { runTasks, workloadOf, type RunTask, type WorkloadRef } from "./goodput/pool.ts";
import { writeReport, type FloodReport, type WorkloadReport } from "./goodput/report.ts";
import type { GoodputRun } from "./goodput/metrics.ts";
import { MIX } from "./workloads/generator.ts";
import { DYNAMO_DOC_EXAMPLE } from "./goodput/dynamo-busy.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * The flood scenario: every tenant of the mix in turn at FLOOD_FACTOR x its rate, on the mix at
 * FLOOD_LOAD. Every tenant, not a chosen few: which flood a rule survives is the measurement (a
 * standard tenant's flood that stays within its share of the demand is the hard case, rag-b's).
 */
const FLOOD_TENANTS = MIX.tenants.map((t) => t.name);
const FLOOD_FACTOR = 5;
const FLOOD_LOAD = 1;

/** The full run's measured duration (GOODPUT.md states it; a constant so the file stays deterministic). */
const RUNTIME_NOTE = "Runtime of the full run: measured on 2 shared cores with `--jobs 2`, see bench/README.md.";

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    workload: { type: "string" },
    loads: { type: "string" },
    noise: { type: "string" },
    jobs: { type: "string", default: "2" },
    tune: { type: "boolean", default: true },
    flood: { type: "boolean", default: true },
    trace: { type: "string", default: DEFAULT_TRACE },
    seed: { type: "string", default: "0" },
    out: { type: "string" },
  },
  strict: true,
  allowNegative: true,
});

const quick = values.quick!;
const loads = (values.loads ?? (quick ? "0.5,2,3" : "0.5,1,1.5,2,2.5,3")).split(",").map(Number);
const noises = (values.noise ?? (quick ? "0" : "0,1")).split(",").map(Number);
const jobs = Math.max(1, Number(values.jobs));
const seedOffset = Number(values.seed);
if (!Number.isSafeInteger(seedOffset) || seedOffset < 0) throw new Error(`--seed takes a whole number >= 0, not ${values.seed}`);
// The committed results are the mix as drawn with its own seeds: another draw goes elsewhere.
const outDir =
  values.out ??
  (quick ? join(REPO, ".tmp", "goodput-quick") : seedOffset !== 0 ? join(REPO, ".tmp", `goodput-seed-${seedOffset}`) : join(REPO, "bench"));
let workloadNames = (values.workload ?? "mooncake,mix").split(",");
if (workloadNames.includes("mooncake") && values.workload === undefined && values.trace === DEFAULT_TRACE && !existsSync(DEFAULT_TRACE)) {
  process.stderr.write(`WARNING: Mooncake trace not found at ${DEFAULT_TRACE}: skipping the mooncake workload (pass --trace PATH)\n`);
  workloadNames = workloadNames.filter((n) => n !== "mooncake");
}
const fleet: FleetConfig = { ...DEFAULT_FLEET, noiseSigma: 0 };
const log = (s: string) => process.stderr.write(s + "\n");
const started = performance.now();

const describe = (t: RunTask, r: GoodputRun) =>
  `  ${t.workload.name}${t.variant ? ` [${t.variant}]` : ""} x${t.load} noise ${t.fleet.noiseSigma} ${t.entry.name.padEnd(22)} goodput ${(r.all.goodput * 100).toFixed(1).padStart(5)}%  tokens ${(r.all.tokenGoodput * 100).toFixed(1).padStart(5)}%  refused ${String(r.all.refused).padStart(5)}  late ${String(r.all.late).padStart(5)}  (${(r.wallMs / 1000).toFixed(1)} s)`;

const workloads: WorkloadReport[] = [];
const sweep: RunTask[] = [];
for (const name of workloadNames) {
  const ref: WorkloadRef = { name, quick, trace: values.trace!, seedOffset };
  const t0 = performance.now();
  const w = workloadOf(ref);
  const capacity = capacitySpeed(w, fleet);
  log(
    `${name}: ${w.requests.length} requests; 1x = arrival rate x${capacity.speed} (oracle ${(capacity.oracleBusy * 100).toFixed(1)}% busy; pooled 100% at x${capacity.pooledSpeed}) in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  let tuningRuns: GoodputRun[] = [];
  let tuned = { smg: SMG_GRID[0]!, dynamo: DYNAMO_DOC_EXAMPLE };
  let scores = new Map<string, number>();
  if (values.tune) {
    const tasks: RunTask[] = TUNE_LOADS.flatMap((load) =>
      tuningEntries().map((entry) => ({
        workload: ref,
        load,
        capacity: capacity.speed,
        fleet,
        entry,
        variant: "tuning",
        keepOutcomes: false,
      })),
    );
    tuningRuns = await runTasks(tasks, jobs, (t, r) => log(describe(t, r)));
    ({ smg: tuned.smg, dynamo: tuned.dynamo, scores } = pickTuned(tuningRuns));
    log(`  tuned: smg ${smgLabel(tuned.smg)}; dynamo ${dynamoLabel(tuned.dynamo)}`);
  }
  const hasClasses = w.requests.some((r) => r.priority === "batch");
  // Tenants with classes (the mix): warmpath also with each tenant committed its own rate at 1x.
  const entries = routerEntries(fleet, hasClasses, tuned, hasClasses ? commitmentsAt(w, capacity.speed) : undefined);
  workloads.push({
    name,
    description: w.description,
    requests: w.requests.length,
    capacity,
    entries,
    tuned: { smg: `SMG ${smgLabel(tuned.smg)}`, dynamo: `Dynamo ${dynamoLabel(tuned.dynamo)}` },
    tuningScores: tuningEntries()
      .filter((e) => scores.has(e.name))
      .map((e) => [e.name, scores.get(e.name)!]),
    tuningRuns,
  });
  for (const noise of noises) {
    for (const load of loads) {
      for (const e of entries) {
        sweep.push({
          workload: ref,
          load,
          capacity: capacity.speed,
          fleet: { ...fleet, noiseSigma: noise },
          entry: { name: e.name, spec: e.spec },
          variant: "",
          keepOutcomes: e.group === "warmpath",
        });
      }
    }
  }
}

const floodTasks: RunTask[] = [];
const floodMeta: Array<{ tenant: string }> = [];
const mix = workloads.find((w) => w.name === "mix");
if (values.flood && mix) {
  const tenants = quick ? FLOOD_TENANTS.slice(0, 1) : FLOOD_TENANTS;
  for (const tenant of tenants) {
    if (!MIX.tenants.some((t) => t.name === tenant)) throw new Error(`unknown flood tenant ${tenant}`);
    for (const e of mix.entries) {
      floodTasks.push({
        workload: { name: "mix", quick, trace: values.trace!, rateFactor: { [tenant]: FLOOD_FACTOR }, seedOffset },
        load: FLOOD_LOAD,
        capacity: mix.capacity.speed,
        fleet,
        entry: { name: e.name, spec: e.spec },
        variant: `flood ${tenant} x${FLOOD_FACTOR}`,
        keepOutcomes: false,
      });
      floodMeta.push({ tenant });
    }
  }
  // The flood is compared with the sweep's run of the mix at the same load without noise.
  if (!loads.includes(FLOOD_LOAD) || !noises.includes(0)) {
    for (const e of mix.entries) {
      sweep.push({
        workload: { name: "mix", quick, trace: values.trace!, seedOffset },
        load: FLOOD_LOAD,
        capacity: mix.capacity.speed,
        fleet,
        entry: { name: e.name, spec: e.spec },
        variant: "",
        keepOutcomes: e.group === "warmpath",
      });
    }
  }
}

const all = await runTasks([...sweep, ...floodTasks], jobs, (t, r) => log(describe(t, r)));
const sweepRuns = all.slice(0, sweep.length);
const floodRuns = all.slice(sweep.length);
const floods: FloodReport[] = [];
for (const tenant of [...new Set(floodMeta.map((m) => m.tenant))]) {
  floods.push({
    tenant,
    factor: FLOOD_FACTOR,
    load: FLOOD_LOAD,
    runs: floodRuns.filter((_, i) => floodMeta[i]!.tenant === tenant),
  });
}

const command = ["node bench/goodput.ts", ...process.argv.slice(2)].join(" ");
writeReport({ outDir, command, quick, fleet, loads, noises, workloads, runs: sweepRuns, floods, runtimeNote: RUNTIME_NOTE });
log(`done in ${((performance.now() - started) / 1000).toFixed(0)} s; wrote ${join(outDir, "GOODPUT.md")}`);
