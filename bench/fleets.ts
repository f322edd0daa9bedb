/**
 * bench:goodput's sweep on fleets it was not developed on: `node bench/fleets.ts [--quick]`
 * (npm run bench:fleets), writing bench/FLEETS.md and bench/fleets.json (`--quick`: the first
 * 3,000 Mooncake requests and 150 s of the mix, into .tmp/fleets-quick/, never over the committed
 * results).
 *
 * bench/GOODPUT.md runs one fleet (bench/fleet.ts DEFAULT_FLEET: 8 nodes, 10,000 prefill
 * tokens/s, 64 places a node, answers at 40 tokens/s, 500,000 tokens of KV, reports every
 * second), and every choice in the admission code was measured on it. Here each figure of that
 * fleet is changed in turn (fewer and more nodes, slower and faster prefill, fewer places with
 * slower answers, a smaller cache, hidden prefill noise, slower reports), 1x found again for
 * each (the load the greedy oracle keeps 100% busy, as bench:goodput finds it), and warmpath,
 * warmpath without admission, each anchor's default and best protection from bench:goodput, and
 * the SLO-aware oracle run at 0.5x to 3x on both of bench:goodput's workloads. `warmpath-told-places`
 * is warmpath told each node's places (`max_running_requests`, as a node's configuration or its
 * agent says); the others are not, as a configuration that does not say. Each workload runs in a
 * process of its own (two at once).
 */
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as prettier from "prettier";
import { DEFAULT_FLEET, type FleetConfig } from "./fleet.ts";
import {
  capacitySpeed,
  DYNAMO_GRID,
  GOODPUT_WORKLOADS,
  goodputWorkload,
  routerEntries,
  runOne,
  SMG_GRID,
  warmpathEntry,
} from "./goodput/harness.ts";
import type { RouterEntry } from "./goodput/routers.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    /** Internal: run one workload and write its rows to `--out` (the parent runs one child a workload). */
    child: { type: "string" },
    out: { type: "string" },
  },
  strict: true,
});
const QUICK = values.quick!;
const OUT_DIR = QUICK ? join(REPO, ".tmp", "fleets-quick") : join(REPO, "bench");

/** Each variation of DEFAULT_FLEET: its name, what changes, and why it is worth a run. */
export const FLEETS: Array<{ name: string; over: Partial<FleetConfig>; what: string }> = [
  { name: "default", over: {}, what: "bench:goodput's fleet, for reference" },
  { name: "4 nodes", over: { nodes: 4 }, what: "half the nodes: fewer places to spread to" },
  { name: "16 nodes", over: { nodes: 16 }, what: "twice the nodes: more caches to split a prefix over" },
  { name: "prefill 5k", over: { prefillRate: 5_000 }, what: "half the prefill rate: objectives, 5x the cold prefill, loosen with it" },
  { name: "prefill 25k", over: { prefillRate: 25_000 }, what: "2.5x the prefill rate: the 1 s objective floor binds more often" },
  {
    name: "16 places, 20 tok/s",
    over: { slots: 16, decodeRate: 20 },
    what: "16 requests at once a node, answers at 20 tokens/s: the places fill before the prefill does",
  },
  { name: "KV 150k", over: { capacityTokens: 150_000 }, what: "under a third of the KV cache: more evictions" },
  { name: "noise 0.5", over: { noiseSigma: 0.5 }, what: "hidden prefill noise between bench:goodput's 0 and 1" },
  { name: "reports 5 s", over: { reportIntervalMs: 5_000 }, what: "load reports every 5 s instead of every second" },
];

const LOADS = [0.5, 1, 2, 3];
/** bench:goodput's rows run here: warmpath's two, each anchor's default and documented protection, the reference. */
const ROUTERS = [
  "warmpath",
  "warmpath-told-places",
  "warmpath-no-admission",
  "llm-d",
  "dynamo-busy-doc",
  "llm-d-admitter-all",
  "slo-oracle",
];

interface Row {
  workload: string;
  fleet: string;
  /** 1x's arrival-rate multiplier on this fleet. */
  speed: number;
  router: string;
  /** Goodput by offered load (share of all requests within objective). */
  goodput: Record<string, number>;
  /** Interactive requests' goodput by load (the mix only). */
  interactive?: Record<string, number>;
}

