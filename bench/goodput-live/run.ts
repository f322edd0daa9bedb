/**
 * `npm run bench:goodput-live`: goodput past saturation through the real workers (issue 30's
 * proof), against a naive prefix-affinity router, in the same run.
 *
 *   npm run bench:goodput-live                  # full run (~17 min on 2 cores): bench/goodput-live/RESULTS.md + results.json
 *   npm run bench:goodput-live -- --quick       # < 1 min: .tmp/bench-goodput-live-quick/
 *   npm run bench:goodput-live -- --render      # RESULTS.md again from its results.json (nothing runs)
 *   node bench/goodput-live/run.ts [--quick] [--out DIR] [--loads 1,2,3] [--nodes 8] [--start 9000] [--requests 360]
 *        [--time-factor 1] [--runtime workerd|wrangler-dev] [--prefix-chars 4096] [--give-up-s 60]
 *        [--routers warmpath,naive] [--trace PATH] [--wait-quiet SECONDS] [--[no-]twin]
 *
 * What runs, for each load and each router, on a fresh system (empty caches, an empty Durable
 * Object store):
 * - warmpath: `npm start`'s topology (scripts/system.ts): the edge worker, the region's worker and
 *   its region Durable Object, generated from wrangler.toml as a deploy generates them; by default
 *   each worker in a workerd process of its own (`runtime: "workerd"`, the deployed bundles without
 *   wrangler dev's proxy), `--runtime wrangler-dev` for `npm start`'s own process. wrangler.toml's
 *   development configuration with one region (us-east), every setting at its default but the
 *   region's configured prefill rate, set to the fleet's.
 * - naive: the same fleet behind naive-router.ts (rendezvous hashing of the prompt's first
 *   characters; no load awareness, no admission), a Node process of its own.
 * - The fleet: the simulated GPU nodes of fleet/ (real HTTP servers with their own KV caches and
 *   timing), in this process; the client (client.ts) in a forked process of its own.
 * - The workload: a slice of the Mooncake conversation trace (workload.ts). Load L replays its
 *   first L x `--requests` requests open loop at L times their own capacity (1x = bench:goodput's
 *   definition: the speed at which the greedy oracle keeps the fleet's prefill 100% busy, computed
 *   in simulated time on the same requests and fleet shape), so every load's arrivals last about
 *   as long: a sustained overload, not a burst.
 * - Scored by the client (score.ts): a request is in time if its first content chunk came within
 *   `max(1 s, 5 x prompt tokens / the fleet's configured prefill rate)` (divided by the time
 *   factor); refused and unanswered requests count as misses.
 * Machine health, so a reader can tell the machine kept up: the client's and the fleet's
 * event-loop lag, the client's send lag against the schedule, and the CPU of every process.
 */
