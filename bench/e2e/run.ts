/**
 * End to end: what the router adds over calling a node directly as `npm start` runs it, held
 * against a plain proxy's added time, and its CPU per request (issue 32 item 6: `npm start`'s
 * topology adds <= 5 ms p50 one request at a time, and its own time under load stays within a few
 * times a plain proxy's).
 *
 *   npm run bench:e2e                 # full run (~4 min on 2 cores): writes bench/e2e/RESULTS.md
 *   npm run bench:e2e -- --quick      # ~1.5 min: writes .tmp/bench-e2e-quick/RESULTS.md
 *   node bench/e2e/run.ts [--quick] [--out FILE] [--rates 25,50,100] [--step-seconds 12] [--wait-quiet SECONDS] [--no-dev]
 *
 * What it measures, and why this way:
 * - The system `npm start` runs (scripts/start.ts: scripts/system.ts `startSystem` with runtime
 *   `workerd-single`, the edge and region workers in one workerd process, the dashboard's assets
 *   included) with nodes whose model time is effectively zero (prefill and decode at 10^9
 *   tokens/s, one-token answers), so what remains of a request is the HTTP path itself.
 * - Three paths, interleaved in the same steps: the same tiny chat request (a few hundred
 *   characters, max_tokens 1, streamed and not) through the router, through a plain Node.js
 *   reverse proxy (plain-proxy.ts, a process of its own) and straight to a node. All three see the
 *   same machine load at the same moments, so the differences between them are the router's and
 *   the proxy's, not the machine's mood. Percentiles are of each path's own sample; "added"
 *   figures are differences of percentiles (the paths' requests are not paired).
 * - One at a time (rounds in one boot, the median round reported: the unloaded figure and its
 *   spread), then open loop (Poisson arrivals, each path at the same rate) at rising rates until
 *   the router saturates: a closed loop would slow down with the router and hide its queueing.
 *   Under load the router's own time is set against the plain proxy's (report.ts loadVerdict).
 * - CPU per request from /proc (utime + stime) of each process around each step, less its idle
 *   rate: the workerd running the workers and their objects, its Node.js host (workerd-host, which
 *   receives the log lines), the plain proxy.
 * - Secondary, labelled as such: the same workers under `wrangler dev` (what `npm start`,
 *   and the tests and benchmarks taking scripts/system.ts's default, ran before; `npm run dev` runs
 *   wrangler dev too, on wrangler.toml's single-worker composition), one at
 *   a time and at one rate, with the plain proxy interleaved too (`--no-dev` leaves it out). Where the router's time and CPU go per stage is bench:wan's
 *   (bench/wan/RESULTS.md), not this benchmark's.
 *
 * The machine may be shared: the report states the CPU other processes used during each step.
 */
import { execFileSync, fork, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import * as prettier from "prettier";
import { parse as parseToml } from "smol-toml";
import { parseFleet, type FleetConfig } from "../../fleet/config.ts";
import { ROOT, startSystem, type System } from "../../scripts/system.ts";
import { parseLogLine } from "../../src/contracts/decision-line.ts";
import { percentileOf } from "../../src/core/stats.ts";
import type { LoadCommand, StepResult, Variant } from "./load.ts";
import { startPlainProxy, type PlainProxy } from "./plain-proxy-launch.ts";
import {
  commandLine,
  cpuMs,
  descendants,
  difference,
  findDevProcesses,
  findHostProcesses,
  snapshot,
  startTime,
  workerdSet,
  type CpuSnapshot,
  type DevProcesses,
} from "./procs.ts";
import { medianRound, renderReport, saturated, type Path, type Report, type StepRow, type SystemRun } from "./report.ts";

const HERE = dirname(fileURLToPath(import.meta.url));

const { values: flags } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    out: { type: "string" },
    rates: { type: "string" },
    "step-seconds": { type: "string" },
    "wait-quiet": { type: "string", default: "0" },
    "no-dev": { type: "boolean", default: false },
  },
});
const quick = flags.quick;

/** How much of everything: the quick run trades precision for time, never the method. */
const PLAN = quick
  ? { warmup: 60, sequential: 60, rounds: 3, rates: [50, 150], stepMs: 5_000, devRate: 50 }
  : { warmup: 150, sequential: 300, rounds: 3, rates: [25, 50, 100, 200, 400], stepMs: 12_000, devRate: 50 };
