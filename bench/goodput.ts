/**
 * The goodput benchmark: `node bench/goodput.ts [flags]` (npm run bench:goodput), issue 30's proof.
 *
 * Sweeps offered load (multiples of what the fleet can serve, harness.ts capacitySpeed) on the
 * Mooncake conversation trace and a generated multi-tenant mix with a batch tenant, with and
 * without hidden prefill noise, through warmpath (the production RegionRouter with its default
 * settings, and without admission), the anchors with their defaults and with their documented
 * opt-in overload protections, and the SLO-aware greedy oracle; then one tenant's flood, from its
 * first request and after its own history. Writes
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
 *   --seed N               the mix drawn anew: every tenant's seed shifted by N x 1,000 [0]; a held-out
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
import { GOODPUT_ENTRY, sourceDigest } from "./source-digest.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** Taken before the run: the sources as loaded (bench/source-digest.ts). */
const source = sourceDigest(REPO, [GOODPUT_ENTRY]);

/**
 * The flood scenario: every tenant of the mix in turn at FLOOD_FACTOR x its rate, on the mix at
 * FLOOD_LOAD. Every tenant, not a chosen few: which flood a rule survives is the measurement (a
 * standard tenant's flood that stays within its share of the demand is the hard case, rag-b's).
 */
const FLOOD_TENANTS = MIX.tenants.map((t) => t.name);
const FLOOD_FACTOR = 5;
const FLOOD_LOAD = 1;
/**
 * The flood after history: the mix at its tenants' own rates for FLOOD_HISTORY_SECONDS (the
 * mix's own length; 394 s at x1), then one tenant at FLOOD_FACTOR x its rate for as long again,
 * measured over the requests that arrive from the flood's start (beside the same window of the
 * same mix without the flood). What a flood is in production: a change from what a tenant sent
 * before, which the flood from the first request cannot show (no router can tell it from a tenant
 * that was always large, docs/ADMISSION.md). The quick slice: 300 s, then 150 s.
 */
const FLOOD_HISTORY_SECONDS = MIX.durationSeconds;
const QUICK_FLOOD_HISTORY_SECONDS = 300;
const QUICK_FLOOD_SECONDS = 150;

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
/** Each flood task's tenant, and its start (s) for a flood after history; `tenant` undefined: the after-history window's baseline. */
const floodMeta: Array<{ tenant: string | undefined; from: number }> = [];
const mix = workloads.find((w) => w.name === "mix");
if (values.flood && mix) {
  const tenants = quick ? FLOOD_TENANTS.slice(0, 1) : FLOOD_TENANTS;
  const history = quick ? QUICK_FLOOD_HISTORY_SECONDS : FLOOD_HISTORY_SECONDS;
  const durationSeconds = history + (quick ? QUICK_FLOOD_SECONDS : MIX.durationSeconds);
  const task = (e: (typeof mix.entries)[number], tenant: string | undefined, from: number): RunTask => ({
    workload: {
      name: "mix",
      quick,
      trace: values.trace!,
      seedOffset,
      ...(tenant ? { rateFactor: { [tenant]: FLOOD_FACTOR } } : {}),
      ...(from > 0 ? { rateFactorFromSeconds: from, durationSeconds } : {}),
    },
    load: FLOOD_LOAD,
    capacity: mix.capacity.speed,
    fleet,
    entry: { name: e.name, spec: e.spec },
    variant: tenant
      ? `flood ${tenant} x${FLOOD_FACTOR}${from > 0 ? ` from ${from} s` : ""}`
      : `no flood, ${durationSeconds} s from ${from} s`,
    keepOutcomes: false,
    ...(from > 0 ? { fromSeconds: from } : {}),
  });
  for (const from of [0, history]) {
    for (const tenant of tenants) {
      if (!MIX.tenants.some((t) => t.name === tenant)) throw new Error(`unknown flood tenant ${tenant}`);
      for (const e of mix.entries) {
        floodTasks.push(task(e, tenant, from));
        floodMeta.push({ tenant, from });
      }
    }
  }
  // The after-history floods' baseline: the same longer mix without the flood, the same window.
  for (const e of mix.entries) {
    floodTasks.push(task(e, undefined, history));
    floodMeta.push({ tenant: undefined, from: history });
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
const windowBase = floodRuns.filter((_, i) => floodMeta[i]!.tenant === undefined);
for (const from of [...new Set(floodMeta.map((m) => m.from))]) {
  for (const tenant of [...new Set(floodMeta.map((m) => m.tenant))]) {
    if (tenant === undefined) continue;
    floods.push({
      tenant,
      factor: FLOOD_FACTOR,
      load: FLOOD_LOAD,
      runs: floodRuns.filter((_, i) => floodMeta[i]!.tenant === tenant && floodMeta[i]!.from === from),
      ...(from > 0 ? { fromSeconds: from, baseRuns: windowBase } : {}),
    });
  }
}

const command = ["node bench/goodput.ts", ...process.argv.slice(2)].join(" ");
writeReport({ outDir, command, source, quick, fleet, loads, noises, workloads, runs: sweepRuns, floods, runtimeNote: RUNTIME_NOTE });
log(`done in ${((performance.now() - started) / 1000).toFixed(0)} s; wrote ${join(outDir, "GOODPUT.md")}`);