import { execFileSync, fork, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as prettier from "prettier";
import { parse as parseToml } from "smol-toml";
import { parseFleet, type FleetConfig } from "../../fleet/config.ts";
import { startFleet, type Fleet } from "../../fleet/fleet.ts";
import { freePort } from "../../scripts/ports.ts";
import { ROOT, startSystem, type System } from "../../scripts/system.ts";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { parseLogLine } from "../../src/contracts/decision-line.ts";
import { cpuMs, descendants } from "../e2e/procs.ts";
import { monitorLoopLag, type LoopLag, type ReplayResult, type RequestRecord } from "./client.ts";
import type { ReplayCommand } from "./client-child.ts";
import { renderReport } from "./report.ts";
import { clientRefusals, counted, edgeRefusals, refusalMismatches } from "./refusals.ts";
import { summarise, type Summary } from "./score.ts";
import {
  capacity,
  DEFAULT_TRACE,
  loadSlice,
  objectiveMs,
  twinFigures,
  twinWorkload,
  type Capacity,
  type FleetShape,
  type SliceOptions,
  type TwinFigures,
} from "./workload.ts";

const HERE = dirname(fileURLToPath(import.meta.url));

const { values: flags } = parseArgs({
  allowNegative: true,
  options: {
    quick: { type: "boolean", default: false },
    out: { type: "string" },
    loads: { type: "string" },
    nodes: { type: "string" },
    start: { type: "string" },
    requests: { type: "string" },
    "time-factor": { type: "string" },
    runtime: { type: "string" },
    "prefix-chars": { type: "string" },
    "give-up-s": { type: "string" },
    routers: { type: "string" },
    trace: { type: "string" },
    "wait-quiet": { type: "string" },
    twin: { type: "boolean" },
    /** Only RESULTS.md again, from the results.json beside it (the figures as they are: nothing runs). */
    render: { type: "boolean", default: false },
  },
});
const QUICK = flags.quick;

export type RouterName = "warmpath" | "naive";

/** The run's plan: the quick run is smaller and shorter, never another method. */
const PLAN = {
  loads: (flags.loads ?? (QUICK ? "2" : "1,2,3")).split(",").map(Number),
  nodes: Number(flags.nodes ?? (QUICK ? 2 : 8)),
  /** The held-out slice: past the first 3,000 requests (bench:goodput's --quick slice, the one worked on most). */
  start: Number(flags.start ?? 9000),
  /**
   * Requests per unit of load: load L replays the slice's first L x this many requests at L times
   * their own 1x, so every load's arrivals last about as long (a sustained overload, not a burst).
   */
  requests: Number(flags.requests ?? (QUICK ? 8 : 360)),
  /** Quick: 4x faster than model time, so the smoke test takes seconds (the router's own milliseconds then weigh 4x more). */
  timeFactor: Number(flags["time-factor"] ?? (QUICK ? 4 : 1)),
  runtime: (flags.runtime ?? "workerd") as "workerd" | "wrangler-dev",
  prefixChars: Number(flags["prefix-chars"] ?? 4096),
  giveUpMinMs: Number(flags["give-up-s"] ?? (QUICK ? 10 : 60)) * 1000,
  giveUpFactor: 1.5,
  routers: (flags.routers ?? "warmpath,naive").split(",") as RouterName[],
  trace: flags.trace ?? DEFAULT_TRACE,
  /** Before each run, wait up to this many seconds for other work on the machine to fall under QUIET_CORES. */
  waitQuietS: Number(flags["wait-quiet"] ?? 0),
  /** bench:goodput's simulated-time twin on the same requests, for context (off in the quick run; --twin turns it on). */
  twin: flags.twin ?? !QUICK,
};
const OUT = flags.out ?? (QUICK ? join(ROOT, ".tmp", "bench-goodput-live-quick") : HERE);

/** The fleet: fleet/'s node defaults (fleet/README.md), one region. */
const NODE = {
  kv_capacity_tokens: 200_000,
  prefill_tokens_per_second: 5_000,
  decode_tokens_per_second: 30,
  max_running: 64,
  default_max_tokens: 64,
  report_interval_ms: 1_000,
};
const MODEL = "llama-3.1-8b-instruct";
/** Other work on the machine under this many cores counts as quiet (--wait-quiet). */
const QUIET_CORES = 0.5;
/** How long the router's idle CPU is sampled before each replay. */
const IDLE_SAMPLE_MS = QUICK ? 1_000 : 2_000;

const log = (message: string) => console.log(`[bench:goodput-live ${new Date().toISOString().slice(11, 19)}] ${message}`);

interface DevConfig {
  vars: Record<string, unknown> & {
    WARMPATH_CONFIG: Record<string, unknown> & { regions: Array<Record<string, unknown> & { name: string; node_token_secret: string }> };
  };
}
const devConfig = parseToml(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as unknown as DevConfig;
const REGION = devConfig.vars.WARMPATH_CONFIG.regions[0]!;
const NODE_TOKEN = String(devConfig.vars[REGION.node_token_secret]);

/**
 * wrangler.toml's development configuration with its first region only, that region's configured
 * prefill rate the fleet's (in wall tokens/s), and, with a time factor, the default objective's 1 s
 * floor compressed alike. Everything else at its default: admission as it ships.
 */
function routerConfig(): unknown {
  const region: Record<string, unknown> = { ...REGION, prefill_tokens_per_second: NODE.prefill_tokens_per_second * PLAN.timeFactor };
  if (PLAN.timeFactor !== 1) region.admission = { objective_min_ms: Math.round(1000 / PLAN.timeFactor) };
  return { ...devConfig.vars.WARMPATH_CONFIG, regions: [region] };
}

function fleetConfig(): FleetConfig {
  return parseFleet({
    defaults: { models: [MODEL], ...NODE, time_factor: PLAN.timeFactor },
    regions: [{ name: REGION.name, token: NODE_TOKEN, nodes: Array.from({ length: PLAN.nodes }, (_, i) => ({ id: `gpu-${i}` })) }],
  });
}

// --render: the report's text again from its figures (a change to the report's wording), without
// a run: the figures, the command and the date stay the run's.
if (flags.render) {
  const md = await writeResults(JSON.parse(readFileSync(join(OUT, "results.json"), "utf8")) as Report, new Date().toISOString());
  log(`wrote ${relative(ROOT, md)} from ${relative(ROOT, join(OUT, "results.json"))}`);
  process.exit(0);
}

/**
 * Writes RESULTS.md from `report` and, after a run (no `renderedAt`), results.json beside it, both
 * formatted as the repository's Prettier configuration would, so `npm run format:check` stays
 * clean. Returns RESULTS.md's path.
 */
async function writeResults(report: Report, renderedAt?: string): Promise<string> {
  mkdirSync(OUT, { recursive: true });
  const md = join(OUT, "RESULTS.md");
  const options = (await prettier.resolveConfig(md)) ?? {};
  if (renderedAt === undefined) {
    const raw = JSON.stringify({ ...report, plan: { ...report.plan, trace: relative(ROOT, report.plan.trace) } });
    writeFileSync(join(OUT, "results.json"), await prettier.format(raw, { ...options, parser: "json" }));
  }
  writeFileSync(md, await prettier.format(renderReport(report, renderedAt), { ...options, parser: "markdown" }));
  return md;
}

// ---------------------------------------------------------------------------------------------
// The client's process.

const client: ChildProcess = fork(join(HERE, "client-child.ts"), { stdio: ["ignore", "inherit", "inherit", "ipc"] });

function clientReplay(cmd: ReplayCommand): Promise<ReplayResult> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`the client process exited (${code})`));
    client.once("exit", onExit);
    client.once("message", (m: { ok: boolean; result?: ReplayResult; error?: string }) => {
      client.off("exit", onExit);
      if (m.ok) resolve(m.result!);
      else reject(new Error(`the client failed: ${m.error}`));
    });
    client.send(cmd);
  });
}