if (flags.rates) PLAN.rates = flags.rates.split(",").map(Number);
if (flags["step-seconds"]) PLAN.stepMs = Number(flags["step-seconds"]) * 1000;
// A quick run never overwrites the full run's results.
const OUT = flags.out ?? (quick ? join(ROOT, ".tmp", "bench-e2e-quick", "RESULTS.md") : join(ROOT, "bench", "e2e", "RESULTS.md"));

/** Requests in flight per target before the generator sheds (counted as errors): bounds a saturated step. */
const MAX_INFLIGHT = 256;
const TIMEOUT_MS = 30_000;
/**
 * Tenants the router's requests rotate over. The edge rate limiter binding (wrangler.toml: 1,200
 * requests a minute per tenant, 20/s, simulated locally) would refuse a single tenant within
 * seconds at these rates; 400 req/s over 64 tenants is 6.25/s each, under a third of the limit
 * (over 16, a run's 200 req/s step was refused 12 times). Each request still pays the limiter call.
 */
const TENANTS = 64;
const NODES = 4;
/** Idle window measured before the steps: the background CPU (load reports, timers) subtracted from each step. */
const IDLE_MS = 3_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (message: string) => console.log(`[bench:e2e ${new Date().toISOString().slice(11, 19)}] ${message}`);

// ---------------------------------------------------------------------------------------------
// The system under test.

interface DevConfig {
  vars: Record<string, unknown> & {
    WARMPATH_CONFIG: Record<string, unknown> & { regions: Array<{ name: string; node_token_secret: string }> };
  };
}
const devConfig = parseToml(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as unknown as DevConfig;
const REGION = devConfig.vars.WARMPATH_CONFIG.regions[0]!;
const NODE_TOKEN = String(devConfig.vars[REGION.node_token_secret]);
const KEYS = Array.from({ length: TENANTS }, (_, i) => `wp-e2e-key-${i}-local-only`);

/**
 * wrangler.toml's development configuration (what `npm start` runs), with one region (every
 * request takes the same path) and the benchmark's tenants; the decision log at its default, on.
 */
function routerConfig(): unknown {
  return {
    ...devConfig.vars.WARMPATH_CONFIG,
    regions: [REGION],
    tenants: KEYS.map((key, i) => ({ id: `e2e-${i}`, api_key_sha256: [createHash("sha256").update(key).digest("hex")] })),
    decision_log_sample_rate: 1,
  };
}

/** Nodes with no model time to speak of: what is left of a request is HTTP. */
const FLEET: FleetConfig = parseFleet({
  defaults: { prefill_tokens_per_second: 1e9, decode_tokens_per_second: 1e9, default_max_tokens: 1, max_running: 1024 },
  regions: [{ name: REGION.name, token: NODE_TOKEN, nodes: Array.from({ length: NODES }, (_, i) => ({ id: `e2e-${i}` })) }],
});

/** One decision line of the worker's log, as far as timing goes (the worker's clock: whole ms). */
interface DecisionTiming {
  step: string;
  firstByteMs: number;
  durationMs: number;
}

type Runtime = SystemRun["runtime"];

interface Running {
  system: System;
  runtime: Runtime;
  plain: PlainProxy;
  dev: DevProcesses;
  /** The workerd processes (pid@start) when `dev` was looked up. */
  devSet: string;
  decisions: DecisionTiming[];
  /** Router log events other than request lines, by event name (errors show up here). */
  events: Map<string, number>;
  /** Steps during which a tracked process was replaced, and which. */
  restarts: string[];
  setStep(label: string | undefined): void;
}

/** The processes serving now, looked up the way the runtime lays them out. */
async function findProcesses(runtime: Runtime, system: System): Promise<DevProcesses> {
  return runtime === "workerd-single"
    ? findHostProcesses(system.router.pid!, system.url)
    : findDevProcesses(system.router.pid!, system.url);
}

/**
 * Boots the workers as `npm start` runs them (workerd-single) or under wrangler dev (startSystem's
 * default), and a plain proxy in front of the same nodes.
 */
async function boot(runtime: Runtime): Promise<Running> {
  const decisions: DecisionTiming[] = [];
  const events = new Map<string, number>();
  let step: string | undefined;
  const system = await startSystem({
    port: 0,
    runtime,
    fleetConfig: FLEET,
    config: routerConfig(),
    onRouterOutput: (line) => {
      const at = line.indexOf('{"event":"');
      if (at < 0) return;
      const parsed = parseLogLine(line.slice(at));
      if (!parsed) return;
      const d = parsed.decision;
      if (parsed.json.event !== "request") {
        if (typeof parsed.json.event === "string" && parsed.json.event)
          events.set(parsed.json.event, (events.get(parsed.json.event) ?? 0) + 1);
      } else if (parsed.invalid !== undefined) {
        // A decision line the contract (src/contracts/decision-line.ts) does not describe: counted, so the report shows it.
        events.set("request (not the contract's)", (events.get("request (not the contract's)") ?? 0) + 1);
      } else if (step !== undefined && d?.first_byte_ms !== undefined) {
        decisions.push({ step, firstByteMs: d.first_byte_ms, durationMs: d.duration_ms });
      }
    },
  });
  let plain: PlainProxy | undefined;
  try {
    plain = await startPlainProxy(system.fleet!.nodes.map((n) => n.url));
    const dev = await findProcesses(runtime, system);
    const devSet = workerdSet(system.router.pid!);
    return { system, runtime, plain, dev, devSet, decisions, events, restarts: [], setStep: (label) => (step = label) };
  } catch (e) {
    await plain?.stop();
    await system.stop();
    throw e;
  }
}

async function shutdown(r: Running): Promise<void> {
  await r.plain.stop();
  await r.system.stop();
}

// ---------------------------------------------------------------------------------------------
// The load generator (its own process) and CPU accounting.

const client: ChildProcess = fork(join(HERE, "load-child.ts"), { stdio: ["ignore", "inherit", "inherit", "ipc"] });

/** Runs one command in the load generator; rejects if it dies. */
function load(cmd: LoadCommand): Promise<StepResult> {
  return new Promise<StepResult>((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`load generator exited (${code})`));
    client.once("exit", onExit);
    client.once("message", (m) => {
      client.off("exit", onExit);
      resolve(m as StepResult);
    });
    client.send(cmd);
  });
}

