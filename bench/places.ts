/**
 * What telling warmpath its nodes' places changes, draw by draw: `node bench/places.ts [--quick]
 * [--jobs 2]` (npm run bench:places), writing bench/PLACES.md and bench/places.json (`--quick`: 150 s
 * of the mix, two draws, x1 and x2, into .tmp/places-quick/, never over the committed results).
 *
 * bench:goodput runs warmpath told each node's places (`max_running_requests`, harness.ts); on its
 * one draw of the mix with hidden prefill noise, told answered fewer requests in time at 1x and
 * 1.5x than not told (more standard requests timed out in the region's queue). One draw cannot say
 * whether that is what telling does or what that draw did: a run is a trajectory, and any change
 * of one decision moves every later one. This runs warmpath told and not told on bench:goodput's
 * fleet on the committed draw and three others (bench:goodput-heldout's seeds: the same tenants,
 * classes and rates, other users, sessions, documents and arrivals; 1x found again on each), with
 * and without noise, from 1x to 3x, and writes each pair and their difference.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as prettier from "prettier";
import { DEFAULT_FLEET, type FleetConfig } from "./fleet.ts";
import { capacitySpeed, routerEntries, SMG_GRID, DYNAMO_GRID } from "./goodput/harness.ts";
import type { GoodputRun } from "./goodput/metrics.ts";
import { runTasks, workloadOf, type RunTask, type WorkloadRef } from "./goodput/pool.ts";
import { DEFAULT_TRACE } from "./workloads/load.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    jobs: { type: "string", default: "2" },
  },
  strict: true,
});
const QUICK = values.quick!;
const JOBS = Number(values.jobs);
if (!Number.isSafeInteger(JOBS) || JOBS < 1) throw new Error(`--jobs takes a whole number >= 1, not ${values.jobs}`);
const OUT_DIR = QUICK ? join(REPO, ".tmp", "places-quick") : join(REPO, "bench");

/** The committed draw (0) and bench:goodput-heldout's three. */
const DRAWS = QUICK ? [0, 1] : [0, 1, 2, 3];
const NOISES = [0, 1];
/** From 1x: below it the places do not fill on this fleet, told or not (bench/FLEETS.md). */
const LOADS = QUICK ? [1, 2] : [1, 1.5, 2, 3];
const ROUTERS = ["told", "not told"] as const;

/** bench:goodput's warmpath (told), and the same not told. */
function entry(router: (typeof ROUTERS)[number], fleet: FleetConfig): RunTask["entry"] {
  const warmpath = routerEntries(fleet, false, { smg: SMG_GRID[0]!, dynamo: DYNAMO_GRID[0]! }).find((e) => e.name === "warmpath")!;
  if (warmpath.spec.kind !== "warmpath") throw new Error("warmpath's entry is not warmpath's");
  return { name: `warmpath ${router}`, spec: { ...warmpath.spec, tellPlaces: router === "told" } };
}

interface Cell {
  goodput: number;
  interactive: number;
  standardShed: number;
}
interface Row {
  draw: number;
  noise: number;
  load: number;
  speed: number;
  told: Cell;
  notTold: Cell;
}

const started = performance.now();
const fleet: FleetConfig = { ...DEFAULT_FLEET, noiseSigma: 0 };
const tasks: RunTask[] = [];
for (const draw of DRAWS) {
  const ref: WorkloadRef = { name: "mix", quick: QUICK, trace: DEFAULT_TRACE, seedOffset: draw };
  const { speed } = capacitySpeed(workloadOf(ref), fleet);
  process.stderr.write(`draw ${draw}: 1x = arrival rate x${speed}\n`);
  for (const noise of NOISES)
    for (const load of LOADS)
      for (const router of ROUTERS)
        tasks.push({
          workload: ref,
          load,
          capacity: speed,
          fleet: { ...fleet, noiseSigma: noise },
          entry: entry(router, fleet),
          variant: "",
          keepOutcomes: false,
        });
}
const runs = await runTasks(tasks, JOBS, (t, r) =>
  process.stderr.write(
    `  draw ${t.workload.seedOffset} noise ${t.fleet.noiseSigma} x${t.load} ${t.entry.name}: ${(r.all.goodput * 100).toFixed(1)}% (${(r.wallMs / 1000).toFixed(1)} s)\n`,
  ),
);