// ---------------------------------------------------------------------------------------------
// The routers under test.

interface Running {
  url: string;
  headers: Record<string, string>;
  /** Processes of the router (CPU accounting). */
  routerPids(): number[];
  /**
   * warmpath's decision lines (answered requests), by `status decision`, and its other log events
   * by name: lines, some of them bounded per second (refusal lines), so never counted as requests.
   */
  decisions: Record<string, number>;
  events: Record<string, number>;
  /** warmpath's refusals so far, by `status code reason` (`warmpath_edge_refusals_total`: refusals.ts); none for naive. */
  refusals(): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

const bump = (m: Record<string, number>, k: string) => {
  m[k] = (m[k] ?? 0) + 1;
};

async function bootWarmpath(): Promise<Running> {
  const decisions: Record<string, number> = {};
  const events: Record<string, number> = {};
  const system: System = await startSystem({
    port: 0,
    runtime: PLAN.runtime,
    fleetConfig: fleetConfig(),
    config: routerConfig(),
    noAssets: true,
    onRouterOutput: (line) => {
      const at = line.indexOf('{"event":"');
      if (at < 0) return;
      // A line cut short parses to nothing: not counted.
      const e = parseLogLine(line.slice(at));
      if (e?.decision) bump(decisions, `${e.decision.status} ${e.decision.decision ?? "-"}`);
      else if (e?.invalid !== undefined) bump(events, `${String(e.json.event)} (not the contract's: src/contracts/decision-line.ts)`);
      else if (typeof e?.json.event === "string" && e.json.event) bump(events, e.json.event);
    },
  });
  return {
    url: system.url,
    headers: { authorization: `Bearer ${DEV_API_KEY}` },
    routerPids: () => system.processes().flatMap((p) => [p.pid, ...descendants(p.pid)]),
    decisions,
    events,
    refusals: () => routerRefusals(system.url),
    stop: () => system.stop(),
  };
}

/** The edge's refusal counter (GET /metrics; a local development server needs no admin token). */
async function routerRefusals(url: string): Promise<Record<string, number>> {
  const res = await fetch(`${url}/metrics`);
  if (!res.ok) throw new Error(`GET /metrics: ${res.status} ${(await res.text()).slice(0, 200)}`);
  return edgeRefusals(await res.text());
}

async function bootNaive(): Promise<Running> {
  const fleet: Fleet = await startFleet(fleetConfig());
  const port = await freePort();
  const args = [join(HERE, "naive-router.ts"), "--port", String(port), "--prefix-chars", String(PLAN.prefixChars)];
  for (const n of fleet.nodes) args.push("--node", `${n.id}=${n.url}`);
  const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (c: string) => {
      out += c;
      const m = /"url":"([^"]+)"/.exec(out);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (code) => reject(new Error(`the naive router exited (${code}): ${out}`)));
  });
  return {
    url,
    headers: { authorization: "Bearer none" },
    routerPids: () => [child.pid!],
    decisions: {},
    events: {},
    refusals: async () => ({}),
    async stop() {
      const exited = new Promise<void>((r) => child.once("exit", () => r()));
      child.kill("SIGTERM");
      await exited;
      await fleet.stop();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// CPU accounting.

/** Busy CPU ms of the whole machine so far (all cores), from /proc/stat. */
function machineBusyMs(): number {
  const cols = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  const busy = cols.slice(0, 8).reduce((a, b) => a + b, 0) - cols[3]! - cols[4]!;
  return busy * 10; // USER_HZ is 100 on Linux
}

const sumCpu = (pids: number[]) => pids.reduce((n, pid) => n + cpuMs(pid), 0);

/** Cores' worth of CPU each part used over a replay. */
export interface CpuUse {
  router: number;
  /** This process: the fleet's nodes (and the orchestration, idle during the replay). */
  fleet: number;
  client: number;
  /** Everything else on the machine (other engineers' work). */
  other: number;
  /** The whole machine, of os.availableParallelism() cores. */
  machine: number;
  /** The router's processes' idle rate (cores), measured for a moment before the replay. */
  routerIdle: number;
  /** The router's CPU ms per request sent, less its idle rate over the replay. */
  routerMsPerRequest: number;
}

// ---------------------------------------------------------------------------------------------
// One replay.

export interface RunResult {
  router: RouterName;
  load: number;
  /** Trace ms per wall ms. */
  speed: number;
  offeredRequestsPerSecond: number;
  wallS: number;
  /** The code at this run's boot (HEAD and the tracked files changed in the work tree). */
  code: { commit: string; dirty: string[] };
  /** With --wait-quiet: the cores other work used just before the run. */
  othersBefore: number | undefined;
  summary: Summary;
  clientLoopLagMs: LoopLag;
  fleetLoopLagMs: LoopLag;
  cpu: CpuUse;
  /** warmpath's decision lines by `status decision`: answered requests only (a refusal writes none) in runs since issue 31. */
  decisions: Record<string, number>;
  /** Other log lines by event (`refusal` lines are bounded per second: not a count of refusals). */
  events: Record<string, number>;
  /**
   * warmpath's refusals in the run by `status code reason`, from `warmpath_edge_refusals_total`,
   * checked against the client's own count. Absent in runs before issue 31, whose decision lines
   * counted them (`429 -`).
   */
  refusals?: Record<string, number>;
  /** Where the client's count differed, by `status code` (refusals.ts `refusalMismatches`; empty when they agree). */
  refusalMismatches?: string[];
  /** Per request: [id, outcome, status, ttft ms, code, node, cached tokens, send lag ms]. */
  records: Array<[number, string, number | null, number | null, string | null, string | null, number | null, number]>;
  /** Each lost request's id, code and what the client saw (the error's code and message): why it was lost. */
  lostDetails?: Array<{ id: number; code: string | null; detail: string | null }>;
}

/**
 * Waits (up to `maxSeconds`) until other work on the machine uses under QUIET_CORES, sampling 2 s
 * at a time; returns the cores it used in the last sample.
 */
async function waitForQuiet(maxSeconds: number): Promise<number> {
  const deadline = Date.now() + maxSeconds * 1000;
  const ours = () => sumCpu([process.pid, client.pid!]);
  for (;;) {
    const machine0 = machineBusyMs();
    const ours0 = ours();
    const t0 = performance.now();
    await new Promise((res) => setTimeout(res, 2000));
    const cores = Math.max(0, machineBusyMs() - machine0 - (ours() - ours0)) / (performance.now() - t0);
    if (cores < QUIET_CORES || Date.now() >= deadline) return cores;
    log(`other work on the machine uses ${cores.toFixed(2)} cores: waiting for it to settle`);
  }
}

async function runOne(
  router: RouterName,
  load: number,
  cap: Capacity,
  slice: SliceOptions,
  scored: ReturnType<typeof scoredRequests>,
): Promise<RunResult> {
  const speed = load * cap.speed * PLAN.timeFactor;
  const othersBefore = PLAN.waitQuietS > 0 ? await waitForQuiet(PLAN.waitQuietS) : undefined;
  // The workers are bundled from the work tree at boot: which code this run is.
  const code = codeState();
  log(`${router} at ${load}x: booting a fresh ${router === "warmpath" ? `system (${PLAN.runtime})` : "fleet and naive router"}`);
  const r = router === "warmpath" ? await bootWarmpath() : await bootNaive();
  try {
    const spanS = scored[scored.length - 1]!.arrivalMs / speed / 1000;
    log(
      `${router} at ${load}x: replaying ${scored.length} requests over ${spanS.toFixed(0)} s (${(scored.length / spanS).toFixed(1)} req/s)`,
    );
    const pids = () => ({ router: r.routerPids(), fleet: [process.pid], client: [client.pid!] });
    // The router's own idle rate (load reports, timers, an idle runtime), subtracted from its cost per request.
    const idle0 = sumCpu(r.routerPids());
    const idleT0 = performance.now();
    await new Promise((res) => setTimeout(res, IDLE_SAMPLE_MS));
    const routerIdle = (sumCpu(r.routerPids()) - idle0) / (performance.now() - idleT0);
    const before = pids();
    const refusals0 = await r.refusals();
    const cpu0 = { router: sumCpu(before.router), fleet: sumCpu(before.fleet), client: sumCpu(before.client), machine: machineBusyMs() };
    const fleetLoop = monitorLoopLag();
    const t0 = performance.now();
    const result = await clientReplay({
      target: { url: r.url, headers: r.headers },
      slice,
      speed,
      prefillRate: NODE.prefill_tokens_per_second,
      timeFactor: PLAN.timeFactor,
      giveUpFactor: PLAN.giveUpFactor,
      giveUpMinMs: PLAN.giveUpMinMs,
    });
    const wallMs = performance.now() - t0;
    const fleetLoopLagMs = fleetLoop.stop();
    const after = pids();
    const used = {
      router: sumCpu(after.router) - cpu0.router,
      fleet: sumCpu(after.fleet) - cpu0.fleet,
      client: sumCpu(after.client) - cpu0.client,
      machine: machineBusyMs() - cpu0.machine,
    };
    const cpu: CpuUse = {
      router: used.router / wallMs,
      fleet: used.fleet / wallMs,
      client: used.client / wallMs,
      other: Math.max(0, used.machine - used.router - used.fleet - used.client) / wallMs,
      machine: used.machine / wallMs,
      routerIdle,
      routerMsPerRequest: (used.router - routerIdle * wallMs) / scored.length,
    };
    // The last decision lines come a little after the answers.
    await new Promise((res) => setTimeout(res, 500));
    const summary = summarise(scored, result.records);
    // Every refusal the client saw should be in the router's counter, and nothing else; a request
    // the client gave up on before the router refused it is the router's only (said in the report).
    const refusals = counted(refusals0, await r.refusals());
    const mismatches = router === "warmpath" ? refusalMismatches(refusals, clientRefusals(result.records)) : [];
    if (mismatches.length) log(`${router} at ${load}x: the router's refusal count is not the client's: ${mismatches.join("; ")}`);
    log(
      `${router} at ${load}x: goodput ${(summary.goodput * 100).toFixed(1)}% (tokens ${(summary.tokenGoodput * 100).toFixed(1)}%), ` +
        `mean TTFT ${(summary.ttftMeanMs / 1000).toFixed(2)} s, answered ${summary.answered}, 429 ${JSON.stringify(summary.refused429)}, ` +
        `503 ${JSON.stringify(summary.refused503)}, errors ${JSON.stringify(summary.errors)}, gave up ${summary.gaveUp}, lost ${JSON.stringify(summary.lost)}; ` +
        `client lag p99 ${result.loopLagMs.p99.toFixed(1)} ms, fleet lag p99 ${fleetLoopLagMs.p99.toFixed(1)} ms, machine ${cpu.machine.toFixed(2)} cores`,
    );
    return {
      router,
      load,
      speed,
      offeredRequestsPerSecond: scored.length / spanS,
      wallS: wallMs / 1000,
      othersBefore,
      code,
      summary,
      clientLoopLagMs: result.loopLagMs,
      fleetLoopLagMs,
      cpu,
      decisions: { ...r.decisions },
      events: { ...r.events },
      ...(router === "warmpath" ? { refusals, refusalMismatches: mismatches } : {}),
      records: result.records.map((x: RequestRecord) => [
        x.id,
        x.outcome,
        x.status ?? null,
        x.ttftMs === undefined ? null : Math.round(x.ttftMs),
        x.code ?? null,
        x.node ?? null,
        x.cachedTokens ?? null,
        Math.round(x.sendLagMs * 10) / 10,
      ]),
      lostDetails: result.records
        .filter((x: RequestRecord) => x.outcome === "lost")
        .map((x: RequestRecord) => ({ id: x.id, code: x.code ?? null, detail: x.detail?.slice(0, 200) ?? null })),
    };
  } finally {
    await r.stop();
  }
}

function scoredRequests(slice: SliceOptions) {
  return loadSlice(slice).map((q) => ({
    id: q.id,
    arrivalMs: q.arrivalMs,
    promptTokens: q.promptTokens,
    objectiveMs: objectiveMs(q.promptTokens, NODE.prefill_tokens_per_second, PLAN.timeFactor),
  }));
}

// ---------------------------------------------------------------------------------------------
// Machine and versions.

function git(args: string[]): string {
  try {
    return execFileSync("git", args, { cwd: ROOT, encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
}

/** The code the workers are bundled from now: HEAD and the tracked files changed in the work tree. */
function codeState(): { commit: string; dirty: string[] } {
  return {
    commit: git(["rev-parse", "--short", "HEAD"]),
    dirty: git(["status", "--porcelain", "--untracked-files=no"])
      .split("\n")
      .filter(Boolean)
      .map((l) => l.replace(/^\s*\S+\s+/, "")),
  };
}

function machine() {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  return {
    cpu: /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1]?.trim() ?? os.cpus()[0]?.model ?? "unknown",
    cores: os.availableParallelism(),
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    /** At the start of the run; each run records its own (other engineers may commit or edit meanwhile). */
    ...codeState(),
    commitSubject: git(["log", "-1", "--format=%s"]).slice(0, 120),
  };
}

// ---------------------------------------------------------------------------------------------

/** One load's requests: the slice's first `requests`, replayed at `load` times their own 1x. */
export interface LoadPlan {
  load: number;
  requests: number;
  /** Trace seconds from the first request to the last. */
  traceSpanS: number;
  meanPromptTokens: number;
  conversations: number;
  capacity: Capacity;
  /** bench:goodput's twin on the same requests: simulated time, instantaneous network (empty with --no-twin). */
  twin: TwinFigures[];
}

export interface Report {
  quick: boolean;
  command: string;
  started: string;
  durationS: number;
  machine: ReturnType<typeof machine>;
  loadAverage: { start: number[]; end: number[] };
  plan: typeof PLAN;
  node: typeof NODE;
  loads: LoadPlan[];
  runs: RunResult[];
}

async function main(): Promise<void> {
  const started = new Date();
  const loadStart = os.loadavg();
  const atStart = machine();
  const sliceOf = (count: number): SliceOptions => ({
    trace: PLAN.trace,
    start: PLAN.start,
    count,
    model: MODEL,
    maxAnswerTokens: NODE.default_max_tokens,
  });
  const countAt = (load: number) => Math.round(load * PLAN.requests);
  const whole = sliceOf(Math.max(...PLAN.loads.map(countAt)));
  const live = loadSlice(whole);
  const shape: FleetShape = {
    nodes: PLAN.nodes,
    kvCapacityTokens: NODE.kv_capacity_tokens,
    prefillRate: NODE.prefill_tokens_per_second,
    decodeRate: NODE.decode_tokens_per_second,
    maxRunning: NODE.max_running,
  };
  // The twin needs the router's hashes of every trace line up to the slice's end (a few seconds): not in the quick run.
  const twin = PLAN.twin ? twinWorkload(whole) : undefined;
  const loads: LoadPlan[] = PLAN.loads.map((load) => {
    const sub = live.slice(0, countAt(load));
    const cap = capacity(sub, shape);
    const tokens = sub.reduce((n, r) => n + r.promptTokens, 0);
    return {
      load,
      requests: sub.length,
      traceSpanS: sub[sub.length - 1]!.arrivalMs / 1000,
      meanPromptTokens: tokens / sub.length,
      conversations: new Set(sub.map((r) => r.conversation)).size,
      capacity: cap,
      twin: twin ? twinFigures({ ...twin, requests: twin.requests.slice(0, sub.length) }, load, cap.speed, shape) : [],
    };
  });
  log(
    `${QUICK ? "quick" : "full"} run: ${PLAN.nodes} nodes, time factor ${PLAN.timeFactor}; ` +
      loads
        .map(
          (l) =>
            `${l.load}x: trace lines ${PLAN.start}-${PLAN.start + l.requests - 1} at ${l.load} x ${l.capacity.speed.toFixed(3)} the trace's speed ` +
            `(${(l.load * l.capacity.requestsPerSecond).toFixed(2)} req/s over ${(l.traceSpanS / l.load / l.capacity.speed).toFixed(0)} s)`,
        )
        .join("; ") +
      `; results to ${relative(ROOT, OUT) || "."}`,
  );
  const runs: RunResult[] = [];
  try {
    for (const [i, l] of loads.entries()) {
      const slice = sliceOf(l.requests);
      const scored = scoredRequests(slice);
      // Alternate which router goes first, so neither always runs on a machine the other just warmed.
      const order = i % 2 === 0 ? PLAN.routers : [...PLAN.routers].reverse();
      for (const router of order) runs.push(await runOne(router, l.load, l.capacity, slice, scored));
    }
  } finally {
    client.disconnect();
  }
  const report: Report = {
    quick: QUICK,
    command: `npm run bench:goodput-live${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`,
    started: started.toISOString(),
    durationS: (Date.now() - started.getTime()) / 1000,
    machine: atStart,
    loadAverage: { start: loadStart, end: os.loadavg() },
    plan: PLAN,
    node: NODE,
    loads,
    runs,
  };
  const md = await writeResults(report);
  log(`wrote ${relative(ROOT, md)} and ${relative(ROOT, join(OUT, "results.json"))} in ${report.durationS.toFixed(0)} s`);
}

await main();
