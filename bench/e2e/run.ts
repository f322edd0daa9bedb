/**
 * End to end: the latency the router adds over calling a node directly, and its CPU per request.
 *
 *   npm run bench:e2e                 # full run (~3 min on 2 cores): writes bench/e2e/RESULTS.md
 *   npm run bench:e2e -- --quick      # < 1 min: writes .tmp/bench-e2e-quick/RESULTS.md
 *   node bench/e2e/run.ts [--quick] [--out FILE] [--rates 25,50,100] [--step-seconds 12] [--wait-quiet SECONDS]
 *                         [--save-profile FILE.cpuprofile]
 *
 * What it measures, and why this way:
 * - The whole system as `npm start` runs it (scripts/system.ts: the router under `wrangler dev`,
 *   its region Durable Object, a simulated fleet) with nodes whose model time is effectively zero
 *   (prefill and decode at 10^9 tokens/s, one-token answers), so what remains of a request is the
 *   HTTP path itself. The same tiny chat request (a few hundred characters, max_tokens 1,
 *   streamed and not) goes through the router and, interleaved in the same run, straight to a
 *   node: both paths see the same machine load at the same moments, so the difference between
 *   them is the router's, not the machine's mood. Percentiles are of each path's own sample; the
 *   "added" figures are differences of percentiles (the two paths' requests are not paired).
 * - Open-loop (Poisson arrivals at a fixed rate, each path at the same rate) at increasing rates
 *   until the router saturates, since a closed loop would slow down with the router and hide its
 *   queueing; plus a one-at-a-time step, the unloaded figure.
 * - CPU per request from /proc (utime + stime) of each wrangler dev process around each step, less
 *   its idle rate, over the requests the router answered: the workerd running the worker and its
 *   objects, the workerd running wrangler's ProxyWorker (local development only: in production no
 *   proxy sits in front of the worker), and the wrangler CLI (which receives the log lines).
 * - Where the time goes: requests to the user worker's own port (bypassing the ProxyWorker), a
 *   worker-only route (/healthz) against a node's /health, the worker's own timings from its
 *   decision log, a V8 CPU profile of the worker's isolate split by stage and between the worker
 *   and the object (profile.ts), and the same system with the decision log off.
 *
 * The machine may be shared: the report states the CPU other processes used during each step.
 */
import { execFileSync, fork, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
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
import { Inspector, devBundle, profileWhile, summarise } from "./profile.ts";
import { added, renderReport, saturated, type BlockRow, type Report, type StepRow } from "./report.ts";

const HERE = dirname(fileURLToPath(import.meta.url));

const { values: flags } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    out: { type: "string" },
    rates: { type: "string" },
    "step-seconds": { type: "string" },
    "wait-quiet": { type: "string", default: "0" },
    "save-profile": { type: "string" },
  },
});
const quick = flags.quick;

/** How much of everything: the quick run trades precision for time, never the method. */
const PLAN = quick
  ? { warmup: 100, sequential: 60, rates: [50, 150], stepMs: 5_000, blockRounds: 2, blockSize: 30, profileRequests: 0, logOff: false }
  : {
      warmup: 150,
      sequential: 300,
      rates: [25, 50, 100, 200, 400],
      stepMs: 12_000,
      blockRounds: 4,
      blockSize: 100,
      profileRequests: 300,
      logOff: true,
    };
/** One-at-a-time rounds of the router in workerd alone (its figure is the median round's). */
const BARE_ROUNDS = 3;

/** The highest unsaturated swept rate up to this one is measured again with the decision log off and in workerd alone. */
const COMPARE_RATE = 100;
if (flags.rates) PLAN.rates = flags.rates.split(",").map(Number);
if (flags["step-seconds"]) PLAN.stepMs = Number(flags["step-seconds"]) * 1000;
// A quick run never overwrites the full run's results.
const OUT = flags.out ?? (quick ? join(ROOT, ".tmp", "bench-e2e-quick", "RESULTS.md") : join(ROOT, "bench", "e2e", "RESULTS.md"));

/** Requests in flight per target before the generator sheds (counted as errors): bounds a saturated step. */
const MAX_INFLIGHT = 256;
const TIMEOUT_MS = 30_000;
/**
 * Tenants the router's requests rotate over. The edge rate limiter binding (wrangler.toml: 1,200
 * requests a minute per tenant, simulated locally by wrangler) would refuse a single tenant within
 * seconds at these rates; each request still pays the same limiter call.
 */