const cellOf = (r: GoodputRun): Cell => {
  const standard = r.byClass.standard;
  let shed = 0;
  for (const [why, n] of Object.entries(standard?.refusedBy ?? {})) if (why.startsWith("shed")) shed += n;
  return { goodput: r.all.goodput, interactive: r.byClass.interactive?.goodput ?? NaN, standardShed: shed };
};
const rows: Row[] = [];
for (let i = 0; i < tasks.length; i += ROUTERS.length) {
  const t = tasks[i]!;
  rows.push({
    draw: t.workload.seedOffset ?? 0,
    noise: t.fleet.noiseSigma,
    load: t.load,
    speed: t.capacity,
    told: cellOf(runs[i]!),
    notTold: cellOf(runs[i + 1]!),
  });
}
const seconds = Math.round((performance.now() - started) / 1000);

const pct = (v: number) => (v * 100).toFixed(1);
const points = (v: number) => `${v >= 0 ? "+" : ""}${(v * 100).toFixed(1)}`;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

const lines: string[] = [
  "# Told the places or not, draw by draw",
  "",
  `Generated by \`npm run bench:places${QUICK ? " -- --quick" : ""}\` (bench/places.ts) on ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC in ${seconds} s; ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}. Do not edit: rerun it.${QUICK ? " QUICK RUN: 150 s of the mix, two draws, x1 and x2, not the committed figures." : ""}`,
  "",
  "bench:goodput's warmpath is told each node's places (`max_running_requests` 64, the engines' limit, as its SMG row is told the engines' slots). Here it runs told and not told on bench:goodput's fleet (8 nodes, 64 places a node, answers at 40 tokens/s) on the mix as bench:goodput draws it (draw 0, the committed one) and on bench:goodput-heldout's three other draws (the same tenants, classes and rates; other users, sessions, documents and arrivals; 1x found again on each), with and without hidden prefill noise (lognormal sigma), at 1x to 3x the load the greedy oracle keeps busy. Goodput: the share of all requests whose first token came within its objective (bench/GOODPUT.md's definitions); interactive, the interactive tenants' share; standard shed, the standard tenants' requests refused by admission (`shed`: at arrival, because their deadline passed while queued, or the queue was full).",
  "",
];
for (const noise of NOISES) {
  lines.push(`## Noise ${noise}`, "");
  lines.push(
    "| load | draw | 1x | goodput told | not told | difference | interactive told | not told | standard shed told | not told |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const load of LOADS) {
    const here = rows.filter((r) => r.noise === noise && r.load === load);
    for (const r of here)
      lines.push(
        `| x${load} | ${r.draw} | x${r.speed} | ${pct(r.told.goodput)}% | ${pct(r.notTold.goodput)}% | ${points(r.told.goodput - r.notTold.goodput)} | ${pct(r.told.interactive)}% | ${pct(r.notTold.interactive)}% | ${r.told.standardShed} | ${r.notTold.standardShed} |`,
      );
    const d = here.map((r) => r.told.goodput - r.notTold.goodput);
    const di = here.map((r) => r.told.interactive - r.notTold.interactive);
    lines.push(
      `| x${load} | **mean** | | | | **${points(mean(d))}** (${points(Math.min(...d))} to ${points(Math.max(...d))}) | ${points(mean(di))} | | ${mean(here.map((r) => r.told.standardShed)).toFixed(0)} | ${mean(here.map((r) => r.notTold.standardShed)).toFixed(0)} |`,
    );
  }
  lines.push("");
}
lines.push("Each run is deterministic: the same command gives the same figures (places.json byte for byte), whatever `--jobs`.", "");

mkdirSync(OUT_DIR, { recursive: true });
const md = await prettier.format(lines.join("\n"), { parser: "markdown", printWidth: 100, proseWrap: "preserve" });
writeFileSync(join(OUT_DIR, "PLACES.md"), md);
writeFileSync(
  join(OUT_DIR, "places.json"),
  JSON.stringify({ command: "npm run bench:places", draws: DRAWS, loads: LOADS, noises: NOISES, rows }, null, 2) + "\n",
);
process.stderr.write(`wrote ${join(OUT_DIR, "PLACES.md")} in ${seconds} s\n`);