/** Busy CPU milliseconds of the whole machine so far (all cores), from /proc/stat. */
function machineBusyMs(): number {
  const cols = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal: busy is everything but idle and iowait.
  const busy = cols.slice(0, 8).reduce((a, b) => a + b, 0) - cols[3]! - cols[4]!;
  return busy * 10; // USER_HZ is 100 on Linux
}

/** The processes whose CPU is accounted, by role (report.ts StepRow.cpuPerRouterRequest). */
function tracked(r: Running): Record<string, number> {
  const pids: Record<string, number> = {
    workerd: r.dev.userWorkerd,
    host: r.dev.wrangler,
    plain: r.plain.pid,
    fleet: process.pid,
    client: client.pid!,
  };
  if (r.dev.proxyWorkerd !== undefined) pids.proxy = r.dev.proxyWorkerd;
  return pids;
}

/** Everything this benchmark runs: the router's whole process tree, the plain proxy, this process (the fleet) and the client. */
function oursMs(r: Running): number {
  return [r.system.router.pid!, ...descendants(r.system.router.pid!), r.plain.pid, process.pid, client.pid!].reduce(
    (sum, pid) => sum + cpuMs(pid),
    0,
  );
}

interface Measured {
  result: StepResult;
  wallMs: number;
  /** CPU ms per tracked process during the step, less its idle rate. */
  cpu: CpuSnapshot;
  /** Cores' worth of CPU used by other work on the machine during the step. */
  otherCores: number;
}