const TENANTS = 16;
const NODES = 4;
/** CPU profile sampling interval asked for: fine enough for sub-millisecond stages. */
const PROFILE_INTERVAL_US = 100;
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

/** wrangler.toml's development configuration, with one region and the benchmark's tenants. */
function routerConfig(decisionLogSampleRate: number): unknown {
  return {
    ...devConfig.vars.WARMPATH_CONFIG,
    regions: [REGION],
    tenants: KEYS.map((key, i) => ({ id: `e2e-${i}`, api_key_sha256: [createHash("sha256").update(key).digest("hex")] })),
    decision_log_sample_rate: decisionLogSampleRate,
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

type Runtime = "wrangler-dev" | "workerd";

interface Running {
  system: System;
  runtime: Runtime;
  dev: DevProcesses;
  /** The workerd processes (pid@start) when `dev` was looked up. */
  devSet: string;
  inspectorPort: number;
  decisions: DecisionTiming[];
  /** Router log events other than request lines, by event name (errors show up here). */
  events: Map<string, number>;
  /** Steps during which a tracked process was replaced, and which. */
  restarts: string[];
  /** wrangler's own lines about reloading the worker. */
  notes: string[];
  setStep(label: string | undefined): void;
}

/** The processes serving now, looked up the way the runtime lays them out. */
async function findProcesses(runtime: Runtime, system: System): Promise<DevProcesses> {
  return runtime === "workerd" ? findHostProcesses(system.router.pid!, system.url) : findDevProcesses(system.router.pid!, system.url);
}

async function boot(decisionLogSampleRate: number, runtime: Runtime = "wrangler-dev"): Promise<Running> {
  const decisions: DecisionTiming[] = [];
  const events = new Map<string, number>();
  const notes: string[] = [];
  let step: string | undefined;
  const system = await startSystem({
    port: 0,
    runtime,
    fleetConfig: FLEET,
    config: routerConfig(decisionLogSampleRate),
    onRouterOutput: (line) => {
      // wrangler announces a reload of the worker; a step it falls in has its CPU figure dropped.
      if (/reload|updated|restart/i.test(line) && !line.includes('{"event":"')) notes.push(line.trim().slice(0, 200));
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
  try {
    const dev = await findProcesses(runtime, system);
    const args = system.router.spawnargs;
    const inspectorPort = Number(args[args.indexOf("--inspector-port") + 1]);
    const devSet = workerdSet(system.router.pid!);
    return { system, runtime, dev, devSet, inspectorPort, decisions, events, notes, restarts: [], setStep: (label) => (step = label) };
  } catch (e) {
    await system.stop();
    throw e;
  }
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

/** The processes whose CPU is accounted, by role. */
function tracked(r: Running): Record<string, number> {
  const pids: Record<string, number> = { user: r.dev.userWorkerd, wrangler: r.dev.wrangler, fleet: process.pid, client: client.pid! };
  if (r.dev.proxyWorkerd !== undefined) pids.proxy = r.dev.proxyWorkerd;
  return pids;
}

/** Everything this benchmark runs: the whole wrangler dev tree, this process (the fleet) and the client. */
function oursMs(r: Running): number {
  return [r.system.router.pid!, ...descendants(r.system.router.pid!), process.pid, client.pid!].reduce((sum, pid) => sum + cpuMs(pid), 0);
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
    log(`wrangler's workerd processes changed before "${label}": looking them up again`);
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
  if (workerdSet(r.system.router.pid!) !== runtimes && !replaced.includes("user")) replaced.push("user");
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
// Request variants.

function variants(r: Running) {
  const nodes = r.system.fleet!.nodes.map((n) => n.url);
  const chat = "/v1/chat/completions";
  const v = (label: string, agent: string, urls: string[], path: string, body: Variant["body"], keys: string[] = []): Variant => ({
    label,
    agent,
    urls,
    path,
    body,
    keys,
    method: body === "none" ? "GET" : "POST",
  });
  return {
    routerJson: v("router json", "router", [r.system.url], chat, "json", KEYS),
    routerStream: v("router stream", "router", [r.system.url], chat, "stream", KEYS),
    directJson: v("direct json", "direct", nodes, chat, "json"),
    directStream: v("direct stream", "direct", nodes, chat, "stream"),
    innerJson: v("router json, user worker's port (no ProxyWorker)", "inner", [r.dev.innerUrl], chat, "json", KEYS),
    healthz: v("router GET /healthz", "router", [r.system.url], "/healthz", "none"),
    innerHealthz: v("router GET /healthz, user worker's port", "inner", [r.dev.innerUrl], "/healthz", "none"),
    nodeHealth: v("node GET /health (direct)", "direct", nodes, "/health", "none"),
  };
}

/** A step's row: per-path percentiles, rates, errors, CPU per router request, the worker's own timings. */
function stepRow(r: Running, label: string, offered: number | undefined, m: Measured): StepRow {
  const by = new Map(m.result.variants.map((v) => [v.label, v]));
  const router = m.result.variants.filter((v) => v.label.startsWith("router"));
  const direct = m.result.variants.filter((v) => v.label.startsWith("direct"));
  const answered = router.reduce(
    (n, v) => n + v.ok + Object.entries(v.errors).reduce((e, [k, c]) => e + (k.startsWith("http-") ? c : 0), 0),
    0,
  );
  const seconds = Math.max(...m.result.variants.map((v) => v.lastEndMs)) / 1000;
  const sum = (vs: typeof router, f: (v: (typeof router)[number]) => number) => vs.reduce((n, v) => n + f(v), 0);
  const errors = (vs: typeof router) => {
    const out: Record<string, number> = {};
    for (const v of vs) for (const [k, c] of Object.entries(v.errors)) out[k] = (out[k] ?? 0) + c;
    return out;
  };
  const pct = (name: string, what: "ttfb" | "total", p: number) => percentileOf(by.get(name)?.[what] ?? [], p);
  const lines = r.decisions.filter((d) => d.step === label);
  return {
    label,
    offered,
    achievedRouter: sum(router, (v) => v.ok) / seconds,
    achievedDirect: sum(direct, (v) => v.ok) / seconds,
    sentRouter: sum(router, (v) => v.sent),
    sentDirect: sum(direct, (v) => v.sent),
    errorsRouter: errors(router),
    errorsDirect: errors(direct),
    latency: (["json", "stream"] as const).map((kind) => ({
      kind,
      router: {
        ttfb50: pct(`router ${kind}`, "ttfb", 0.5),
        ttfb99: pct(`router ${kind}`, "ttfb", 0.99),
        end50: pct(`router ${kind}`, "total", 0.5),
        end99: pct(`router ${kind}`, "total", 0.99),
      },
      direct: {
        ttfb50: pct(`direct ${kind}`, "ttfb", 0.5),
        ttfb99: pct(`direct ${kind}`, "ttfb", 0.99),
        end50: pct(`direct ${kind}`, "total", 0.5),
        end99: pct(`direct ${kind}`, "total", 0.99),
      },
    })),
    cpuPerRouterRequest: Object.fromEntries(Object.entries(m.cpu).map(([k, v]) => [k, answered > 0 ? v / answered : NaN])),
    answered,
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

/** The four paths of the comparison, one at a time (the unloaded figure). */
function sequential(r: Running, count: number, seed: number): LoadCommand {
  const v = variants(r);
  return { type: "sequential", count, variants: [v.routerJson, v.directJson, v.routerStream, v.directStream], timeoutMs: TIMEOUT_MS, seed };
}

/** The four paths open-loop, the router and the direct path each at `rate` requests/s (half streamed). */
function openLoop(r: Running, rate: number, seed: number): LoadCommand {
  const v = variants(r);
  return {
    type: "open",
    ratePerVariant: rate / 2,
    durationMs: PLAN.stepMs,
    variants: [v.routerJson, v.directJson, v.routerStream, v.directStream],
    maxInflightPerAgent: MAX_INFLIGHT,
    timeoutMs: TIMEOUT_MS,
    seed,
  };
}

/**
 * The breakdown: each variant in blocks of sequential requests, the blocks in a rotated order
 * each round, CPU sampled around every block so each variant's CPU per request is its own.
 */
async function blocks(r: Running, idle: CpuSnapshot): Promise<BlockRow[]> {
  const v = variants(r);
  const list = [v.routerJson, v.innerJson, v.directJson, v.healthz, v.innerHealthz, v.nodeHealth];
  const acc = new Map(
    list.map((x) => [x.label, { total: [] as number[], cpu: {} as CpuSnapshot, requests: 0, errors: 0, otherMs: 0, wallMs: 0 }]),
  );
  let seed = 1000;
  for (let round = 0; round < PLAN.blockRounds; round++) {
    // Rotated each round, so no variant always runs first (or right after the same neighbour).
    const order = list.map((_, i) => list[(i + round) % list.length]!);
    for (const variant of order) {
      const m = await measure(
        r,
        `block ${variant.label}`,
        { type: "sequential", count: PLAN.blockSize, variants: [variant], timeoutMs: TIMEOUT_MS, seed: seed++ },
        idle,
      );
      const a = acc.get(variant.label)!;
      const res = m.result.variants[0]!;
      a.total.push(...res.total);
      a.requests += res.ok;
      a.errors += res.sent - res.ok;
      a.otherMs += m.otherCores * m.wallMs;
      a.wallMs += m.wallMs;
      for (const [k, c] of Object.entries(m.cpu)) a.cpu[k] = (a.cpu[k] ?? 0) + c;
    }
  }
  return list.map((x) => {
    const a = acc.get(x.label)!;
    const lines = r.decisions.filter((d) => d.step === `block ${x.label}`);
    return {
      label: x.label,
      requests: a.requests,
      errors: a.errors,
      end50: percentileOf(a.total, 0.5),
      end99: percentileOf(a.total, 0.99),
      cpuPerRequest: Object.fromEntries(Object.entries(a.cpu).map(([k, c]) => [k, c / Math.max(1, a.requests)])),
      otherCores: a.otherMs / a.wallMs,
      workerFirstByte50: lines.length
        ? percentileOf(
            lines.map((l) => l.firstByteMs),
            0.5,
          )
        : undefined,
      workerDuration50: lines.length
        ? percentileOf(
            lines.map((l) => l.durationMs),
            0.5,
          )
        : undefined,
    };
  });
}

// ---------------------------------------------------------------------------------------------
// Machine and versions, for the report.

function machine(dev: DevProcesses) {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  const model = /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1]?.trim() ?? os.cpus()[0]?.model ?? "unknown";
  const version = (pkg: string) => {
    try {
      return (JSON.parse(readFileSync(pkg, "utf8")) as { version: string }).version;
    } catch {
      return "unknown";
    }
  };
  // The workerd binary wrangler actually runs: <package>/bin/workerd.
  const workerdBin = commandLine(dev.userWorkerd)[0] ?? "";
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
    workerd: version(join(dirname(dirname(workerdBin)), "package.json")),
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
  let r = await boot(1);
  const report: Report = {
    quick,
    command: `npm run bench:e2e${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(" ")}` : ""}`,
    started: started.toISOString(),
    machine: machine(r.dev),
    loadAverageStart: loadStart,
    otherCoresAtStart: otherAtStart,
    loadAverageEnd: [],
    durationS: 0,
    plan: { ...PLAN, tenants: TENANTS, nodes: NODES, maxInflight: MAX_INFLIGHT },
    idle: {},
    sequential: undefined!,
    steps: [],
    blocks: [],
    profile: undefined,
    logOff: undefined,
    workerd: undefined,
    routerEvents: {},
    restarts: [],
  };
  try {
    log(`router ${r.system.url} (user worker ${r.dev.innerUrl}), ${NODES} nodes; warming up`);
    await load(sequential(r, PLAN.warmup, 1));
    report.idle = await idleRates(r);

    log(`one at a time: ${PLAN.sequential} requests per path and kind`);
    report.sequential = stepRow(r, "sequential", undefined, await measure(r, "sequential", sequential(r, PLAN.sequential, 2), report.idle));

    for (const [i, rate] of PLAN.rates.entries()) {
      const label = `${rate} req/s`;
      const row = stepRow(r, label, rate, await measure(r, label, openLoop(r, rate, 10 + i), report.idle));
      report.steps.push(row);
      const json = row.latency[0]!;
      log(
        `${label}: router ${row.achievedRouter.toFixed(0)} req/s, json p50 ${json.router.end50.toFixed(2)} vs ${json.direct.end50.toFixed(2)} ms direct, ` +
          `user workerd ${row.cpuPerRouterRequest.user!.toFixed(2)} ms CPU per request`,
      );
      if (saturated(row)) {
        log(`saturated at ${label}: stopping the sweep`);
        break;
      }
    }

    log(`breakdown: ${PLAN.blockRounds} rounds of ${PLAN.blockSize}-request blocks`);
    report.blocks = await blocks(r, report.idle);

    if (PLAN.profileRequests > 0) {
      log(`CPU profile of the worker's isolate over ${2 * PLAN.profileRequests} router requests`);
      const inspector = await Inspector.connect(r.inspectorPort);
      try {
        const v = variants(r);
        let measured: Measured | undefined;
        const profile = await profileWhile(inspector, PROFILE_INTERVAL_US, async () => {
          measured = await measure(
            r,
            "profile",
            { type: "sequential", count: PLAN.profileRequests, variants: [v.routerJson, v.routerStream], timeoutMs: TIMEOUT_MS, seed: 99 },
            report.idle,
          );
        });
        // The raw profile opens in Chrome DevTools (Performance panel) or speedscope.
        if (flags["save-profile"]) writeFileSync(flags["save-profile"], JSON.stringify(profile));
        const ok = measured!.result.variants.reduce((n, x) => n + x.ok, 0);
        report.profile = {
          ...summarise(profile, ok, devBundle(ROOT)),
          requests: ok,
          userCpuPerRequest: measured!.cpu.user! / ok,
          intervalUs: PROFILE_INTERVAL_US,
        };
      } finally {
        inspector.close();
      }
    }
    for (const [k, n] of r.events) report.routerEvents[k] = n;
    report.restarts.push(...r.restarts, ...r.notes.map((n) => `wrangler: ${n}`));
    const compare = [...report.steps].reverse().find((s) => !saturated(s) && (s.offered ?? 0) <= COMPARE_RATE) ?? report.steps[0]!;

    if (PLAN.logOff) {
      // The same system with the decision log off: a fresh boot (the sample rate is configuration).
      log(`decision log off: rebooting; one at a time, then ${compare.label}`);
      await r.system.stop();
      r = await boot(0);
      await load(sequential(r, PLAN.warmup, 1));
      const idle = await idleRates(r);
      const seq = stepRow(r, "sequential", undefined, await measure(r, "sequential", sequential(r, PLAN.sequential, 2), idle));
      const step = stepRow(r, compare.label, compare.offered, await measure(r, compare.label, openLoop(r, compare.offered!, 50), idle));
      report.logOff = { sequential: seq, step, compareLabel: compare.label };
      report.restarts.push(...[...r.restarts, ...r.notes.map((n) => `wrangler: ${n}`)].map((x) => `decision log off, ${x}`));
    }

    // The same router, bundle and configuration in workerd with none of wrangler dev's machinery in
    // the request path (no ProxyWorker, no entry worker, no per-request log to the CLI): what is left
    // is the router's own cost plus one loopback HTTP hop, as close to production as this machine gets.
    log(`workerd without wrangler dev: rebooting; one at a time, then ${compare.label}`);
    await r.system.stop();
    r = await boot(1, "workerd");
    await load(sequential(r, PLAN.warmup, 1));
    const bareIdle = await idleRates(r);
    // Rounds, each as long as the wrangler dev measurement: the figure is the median round's, and
    // the rounds' spread says how far one round on this machine can be trusted.
    const bareRounds: StepRow[] = [];
    for (let k = 1; k <= BARE_ROUNDS; k++) {
      const label = `sequential, round ${k}`;
      bareRounds.push(stepRow(r, label, undefined, await measure(r, label, sequential(r, PLAN.sequential, 100 + k), bareIdle)));
    }
    const byAdded = [...bareRounds].sort((a, b) => added(a, "json", "end50") - added(b, "json", "end50"));
    const bareSeq = byAdded[Math.floor(byAdded.length / 2)]!;
    const bareStep = stepRow(
      r,
      compare.label,
      compare.offered,
      await measure(r, compare.label, openLoop(r, compare.offered!, 70), bareIdle),
    );
    report.workerd = { sequential: bareSeq, rounds: bareRounds, step: bareStep, compareLabel: compare.label };
    report.restarts.push(...r.restarts.map((x) => `workerd alone, ${x}`));
  } finally {
    await r.system.stop();
    client.disconnect();
  }
  report.loadAverageEnd = os.loadavg();
  report.durationS = (Date.now() - started.getTime()) / 1000;

  const markdown = renderReport(report);
  mkdirSync(dirname(OUT), { recursive: true });
  // Formatted as the repository's Prettier configuration would, so `npm run format:check` stays clean.
  const options = (await prettier.resolveConfig(OUT)) ?? {};
  writeFileSync(OUT, await prettier.format(markdown, { ...options, parser: "markdown" }));
  log(`wrote ${relative(ROOT, OUT)} in ${report.durationS.toFixed(0)} s`);
}

await main();