/**
 * The routers on `fleet`: bench:goodput's entries, warmpath's both not told the nodes' places (as
 * a configuration that does not say) and told them (bench:goodput's warmpath).
 */
function entries(fleet: FleetConfig): Array<Pick<RouterEntry, "name" | "spec">> {
  const all = routerEntries(fleet, false, { smg: SMG_GRID[0]!, dynamo: DYNAMO_GRID[0]! }, {});
  const untold = warmpathEntry(fleet, "warmpath", false);
  const told = warmpathEntry(fleet, "warmpath-told-places", true);
  return ROUTERS.map((n) => (n === told.name ? told : n === untold.name ? untold : all.find((e) => e.name === n)!));
}

function runWorkload(workload: string): Row[] {
  const base = goodputWorkload(workload, { quick: QUICK });
  const rows: Row[] = [];
  for (const f of FLEETS) {
    const fleet = { ...DEFAULT_FLEET, ...f.over };
    const { speed } = capacitySpeed(base, fleet);
    for (const e of entries(fleet)) {
      const row: Row = { workload, fleet: f.name, speed, router: e.name, goodput: {} };
      for (const load of LOADS) {
        const r = runOne(base, load, speed, fleet, e);
        row.goodput[load] = r.all.goodput;
        if (r.byClass.interactive) (row.interactive ??= {})[load] = r.byClass.interactive.goodput;
      }
      rows.push(row);
      process.stderr.write(`${workload} ${f.name} ${e.name}: ${LOADS.map((l) => pct(row.goodput[l]!)).join(" ")}\n`);
    }
  }
  return rows;
}

const pct = (v: number) => `${(v * 100).toFixed(1)}%`;

if (values.child) {
  writeFileSync(values.out!, JSON.stringify(runWorkload(values.child)));
  process.exit(0);
}

const started = performance.now();
mkdirSync(join(REPO, ".tmp", "fleets"), { recursive: true });
const parts = await Promise.all(
  GOODPUT_WORKLOADS.map(
    (w) =>
      new Promise<Row[]>((ok, fail) => {
        const out = join(REPO, ".tmp", "fleets", `${w}${QUICK ? "-quick" : ""}.json`);
        const args = [fileURLToPath(import.meta.url), "--child", w, "--out", out, ...(QUICK ? ["--quick"] : [])];
        const child = spawn(process.execPath, args, { cwd: REPO, stdio: ["ignore", "ignore", "inherit"] });
        child.once("error", fail);
        child.once("exit", (code) =>
          code === 0 ? ok(JSON.parse(readFileSync(out, "utf8")) as Row[]) : fail(new Error(`${w} exited ${code}`)),
        );
      }),
  ),
);
const rows = parts.flat();
const seconds = Math.round((performance.now() - started) / 1000);

/** A target of bench:goodput checked on one fleet and workload: its verdict and figures. */
interface Check {
  workload: string;
  fleet: string;
  target: string;
  pass: boolean;
  detail: string;
}

function checks(): Check[] {
  const out: Check[] = [];
  for (const w of GOODPUT_WORKLOADS)
    for (const f of FLEETS) {
      const of = (router: string) => rows.find((r) => r.workload === w && r.fleet === f.name && r.router === router)!;
      for (const mine of ["warmpath", "warmpath-told-places"]) {
        const me = of(mine);
        const add = (target: string, pass: boolean, detail: string) =>
          out.push({ workload: w, fleet: f.name, target: `${mine}: ${target}`, pass, detail });
        const none = of("warmpath-no-admission");
        for (const l of [0.5, 1]) {
          const loss = (none.goodput[l]! - me.goodput[l]!) * 100;
          add(
            `x${l}: no loss vs warmpath without admission (within 1 point)`,
            loss <= 1,
            `${pct(me.goodput[l]!)} vs ${pct(none.goodput[l]!)}`,
          );
        }
        const oracle = of("slo-oracle");
        for (const l of [2, 3]) {
          const k = me.goodput[l]! / oracle.goodput[l]!;
          add(`x${l}: >= 0.9x the SLO-aware oracle`, k >= 0.9, `${pct(me.goodput[l]!)} vs ${pct(oracle.goodput[l]!)} (${k.toFixed(2)}x)`);
        }
        const best = ["dynamo-busy-doc", "llm-d-admitter-all"].map(of).sort((a, b) => b.goodput[3]! - a.goodput[3]!)[0]!;
        const k = me.goodput[3]! / best.goodput[3]!;
        add(
          `x3: >= 1.5x the best protection`,
          k >= 1.5,
          `${pct(me.goodput[3]!)} vs ${best.router} ${pct(best.goodput[3]!)} (${k.toFixed(2)}x)`,
        );
        const llmd = of("llm-d");
        const d = me.goodput[3]! / llmd.goodput[3]!;
        add(`x3: >= 5x the anchor's default (llm-d)`, d >= 5, `${pct(me.goodput[3]!)} vs ${pct(llmd.goodput[3]!)} (${d.toFixed(2)}x)`);
        if (me.interactive) {
          add(`x2: interactive >= 95%`, me.interactive[2]! >= 0.95, pct(me.interactive[2]!));
        }
      }
    }
  return out;
}