/** Runs a load command with CPU sampled around it and the decision lines labelled with `label`. */
async function measure(r: Running, label: string, cmd: LoadCommand, idle: CpuSnapshot): Promise<Measured> {
  r.setStep(label);
  // wrangler may have started a new runtime since the processes were looked up (the old one can
  // linger, idle): measure the one serving now.
  if (workerdSet(r.system.router.pid!) !== r.devSet) {
    r.restarts.push(`before ${label}: new workerd processes (${workerdSet(r.system.router.pid!)})`);
    log(`the workerd processes changed before "${label}": looking them up again`);
    r.dev = await findProcesses(r.runtime, r.system);
    r.devSet = workerdSet(r.system.router.pid!);
  }
  const pids = tracked(r);
  const identity = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, startTime(pid)]));
  const runtimes = workerdSet(r.system.router.pid!);
  const before = snapshot(pids);
  const machine0 = machineBusyMs();
  const ours0 = oursMs(r);
  const t0 = performance.now();
  const result = await load(cmd);
  const wallMs = performance.now() - t0;
  const cpu = difference(snapshot(pids), before);
  const other = machineBusyMs() - machine0 - (oursMs(r) - ours0);
  for (const name of Object.keys(cpu)) cpu[name] = cpu[name]! - ((idle[name] ?? 0) * wallMs) / 1000;
  // A process replaced during the step (wrangler restarting workerd) has no meaningful difference:
  // its figure is dropped, the step is noted, and the processes are looked up again for the next.
  const replaced = Object.keys(pids).filter((k) => identity[k] === undefined || startTime(pids[k]!) !== identity[k]);
  if (workerdSet(r.system.router.pid!) !== runtimes && !replaced.includes("workerd")) replaced.push("workerd");
  if (replaced.length > 0) {
    for (const k of replaced) cpu[k] = NaN;
    r.restarts.push(`${label}: ${replaced.join(", ")}`);
    log(`${replaced.join(", ")} replaced during "${label}": its CPU is not counted`);
    r.dev = await findProcesses(r.runtime, r.system);
    r.devSet = workerdSet(r.system.router.pid!);
  }
  // The last log lines of the step arrive a little after its answers.
  await sleep(300);
  r.setStep(undefined);
  return { result, wallMs, cpu, otherCores: Math.max(0, other) / wallMs };
}

/** Other work below this many cores counts as a quiet machine (`--wait-quiet`). */
const QUIET_CORES = 0.25;

/**
 * Waits (up to `maxSeconds`) until processes other than this benchmark use under QUIET_CORES of
 * CPU: on a shared machine a run started during someone else's test suite measures mostly that.
 * Returns the other work's last measured CPU, in cores.
 */
async function waitForQuiet(maxSeconds: number): Promise<number> {
  const deadline = Date.now() + maxSeconds * 1000;
  const ours = () => cpuMs(process.pid) + cpuMs(client.pid!);
  for (;;) {
    const machine0 = machineBusyMs();
    const ours0 = ours();
    const t0 = performance.now();
    await sleep(2000);
    const cores = Math.max(0, machineBusyMs() - machine0 - (ours() - ours0)) / (performance.now() - t0);
    if (cores < QUIET_CORES || Date.now() >= deadline) return cores;
    log(`other work on the machine uses ${cores.toFixed(2)} cores: waiting for it to settle`);
  }
}

/** Background CPU per tracked process with no requests, in ms per second. */
async function idleRates(r: Running): Promise<CpuSnapshot> {
  const pids = tracked(r);
  const before = snapshot(pids);
  const t0 = performance.now();
  await sleep(IDLE_MS);
  const seconds = (performance.now() - t0) / 1000;
  return Object.fromEntries(Object.entries(difference(snapshot(pids), before)).map(([k, v]) => [k, v / seconds]));
}

// ---------------------------------------------------------------------------------------------
// Request variants: the three paths, each with a non-streamed and a streamed request.

const PATHS: Path[] = ["router", "plain", "direct"];

function variants(r: Running): Variant[] {
  const nodes = r.system.fleet!.nodes.map((n) => n.url);
  const chat = "/v1/chat/completions";
  const v = (path: Path, urls: string[], body: "json" | "stream", keys: string[] = []): Variant => ({
    label: `${path} ${body}`,
    agent: path,
    urls,
    path: chat,
    body,
    keys,
    method: "POST",
  });
  return [
    v("router", [r.system.url], "json", KEYS),
    v("router", [r.system.url], "stream", KEYS),
    v("plain", [r.plain.url], "json"),
    v("plain", [r.plain.url], "stream"),
    v("direct", nodes, "json"),
    v("direct", nodes, "stream"),
  ];
}