const all = checks();
const lines: string[] = [
  "# Goodput on other fleets",
  "",
  `Generated by \`npm run bench:fleets${QUICK ? " -- --quick" : ""}\` (bench/fleets.ts) on ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC in ${seconds} s; ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}. Do not edit: rerun it.${QUICK ? " QUICK RUN: slices of the workloads, not the committed figures." : ""}`,
  "",
  "bench:goodput's sweep (bench/GOODPUT.md: the same workloads, objectives, routers and 1x defined the same way) on fleets it was not developed on: each figure of its fleet changed in turn (the places with the answers' speed), 1x found again on each. Goodput: the share of all requests whose first token came within its objective. 1x is the load the greedy oracle keeps the prefill 100% busy, and neither it nor the SLO oracle sees a wait for a place (bench/oracle.ts): where the places fill first (16 places, and the mix with prefill 2.5x faster), x0.5 and x1 are already past what the places serve, and the oracle is no bound (its figures there are a reference only). `warmpath-told-places` is warmpath told each node's places (`max_running_requests`: its configuration, or its agent's report); every other row is not told, as a configuration that does not say. The anchors' protections run with their documented settings (bench/GOODPUT.md's `-doc` and `-all` rows; not tuned again here).",
  "",
  "| fleet | what changes |",
  "| --- | --- |",
  ...FLEETS.map((f) => `| ${f.name} | ${f.what} |`),
  "",
  "## Targets on each fleet",
  "",
  `bench:goodput's targets that a fleet can change (the floods' are the mix's, bench/GOODPUT-HELDOUT.md). Met: ${all.filter((c) => c.pass).length} of ${all.length}.`,
  "",
  "| workload | fleet | target | verdict |",
  "| --- | --- | --- | --- |",
  ...all.map((c) => `| ${c.workload} | ${c.fleet} | ${c.target} | ${c.pass ? "PASS" : "**FAIL**"}: ${c.detail} |`),
  "",
];
for (const w of GOODPUT_WORKLOADS) {
  lines.push(`## ${w}`, "", "Goodput by offered load (x1: 1x found again on each fleet; its arrival-rate multiplier in brackets).", "");
  lines.push(`| fleet | router | ${LOADS.map((l) => `x${l}`).join(" | ")} |`, `| --- | --- | ${LOADS.map(() => "---:").join(" | ")} |`);
  for (const r of rows.filter((x) => x.workload === w)) {
    lines.push(
      `| ${r.fleet} (${r.speed}) | ${r.router} | ${LOADS.map((l) => pct(r.goodput[l]!) + (r.interactive ? ` (i ${pct(r.interactive[l]!)})` : "")).join(" | ")} |`,
    );
  }
  lines.push("");
}
if (rows.some((r) => r.interactive)) lines.push("(i ...): the interactive class's goodput (the mix's interactive tenants).", "");

mkdirSync(OUT_DIR, { recursive: true });
const md = await prettier.format(lines.join("\n"), { parser: "markdown", printWidth: 120 });
writeFileSync(join(OUT_DIR, "FLEETS.md"), md);
writeFileSync(
  join(OUT_DIR, "fleets.json"),
  JSON.stringify({ quick: QUICK, loads: LOADS, fleets: FLEETS, rows, verdicts: all }, null, 2) + "\n",
);
process.stderr.write(
  `wrote ${join(OUT_DIR, "FLEETS.md").replace(REPO + "/", "")} (${seconds} s; targets met ${all.filter((c) => c.pass).length} of ${all.length})\n`,
);