/** A step's row: per-path percentiles, rates, errors, CPU per request, the worker's own timings. */
function stepRow(r: Running, label: string, offered: number | undefined, m: Measured): StepRow {
  const by = new Map(m.result.variants.map((v) => [v.label, v]));
  const of = (path: Path) => m.result.variants.filter((v) => v.label.startsWith(`${path} `));
  // Answered: a complete answer, or an HTTP error the router sent (it did the work of answering).
  const answered = (path: Path) =>
    of(path).reduce((n, v) => n + v.ok + Object.entries(v.errors).reduce((e, [k, c]) => e + (k.startsWith("http-") ? c : 0), 0), 0);
  const seconds = Math.max(...m.result.variants.map((v) => v.lastEndMs)) / 1000;
  const perPath = <T>(f: (path: Path) => T) => Object.fromEntries(PATHS.map((path) => [path, f(path)])) as Record<Path, T>;
  const errors = (path: Path) => {
    const out: Record<string, number> = {};
    for (const v of of(path)) for (const [k, c] of Object.entries(v.errors)) out[k] = (out[k] ?? 0) + c;
    return out;
  };
  const pct = (name: string, what: "ttfb" | "total", p: number) => percentileOf(by.get(name)?.[what] ?? [], p);
  const latencyOf = (name: string) => ({
    ttfb50: pct(name, "ttfb", 0.5),
    ttfb99: pct(name, "ttfb", 0.99),
    end50: pct(name, "total", 0.5),
    end99: pct(name, "total", 0.99),
  });
  const lines = r.decisions.filter((d) => d.step === label);
  const routerAnswered = answered("router");
  const plainAnswered = answered("plain");
  const { plain: plainCpu, ...routerSide } = m.cpu;
  return {
    label,
    offered,
    achieved: perPath((path) => of(path).reduce((n, v) => n + v.ok, 0) / seconds),
    sent: perPath((path) => of(path).reduce((n, v) => n + v.sent, 0)),
    errors: perPath(errors),
    latency: (["json", "stream"] as const).map((kind) => ({
      kind,
      router: latencyOf(`router ${kind}`),
      plain: latencyOf(`plain ${kind}`),
      direct: latencyOf(`direct ${kind}`),
    })),
    cpuPerRouterRequest: Object.fromEntries(Object.entries(routerSide).map(([k, v]) => [k, routerAnswered > 0 ? v / routerAnswered : NaN])),
    cpuPerPlainRequest: plainAnswered > 0 ? (plainCpu ?? NaN) / plainAnswered : NaN,
    answered: { router: routerAnswered, plain: plainAnswered },
    otherCores: m.otherCores,
    lagP99Ms: m.result.lagP99Ms,
    worker:
      lines.length > 0
        ? {
            lines: lines.length,
            firstByte50: percentileOf(
              lines.map((l) => l.firstByteMs),
              0.5,
            ),
            duration50: percentileOf(
              lines.map((l) => l.durationMs),
              0.5,
            ),
            duration99: percentileOf(
              lines.map((l) => l.durationMs),
              0.99,
            ),
          }
        : undefined,
  };
}

/** The six variants one at a time, in shuffled cycles (the unloaded figure). */
function sequential(r: Running, count: number, seed: number): LoadCommand {
  return { type: "sequential", count, variants: variants(r), timeoutMs: TIMEOUT_MS, seed };
}

/** The six variants open-loop: the router, the plain proxy and the direct path each at `rate` requests/s (half streamed). */
function openLoop(r: Running, rate: number, seed: number): LoadCommand {
  return {
    type: "open",
    ratePerVariant: rate / 2,
    durationMs: PLAN.stepMs,
    variants: variants(r),
    maxInflightPerAgent: MAX_INFLIGHT,
    timeoutMs: TIMEOUT_MS,
    seed,
  };
}

/**
 * One system: boot, warm up, idle CPU, one-at-a-time rounds, then the open-loop rates (stopping
 * after the first saturated one).
 */
async function measureSystem(runtime: Runtime, rounds: number, rates: number[]): Promise<{ run: SystemRun; workerdBin: string }> {
  const r = await boot(runtime);
  try {
    // Read while it runs: the report names the workerd build measured.
    const bin = workerdBin(r.dev.userWorkerd);
    log(`${runtime}: router ${r.system.url}, plain proxy ${r.plain.url}, ${NODES} nodes; warming up`);
    await load(sequential(r, PLAN.warmup, 1));
    const idle = await idleRates(r);
    const run: SystemRun = { runtime, idle, rounds: [], steps: [], events: {}, restarts: [] };
    for (let k = 1; k <= rounds; k++) {
      const label = `one at a time, round ${k}`;
      const row = stepRow(r, label, undefined, await measure(r, label, sequential(r, PLAN.sequential, 100 + k), idle));
      run.rounds.push(row);
      log(`${runtime} ${label}: ${describe(row)}`);
    }
    for (const [i, rate] of rates.entries()) {
      const label = `${rate} req/s`;
      const row = stepRow(r, label, rate, await measure(r, label, openLoop(r, rate, 10 + i), idle));
      run.steps.push(row);
      log(`${runtime} ${label}: router ${row.achieved.router.toFixed(0)} req/s, ${describe(row)}`);
      if (saturated(row)) {
        log(`${runtime}: saturated at ${label}: stopping the sweep`);
        break;
      }
    }
    for (const [k, n] of r.events) run.events[k] = n;
    run.restarts.push(...r.restarts);
    return { run, workerdBin: bin };
  } finally {
    await shutdown(r);
  }
}

function describe(row: StepRow): string {
  const json = row.latency[0]!;
  return (
    `json p50 direct ${json.direct.end50.toFixed(2)}, router ${json.router.end50.toFixed(2)}, plain ${json.plain.end50.toFixed(2)} ms; ` +
    `workerd ${row.cpuPerRouterRequest.workerd!.toFixed(2)} ms CPU per router request, plain proxy ${row.cpuPerPlainRequest.toFixed(2)}`
  );
}

// ---------------------------------------------------------------------------------------------
// Machine and versions, for the report.

/** The workerd binary a process runs, <package>/bin/workerd: from /proc (its command line's path may be relative). */
function workerdBin(pid: number): string {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return commandLine(pid)[0] ?? "";
  }
}

function machine(workerdPath: string) {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  const model = /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1]?.trim() ?? os.cpus()[0]?.model ?? "unknown";
  const version = (pkg: string) => {
    try {
      return (JSON.parse(readFileSync(pkg, "utf8")) as { version: string }).version;
    } catch {
      return "unknown";
    }
  };
  const git = (args: string[]) => {
    try {
      return execFileSync("git", args, { cwd: ROOT, encoding: "utf8" }).trim();
    } catch {
      return "unknown";
    }
  };
  return {
    cpu: model,
    cores: os.availableParallelism(),
    memoryGiB: os.totalmem() / 2 ** 30,
    kernel: os.release(),
    node: process.version,
    wrangler: version(join(ROOT, "node_modules", "wrangler", "package.json")),
    workerd: version(join(dirname(dirname(workerdPath)), "package.json")),
    commit: git(["rev-parse", "--short", "HEAD"]),
    dirty: git(["status", "--porcelain", "--untracked-files=no"]) !== "",
  };
}

// ---------------------------------------------------------------------------------------------
// The run.

async function main(): Promise<void> {
  const otherAtStart = await waitForQuiet(Number(flags["wait-quiet"]));
  const started = new Date();
  const loadStart = os.loadavg();
  log(
    `${quick ? "quick" : "full"} run, rates ${PLAN.rates.join(", ")} req/s, ${PLAN.stepMs / 1000} s per step; results to ${relative(ROOT, OUT)}`,
  );
  try {
    const start = await measureSystem("workerd-single", PLAN.rounds, PLAN.rates);
    let dev: SystemRun | undefined;
    if (!flags["no-dev"]) {
      // wrangler dev: one round one at a time and one rate, enough to set npm start's figures against
      // (50 req/s: at 100 it saturated on this machine, and a saturated step shows only its queue).
      const devRate =
        [...start.run.steps].reverse().find((s) => !saturated(s) && (s.offered ?? 0) <= PLAN.devRate)?.offered ?? PLAN.devRate;
      dev = (await measureSystem("wrangler-dev", 1, [devRate])).run;
    }
    const report: Report = {
      quick,
      command: `npm run bench:e2e${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`,
      started: started.toISOString(),
      machine: machine(start.workerdBin),
      loadAverageStart: loadStart,
      otherCoresAtStart: otherAtStart,
      loadAverageEnd: os.loadavg(),
      durationS: (Date.now() - started.getTime()) / 1000,
      plan: { ...PLAN, tenants: TENANTS, nodes: NODES, maxInflight: MAX_INFLIGHT },
      start: start.run,
      dev,
    };
    log(`npm start one at a time (median round): ${describe(medianRound(start.run.rounds))}`);
    const markdown = renderReport(report);
    mkdirSync(dirname(OUT), { recursive: true });
    // Formatted as the repository's Prettier configuration would, so `npm run format:check` stays clean.
    const options = (await prettier.resolveConfig(OUT)) ?? {};
    writeFileSync(OUT, await prettier.format(markdown, { ...options, parser: "markdown" }));
    log(`wrote ${relative(ROOT, OUT)} in ${report.durationS.toFixed(0)} s`);
  } finally {
    client.disconnect();
  }
}

await main();
