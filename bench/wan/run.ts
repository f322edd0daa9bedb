/**
 * `npm run bench:wan`: time to first byte across an emulated long haul, the path warmpath is
 * deployed on against calling the GPUs directly and against the single-worker layout it replaced.
 *
 *   node bench/wan/run.ts [--quick]    # --quick: RTTs 0 and 90 ms, few requests, into .tmp/bench-wan-quick/
 *
 * Paths, at emulated round trips of 0, 20, 90 and 130 ms (same metro, same continent,
 * transatlantic, transpacific), the long haul being a loopback relay that holds each chunk for
 * half the round trip each way (bench/wan/relay.ts):
 * - `direct`: the client calls the node across the long haul (the reference).
 * - `warmpath`: the client calls the edge worker (near it: no delay), which forwards the request
 *   across the long haul to the region's worker (scripts/system.ts, runtime "workerd": each worker
 *   in a workerd process of its own, the binding over the relay); the region worker asks its
 *   object and calls the node, both by the GPUs (loopback).
 * - `single-worker`: the layout before the split, one worker at the client's edge that asks the
 *   region's object and then calls the node, each across the long haul. The runtime cannot put a
 *   relay between a worker and its Durable Object, so this row is DERIVED: that worker measured in
 *   workerd at round trip 0 (wrangler.toml's single-process composition: scripts/workerd-host.ts)
 *   plus one round trip per crossing: 2 per request, 4 with a retry (object, refusing node,
 *   object, next node).
 * Modes: one request at a time (paths interleaved), a steady open-loop rate, and a retry (the
 * first node answers 503, another answers: warmpath retries by the GPUs, no crossing added).
 * The nodes answer at once (bench/wan/node.ts): what is measured is the path.
 */
import { request as httpRequest, Agent } from "node:http";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import * as prettier from "prettier";
import { parse } from "smol-toml";
import { DEV_API_KEY, DEV_API_KEY_2, DEV_API_KEY_3 } from "../../src/config/dev-credentials.ts";
import { ROOT, startSystem, type System } from "../../scripts/system.ts";
import { percentileOf } from "../../src/core/stats.ts";
import { cpuMs, descendants } from "../e2e/procs.ts";
import { startNode, type BenchNode } from "./node.ts";
import { FLOOR_MODES, startFloor, type FloorMode } from "./floor.ts";
import { startHost, type Host } from "./host.ts";
import { startRelay, type Relay } from "./relay.ts";
import { STAGES, profileStages, type Stage } from "./stages.ts";

const { values: flags } = parseArgs({
  options: { quick: { type: "boolean", default: false }, "one-process": { type: "boolean", default: false } },
});
const QUICK = flags.quick;
/** Only the one-process measurement (the router's own cost, per stage), into .tmp/: for working on the request path. */
const ONE_PROCESS_ONLY = flags["one-process"];
const RTTS = QUICK ? [0, 90] : [0, 20, 90, 130];
const PLACES: Record<number, string> = { 0: "same machine", 20: "same continent", 90: "transatlantic", 130: "transpacific" };
/** Requests per path one at a time (after WARMUP of each), and per path at the steady rate. */
const ONE_AT_A_TIME = QUICK ? 20 : 200;
const WARMUP = QUICK ? 5 : 30;
const STEADY_RATE = 20;
const STEADY_SECONDS = QUICK ? 2 : 8;
/** Retried requests to time (only requests whose first node refused count). */
const RETRIES = QUICK ? 10 : 60;
/** Targets (issue 22): warmpath's added time to first byte over the direct call. */
const TARGET_P50_MS = 5;
const TARGET_P99_MS = 15;
/** Target (issue 22): CPU per request of the whole path at round trip 0. */
const TARGET_CPU_MS = 1.5;
/** How long the router processes' idle CPU is sampled before the one-at-a-time requests. */
const IDLE_SAMPLE_MS = 2_000;
/** Rounds of the one-process measurement: its CPU per request is the median round's (a busy neighbour inflates a round, rarely all). */
const CPU_ROUNDS = 5;
/** Requests of the typical chat and of the streamed answer that warm a path's isolates before its CPU is measured (cpuRounds). */
const WARM_REQUESTS = QUICK ? 50 : 500;
const WARM_STREAMS = QUICK ? 5 : 50;
/** Content events of the streamed answer that prices the relay per SSE event, and the requests per round that stream it. */
const STREAM_EVENTS = 100;
const STREAM_REQUESTS = QUICK ? 10 : 50;
/** Requests of the typical chat profiled for the per-stage split, and the sampling interval asked for. */
const PROFILE_REQUESTS = QUICK ? 40 : 200;
const PROFILE_INTERVAL_US = 100;
const OUT = ONE_PROCESS_ONLY
  ? join(ROOT, ".tmp", QUICK ? "bench-wan-one-process-quick" : "bench-wan-one-process")
  : QUICK
    ? join(ROOT, ".tmp", "bench-wan-quick")
    : join(ROOT, "bench", "wan");
const KEYS = [DEV_API_KEY, DEV_API_KEY_2, DEV_API_KEY_3];
const MODEL = "m-wan";
const RETRY_MODEL = "m-wan-retry";
const STREAM_MODEL = "m-wan-stream";

type Path = "direct" | "warmpath" | "warmpath-one-process" | "single-worker";
type Mode = "one-at-a-time" | "steady" | "retry";

interface Row {
  rtt_ms: number;
  path: Path;
  mode: Mode;
  ttfb_p50_ms: number;
  ttfb_p99_ms: number;
  n: number;
  errors: number;
  derived: boolean;
  /** warmpath's p50 / p99 over the direct call's at this RTT and mode. */
  added_p50_ms?: number;
  added_p99_ms?: number;
}

interface Target {
  url: string;
  headers: Record<string, string>;
  agent: Agent;
}

let seq = 0;
/**
 * The typical request: a streamed chat of about 2,000 prompt tokens (8,000 characters at the
 * router's 4 characters a token): a system prompt every request shares (~1,000 tokens) and a user
 * turn of its own (~1,000 tokens), so each request extends a known prefix with a new one.
 */
const SYSTEM_PROMPT =
  "You are a careful assistant. Answer in plain words, cite the document you rely on, and say when you do not know. ".repeat(36);
const USER_TURN = "Summarise the attached report in three sentences, keeping every figure it gives. ".repeat(49);
function body(model: string): string {
  const n = seq++;
  // The retry mode's prompts share no prefix: with the shared system prompt the router sent them
  // all to the node that had answered one (its cache), and 600 tries found 1 retry, not 60.
  const system = model === RETRY_MODEL ? `wan ${n}: ${SYSTEM_PROMPT}` : SYSTEM_PROMPT;
  return JSON.stringify({
    model,
    stream: true,
    max_tokens: 512,
    messages: [
      { role: "system", content: system },
      { role: "user", content: `wan ${n}: ${USER_TURN}` },
    ],
  });
}

/** Time from the request's write to its first body byte (ms), or an error; and the answer's headers. */
function timeOne(t: Target, model: string): Promise<{ ttfb: number; ok: boolean; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve) => {
    const text = body(model);
    const started = performance.now();
    let first = NaN;
    const req = httpRequest(
      t.url,
      {
        method: "POST",
        agent: t.agent,
        headers: { ...t.headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) },
      },
      (res) => {
        res.on("data", () => {
          if (Number.isNaN(first)) first = performance.now();
        });
        res.on("end", () => resolve({ ttfb: first - started, ok: res.statusCode === 200 && !Number.isNaN(first), headers: res.headers }));
        res.on("error", () => resolve({ ttfb: NaN, ok: false, headers: {} }));
      },
    );
    req.setTimeout(30_000, () => req.destroy());
    req.on("error", () => resolve({ ttfb: NaN, ok: false, headers: {} }));
    req.end(text);
  });
}

function row(rtt: number, path: Path, mode: Mode, samples: number[], errors: number, derivedFrom?: { add: number }): Row {
  return {
    rtt_ms: rtt,
    path,
    mode,
    ...ttfbOf(samples, derivedFrom?.add ?? 0),
    n: samples.length,
    errors,
    derived: derivedFrom !== undefined,
  };
}

const round = (v: number) => Math.round(v * 100) / 100;

type Ttfb = Pick<Row, "ttfb_p50_ms" | "ttfb_p99_ms">;

/** The time to first byte of `samples` at p50 and p99 (ms), `add` ms added to each, rounded. */
function ttfbOf(samples: number[], add = 0): Ttfb {
  return { ttfb_p50_ms: round(percentileOf(samples, 0.5) + add), ttfb_p99_ms: round(percentileOf(samples, 0.99) + add) };
}

/** What a path adds over the direct call at p50 and p99 (ms). */
function addedOver(path: Ttfb, direct: Ttfb): { added_p50_ms: number; added_p99_ms: number } {
  return { added_p50_ms: round(path.ttfb_p50_ms - direct.ttfb_p50_ms), added_p99_ms: round(path.ttfb_p99_ms - direct.ttfb_p99_ms) };
}

/** The one-process path's CPU per request, split by stage (bench/wan/stages.ts). */
interface Stages {
  requests: number;
  samples: number;
  cpu_rounds_ms: number[];
  workerd_ms: number;
  /** The workerd process's Node host (Miniflare: it relays the workers' log lines). */
  host_ms: number;
  stream_cpu_rounds_ms: number[];
  relay_per_event_us: number;
  ms: Record<Stage, number>;
}

/** The runtime's floor (bench/wan/floor-worker.mts): one mode's cost, measured as the one-process path is. */
interface FloorRow {
  mode: FloorMode;
  cpu_rounds_ms: number[];
  cpu_ms_per_request: number;
  relay_per_event_us: number;
  added_p50_ms: number;
  added_p99_ms: number;
  /** The relay mode only: its streamed answers against the pull mode's, paired round by round ({@link pairedStreams}). */
  against_pull?: PairedStreams | undefined;
}

/** Two relays' CPU per streamed answer, measured in alternating rounds of the same process. */
interface PairedStreams {
  rounds: number;
  streams_per_round: number;
  /** CPU per streamed answer of each round (ms): this mode's, and the other's. */
  ms: number[];
  other_ms: number[];
  /** The median of the rounds' differences (the other's less this one's), per SSE event (µs). */
  saved_per_event_us: number;
  /** Rounds in which this mode used less CPU than the other. */
  rounds_less: number;
}

/** Rounds and streamed answers a round of the paired relay comparison: a 5 µs difference an event is ~0.5 ms a 100-event answer, against CPU ticks of 10 ms. */
const PAIRED_ROUNDS = QUICK ? 3 : 15;
const PAIRED_STREAMS = QUICK ? 10 : 60;

interface CpuRow {
  rtt_ms: number;
  path: Path;
  cpu_ms_per_request: number;
}

/**
 * Runs `work` and measures the CPU of every process of `system` (less their idle rate) per request
 * (`requests` of them, sent one at a time): in all, and in the workerd processes alone (the rest is
 * their Node hosts: Miniflare, which also relays the workers' log lines).
 */
async function withCpu<T>(
  system: Pick<System, "processes">,
  requests: number,
  work: () => Promise<T>,
): Promise<{ result: T; cpuMsPerRequest: number; workerdMsPerRequest: number }> {
  const pids = () => system.processes().flatMap((p) => [p.pid, ...descendants(p.pid)]);
  const isWorkerd = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "workerd";
    } catch {
      return false;
    }
  };
  const sample = () => {
    let all = 0;
    let workerd = 0;
    for (const pid of pids()) {
      const used = cpuMs(pid);
      all += used;
      if (isWorkerd(pid)) workerd += used;
    }
    return { all, workerd };
  };
  const idleFrom = sample();
  await new Promise((r) => setTimeout(r, IDLE_SAMPLE_MS));
  const idleTo = sample();
  const cpuFrom = sample();
  const started = performance.now();
  const result = await work();
  const elapsed = performance.now() - started;
  const cpuTo = sample();
  const per = (k: "all" | "workerd") => round((cpuTo[k] - cpuFrom[k] - ((idleTo[k] - idleFrom[k]) / IDLE_SAMPLE_MS) * elapsed) / requests);
  return { result, cpuMsPerRequest: per("all"), workerdMsPerRequest: per("workerd") };
}

/**
 * A path's CPU per request, measured in rounds once its isolates are warm: WARM_REQUESTS of the
 * typical chat and WARM_STREAMS of the streamed answer first (unmeasured: V8 compiles and
 * optimises a path's code over its first several hundred requests, each isolate its own), then
 * CPU_ROUNDS rounds, each a round of the typical chat one at a time beside the direct call and a
 * round of the streamed answer, interleaved so a slow spell of the machine weighs on both alike.
 */
async function cpuRounds(
  system: Pick<System, "processes">,
  targets: { direct: Target; path: Target; stream: Target },
  label: string,
): Promise<CpuRounds> {
  return (await interleavedCpuRounds(system, { [label]: targets }))[label]!;
}

/** What {@link cpuRounds} measured of one path. */
interface CpuRounds {
  rounds: Array<{ all: number; workerd: number }>;
  streamed: number[];
  direct: number[];
  path: number[];
  errors: number;
  directErrors: number;
}

/**
 * {@link cpuRounds} for several paths served by the same processes (the floor's modes), their
 * rounds interleaved (round r of every path, in an order that alternates, before round r + 1), so
 * that a slow spell of the machine weighs on all of them, not on whichever ran then: run one after
 * another, two modes whose relays differ by ~5 µs an event read 78.5 and 78.4 µs.
 */
async function interleavedCpuRounds(
  system: Pick<System, "processes">,
  paths: Record<string, { direct: Target; path: Target; stream: Target }>,
): Promise<Record<string, CpuRounds>> {
  const labels = Object.keys(paths);
  for (const label of labels) {
    for (let i = 0; i < WARM_REQUESTS; i++) await timeOne(paths[label]!.path, MODEL);
    for (let i = 0; i < WARM_STREAMS; i++) await timeOne(paths[label]!.stream, STREAM_MODEL);
  }
  const out: Record<string, CpuRounds> = Object.fromEntries(
    labels.map((label) => [label, { rounds: [], streamed: [], direct: [], path: [], errors: 0, directErrors: 0 }]),
  );
  for (let r = 0; r < CPU_ROUNDS; r++) {
    for (const label of r % 2 === 0 ? labels : [...labels].reverse()) {
      const targets = paths[label]!;
      const o = out[label]!;
      const { result, cpuMsPerRequest, workerdMsPerRequest } = await withCpu(system, WARMUP + ONE_AT_A_TIME, () =>
        oneAtATime({ direct: targets.direct, path: targets.path }, MODEL),
      );
      o.direct.push(...result.direct!.samples);
      o.path.push(...result.path!.samples);
      o.errors += result.path!.errors;
      o.directErrors += result.direct!.errors;
      o.rounds.push({ all: cpuMsPerRequest, workerd: workerdMsPerRequest });
      const streamed = await streamedCpu(system, targets.stream, STREAM_REQUESTS);
      o.streamed.push(streamed);
      console.log(
        `${label}, round ${r + 1}: ${cpuMsPerRequest} ms CPU per request (${workerdMsPerRequest} in workerd), ${streamed} ms streamed`,
      );
    }
  }
  return out;
}

/** CPU per request (ms) of `n` streamed answers of STREAM_EVENTS events sent to `target` one at a time. */
async function streamedCpu(system: Pick<System, "processes">, target: Target, n: number): Promise<number> {
  const { cpuMsPerRequest } = await withCpu(system, n, async () => {
    for (let i = 0; i < n; i++) await timeOne(target, STREAM_MODEL);
  });
  return cpuMsPerRequest;
}

/**
 * The CPU per SSE event: each round's streamed answer less that round's typical request, over its
 * further events, and the median of the rounds. The two halves of a round run back to back, so a
 * slow spell of the machine weighs on both; the difference of the two medians, each from other
 * rounds, read 71 to 160 µs across one day's runs.
 */
const perEventUs = (streamed: readonly number[], typical: readonly number[]) =>
  round(median(streamed.map((s, r) => ((s - typical[r]!) / (STREAM_EVENTS - 1)) * 1000)));

/** The median of a few values (CPU per request over rounds). */
const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[(values.length - 1) >> 1]!;

/** One at a time, the targets interleaved (each round sends one to each, in turn). */
async function oneAtATime(targets: Record<string, Target>, model: string): Promise<Record<string, { samples: number[]; errors: number }>> {
  const out = Object.fromEntries(Object.keys(targets).map((k) => [k, { samples: [] as number[], errors: 0 }]));
  for (let i = 0; i < WARMUP + ONE_AT_A_TIME; i++) {
    for (const [name, t] of Object.entries(targets)) {
      const r = await timeOne(t, model);
      if (i < WARMUP) continue;
      if (r.ok) out[name]!.samples.push(r.ttfb);
      else out[name]!.errors++;
    }
  }
  return out;
}

/** Open loop at STEADY_RATE per target, the targets' sends interleaved. */
async function steady(targets: Record<string, Target>, model: string): Promise<Record<string, { samples: number[]; errors: number }>> {
  const out = Object.fromEntries(Object.keys(targets).map((k) => [k, { samples: [] as number[], errors: 0 }]));
  const pending: Promise<void>[] = [];
  const names = Object.keys(targets);
  const total = STEADY_RATE * STEADY_SECONDS * names.length;
  const gap = 1000 / (STEADY_RATE * names.length);
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const wait = t0 + i * gap - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const name = names[i % names.length]!;
    pending.push(
      timeOne(targets[name]!, model).then((r) => {
        if (r.ok) out[name]!.samples.push(r.ttfb);
        else out[name]!.errors++;
      }),
    );
  }
  await Promise.all(pending);
  return out;
}

/** Retried requests only (those whose first node refused: `x-warmpath-attempts: 2`). */
async function retried(t: Target): Promise<{ samples: number[]; errors: number; tries: number }> {
  const samples: number[] = [];
  let errors = 0;
  let tries = 0;
  while (samples.length < RETRIES && tries < RETRIES * 10) {
    tries++;
    const r = await timeOne(t, RETRY_MODEL);
    if (!r.ok) errors++;
    else if (r.headers["x-warmpath-attempts"] === "2") samples.push(r.ttfb);
  }
  return { samples, errors, tries };
}

/** The development configuration with the benchmark's nodes as static nodes of region us-east. */
function benchConfig(answer: BenchNode[], refuse: BenchNode, stream: BenchNode): unknown {
  const toml = parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as { vars: { WARMPATH_CONFIG: Record<string, unknown> } };
  const cfg = structuredClone(toml.vars.WARMPATH_CONFIG) as { regions: Array<Record<string, unknown>> };
  const node = (id: string, n: BenchNode, models: string[]) => ({ id, url: n.url, models, kv_capacity_tokens: 100_000 });
  cfg.regions = cfg.regions.map((r) =>
    r.name === "us-east"
      ? {
          ...r,
          models: [MODEL, RETRY_MODEL, STREAM_MODEL],
          nodes: [
            node("wan-stream", stream, [STREAM_MODEL]),
            node("wan-a", answer[0]!, [MODEL, RETRY_MODEL]),
            node("wan-b", answer[1]!, [MODEL]),
            node("wan-refuse", refuse, [RETRY_MODEL]),
          ],
          // The refusing node stays in play: every other request it is offered is a retry to time.
          failure_cooldown_ms: 0,
        }
      : r,
  );
  return cfg;
}

/** wrangler.toml's single-process composition (the layout before the split) in workerd, with `config`. */
async function startSingleWorker(config: unknown): Promise<Host> {
  return startHost((state) => {
    const envFile = join(state, "config.env");
    writeFileSync(envFile, `WARMPATH_CONFIG='${JSON.stringify(config)}'\n`);
    return ["--env-file", envFile];
  });
}

const routerTarget = (base: string, region = "us-east"): Target => ({
  url: `${base}/v1/chat/completions`,
  headers: { authorization: `Bearer ${KEYS[seq % KEYS.length]}`, "x-warmpath-region": region },
  agent: new Agent({ keepAlive: true, maxSockets: 64 }),
});

/** The long-haul rows: the single-worker layout (derived), then each round trip's warmpath and direct calls. */
async function longHaul(config: unknown, answer: BenchNode[], rows: Row[], cpu: CpuRow[]): Promise<void> {
  // The single-worker layout, measured once at round trip 0; its long-haul rows are derived.
  const single = await startSingleWorker(config);
  const singleTarget = routerTarget(single.url);
  const single0 = (await oneAtATime({ single: singleTarget }, MODEL)).single!;
  const singleSteady = (await steady({ single: singleTarget }, MODEL)).single!;
  const singleRetry = await retried(routerTarget(single.url));
  single.stop();

  for (const rtt of RTTS) {
    const relays: Relay[] = [];
    const direct = await startRelay({ host: "127.0.0.1", port: Number(new URL(answer[0]!.url).port) }, rtt);
    relays.push(direct);
    let system: System | undefined;
    try {
      system = await startSystem({
        port: 0,
        runtime: "workerd",
        fleetFile: null,
        config,
        noAssets: true,
        regionAddress: async (_region, port) => {
          const relay = await startRelay({ host: "127.0.0.1", port }, rtt);
          relays.push(relay);
          return `127.0.0.1:${relay.port}`;
        },
      });
      const targets = {
        direct: {
          url: `http://127.0.0.1:${direct.port}/v1/chat/completions`,
          headers: {},
          agent: new Agent({ keepAlive: true, maxSockets: 64 }),
        },
        warmpath: routerTarget(system.url),
      };
      // CPU of every router process (the edge's and each region's workerd, and their hosts), less
      // their idle rate, per request answered one at a time.
      const { result: one, cpuMsPerRequest } = await withCpu(system, WARMUP + ONE_AT_A_TIME, () => oneAtATime(targets, MODEL));
      cpu.push({ rtt_ms: rtt, path: "warmpath", cpu_ms_per_request: cpuMsPerRequest });
      const st = await steady(targets, MODEL);
      const re = await retried(routerTarget(system.url));
      for (const [mode, m] of [
        ["one-at-a-time", one],
        ["steady", st],
      ] as const) {
        const d = row(rtt, "direct", mode, m.direct!.samples, m.direct!.errors);
        const w = row(rtt, "warmpath", mode, m.warmpath!.samples, m.warmpath!.errors);
        Object.assign(w, addedOver(w, d));
        const s = row(rtt, "single-worker", mode, (mode === "steady" ? singleSteady : single0).samples, 0, { add: 2 * rtt });
        Object.assign(s, addedOver(s, d));
        rows.push(d, w, s);
      }
      const d = rows.find((r) => r.rtt_ms === rtt && r.path === "direct" && r.mode === "one-at-a-time")!;
      const w = row(rtt, "warmpath", "retry", re.samples, re.errors);
      Object.assign(w, addedOver(w, d));
      const s = row(rtt, "single-worker", "retry", singleRetry.samples, 0, { add: 4 * rtt });
      Object.assign(s, addedOver(s, d));
      rows.push(w, s);
      console.log(
        `rtt ${rtt} ms: ${rows
          .filter((r) => r.rtt_ms === rtt)
          .map((r) => `${r.path}/${r.mode} ${r.ttfb_p50_ms}/${r.ttfb_p99_ms}`)
          .join("; ")}`,
      );
    } finally {
      await system?.stop();
      for (const r of relays) await r.close();
    }
  }
}

async function main(): Promise<void> {
  const started = Date.now();
  const answer = [await startNode("answer"), await startNode("answer")];
  const refuse = await startNode("refuse");
  const stream = await startNode({ events: STREAM_EVENTS });
  const config = benchConfig(answer, refuse, stream);
  const rows: Row[] = [];
  const cpu: CpuRow[] = [];
  const oneProcess: Row[] = [];
  let stages: Stages | undefined;

  // The whole path in one workerd process, the bindings in-process as on Cloudflare: the router's
  // own cost with no emulated network between its workers (round trip 0).
  {
    const system = await startSystem({ port: 0, runtime: "workerd-single", fleetFile: null, config, noAssets: true });
    try {
      const targets = {
        direct: { url: `${answer[0]!.url}/v1/chat/completions`, headers: {}, agent: new Agent({ keepAlive: true, maxSockets: 64 }) },
        warmpath: routerTarget(system.url),
      };
      // The typical chat one at a time beside the direct call (the TTFB samples pooled, the CPU per
      // request the median round's), and the relay per SSE event: the same request answered with
      // STREAM_EVENTS content events, each its own chunk; the CPU above the typical request's, per event.
      const measured = await cpuRounds(
        system,
        { direct: targets.direct, path: targets.warmpath, stream: routerTarget(system.url) },
        "one process",
      );
      const rounds = measured.rounds;
      const streamed = measured.streamed;
      const d = row(0, "direct", "one-at-a-time", measured.direct, measured.directErrors);
      const w = row(0, "warmpath-one-process", "one-at-a-time", measured.path, measured.errors);
      Object.assign(w, addedOver(w, d));
      oneProcess.push(d, w);
      const typical = median(rounds.map((x) => x.all));
      cpu.push({ rtt_ms: 0, path: "warmpath-one-process", cpu_ms_per_request: typical });

      // Where the typical request's workerd CPU goes: a profile of every worker's isolate.
      const workerdMs = median(rounds.map((x) => x.workerd));
      const samples = await profileStages(system.router.spawnargs, PROFILE_INTERVAL_US, async () => {
        for (let i = 0; i < PROFILE_REQUESTS; i++) await timeOne(targets.warmpath, MODEL);
      });
      const sampled = STAGES.reduce((n, s) => n + samples[s], 0);
      stages = {
        requests: PROFILE_REQUESTS,
        samples: sampled,
        cpu_rounds_ms: rounds.map((x) => x.all),
        workerd_ms: workerdMs,
        host_ms: round(typical - workerdMs),
        stream_cpu_rounds_ms: streamed,
        relay_per_event_us: perEventUs(
          streamed,
          rounds.map((x) => x.all),
        ),
        ms: Object.fromEntries(STAGES.map((s) => [s, round((samples[s] / Math.max(1, sampled)) * workerdMs)])) as Record<Stage, number>,
      };
    } finally {
      await system.stop();
    }
  }

  const floor = await measureFloor(answer[0]!, stream);
  if (!ONE_PROCESS_ONLY) await longHaul(config, answer, rows, cpu);
  for (const n of [...answer, refuse, stream]) await n.close();

  mkdirSync(OUT, { recursive: true });
  const meta = {
    command: `npm run bench:wan${QUICK || ONE_PROCESS_ONLY ? ` --${QUICK ? " --quick" : ""}${ONE_PROCESS_ONLY ? " --one-process" : ""}` : ""}`,
    generated_at: new Date().toISOString(),
    seconds: Math.round((Date.now() - started) / 1000),
    machine: `${cpus().length} cores (${cpus()[0]?.model ?? "?"}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}`,
    targets: { added_p50_ms: TARGET_P50_MS, added_p99_ms: TARGET_P99_MS },
  };
  // Both files formatted as the repository's are (npm test checks it).
  const json = join(OUT, "results.json");
  writeFileSync(
    json,
    await prettier.format(JSON.stringify({ ...meta, rows, one_process: oneProcess, cpu, stages, floor }, null, 2), {
      ...((await prettier.resolveConfig(json)) ?? {}),
      filepath: json,
    }),
  );
  const md = join(OUT, "RESULTS.md");
  writeFileSync(
    md,
    await prettier.format(render(meta, rows, oneProcess, cpu, stages, floor), {
      ...((await prettier.resolveConfig(md)) ?? {}),
      parser: "markdown",
    }),
  );
  console.log(`wrote ${join(OUT, "RESULTS.md")} in ${meta.seconds} s`);
}

/**
 * The runtime's floor, each mode of bench/wan/floor-worker.mts measured as the one-process path is:
 * CPU_ROUNDS rounds of the typical chat one at a time beside the direct call (the median round's
 * CPU per request), then the streamed answer's rounds for the cost per SSE event.
 */
async function measureFloor(answer: BenchNode, stream: BenchNode): Promise<FloorRow[]> {
  const host = await startFloor();
  const system = { processes: () => [{ name: "floor", pid: host.pid }] };
  const target = (mode: FloorMode, node: BenchNode): Target => ({
    url: `${host.url}/v1/chat/completions`,
    headers: { "x-floor": mode, "x-floor-node": node.url },
    agent: new Agent({ keepAlive: true, maxSockets: 64 }),
  });
  const out: FloorRow[] = [];
  try {
    const measuredAll = await interleavedCpuRounds(
      system,
      Object.fromEntries(
        FLOOR_MODES.map((mode) => [
          `floor ${mode}`,
          {
            direct: { url: `${answer.url}/v1/chat/completions`, headers: {}, agent: new Agent({ keepAlive: true }) },
            path: target(mode, answer),
            stream: target(mode, stream),
          },
        ]),
      ),
    );
    for (const mode of FLOOR_MODES) {
      const measured = measuredAll[`floor ${mode}`]!;
      if (measured.errors > 0) throw new Error(`the floor's ${mode} mode failed ${measured.errors} requests`);
      const typical = median(measured.rounds.map((x) => x.all));
      out.push({
        mode,
        cpu_rounds_ms: measured.rounds.map((x) => x.all),
        cpu_ms_per_request: typical,
        relay_per_event_us: perEventUs(
          measured.streamed,
          measured.rounds.map((x) => x.all),
        ),
        ...addedOver(ttfbOf(measured.path), ttfbOf(measured.direct)),
      });
      console.log(`floor ${mode}: ${typical} ms CPU per request, ${out.at(-1)!.relay_per_event_us} µs per event`);
    }
    out.find((f) => f.mode === "relay")!.against_pull = await pairedStreams(system, target("relay", stream), target("pull", stream));
  } finally {
    host.stop();
  }
  return out;
}

/**
 * Two relays told apart: a few µs an event is within what the rounds above spread by, so their
 * streamed answers alone, in PAIRED_ROUNDS rounds of PAIRED_STREAMS each, the two in turn (the order
 * alternating), each round's difference taken within the round.
 */
async function pairedStreams(system: Pick<System, "processes">, mine: Target, other: Target): Promise<PairedStreams> {
  const ms: number[] = [];
  const otherMs: number[] = [];
  const streamed = (t: Target) => streamedCpu(system, t, PAIRED_STREAMS);
  for (let r = 0; r < PAIRED_ROUNDS; r++) {
    if (r % 2 === 0) {
      ms.push(await streamed(mine));
      otherMs.push(await streamed(other));
    } else {
      otherMs.push(await streamed(other));
      ms.push(await streamed(mine));
    }
  }
  const saved = median(ms.map((m, r) => otherMs[r]! - m));
  console.log(
    `floor relay against pull: ${round((saved / STREAM_EVENTS) * 1000)} µs less an event (${ms.join(", ")} against ${otherMs.join(", ")} ms)`,
  );
  return {
    rounds: PAIRED_ROUNDS,
    streams_per_round: PAIRED_STREAMS,
    ms,
    other_ms: otherMs,
    saved_per_event_us: round((saved / STREAM_EVENTS) * 1000),
    rounds_less: ms.filter((m, r) => m < otherMs[r]!).length,
  };
}

/** The paired relay comparison's line (the relay's choice of stream: src/proxy/relay.ts). */
function pairedLine(p: PairedStreams | undefined): string[] {
  if (!p) return [];
  return [
    `- **relay against pull**, their streamed answers alone (100 events each), in ${p.rounds} rounds of ${p.streams_per_round} each, the two in turn: the identity stream written by one loop uses ${p.saved_per_event_us} µs less CPU an event than a stream the runtime pulls from (the median of the rounds' differences; less in ${p.rounds_less} of ${p.rounds} rounds). Per answer (ms), relay ${p.ms.join(", ")}; pull ${p.other_ms.join(", ")}.`,
  ];
}

/** The floor's lines: what the runtime costs for the work a router of this shape cannot avoid. */
function floorLines(
  floor: FloorRow[],
  ownCpu: number | undefined,
  perEventUs: number | undefined,
  ms: (v: number | undefined) => string,
): string[] {
  if (floor.length === 0) return [];
  const by = (m: FloorMode) => floor.find((f) => f.mode === m)!;
  const what: Record<FloorMode, string> = {
    proxy: "a worker that forwards the request and returns the node's answer as the runtime gave it (no JavaScript touches the answer)",
    relay:
      "the same, the answer passed on chunk by chunk through JavaScript, one loop writing the runtime's identity stream as src/proxy/relay.ts does (what reading and filtering each SSE event costs before any filtering)",
    pull: "the same through a JavaScript stream the runtime pulls from, one read per pull (how src/proxy/relay.ts relayed before: what writing the identity stream saves per event)",
    hops: "warmpath's hops doing nothing at each: an edge that reads the body and calls a region worker over a service binding, two RPC calls to a Durable Object, the node's call, the answer relayed through JavaScript and passed on natively by the edge",
  };
  return [
    "## The runtime's floor",
    "",
    `What workerd itself costs here for the work a router of this shape cannot avoid, with none of warmpath's own: bench/wan/floor-worker.mts in the same workerd build, bundled as a deploy bundles it, measured as the one-process path is (warmed by the same requests, then ${CPU_ROUNDS} rounds of the typical chat one at a time beside the direct call, each followed by a round of the streamed answer of ${STREAM_EVENTS} events for the cost per event; the median rounds), the modes' rounds interleaved (each mode's round r before any mode's round r + 1), so that the machine's slow spells weigh on every mode alike.`,
    "",
    "| floor | what it does | CPU per request (ms) | per SSE event (µs) | added p50 / p99 (ms) |",
    "| --- | --- | ---: | ---: | ---: |",
    ...FLOOR_MODES.map((m) => {
      const f = by(m);
      return `| ${m} | ${what[m]} | ${ms(f.cpu_ms_per_request)} (${f.cpu_rounds_ms.map((v) => ms(v)).join(", ")}) | ${Math.round(f.relay_per_event_us)} | +${ms(f.added_p50_ms)} / +${ms(f.added_p99_ms)} |`;
    }),
    "",
    ...pairedLine(by("relay").against_pull),
    `- warmpath's whole path costs ${ms(ownCpu)} ms of CPU per request, ${ms(ownCpu === undefined ? undefined : ownCpu - by("hops").cpu_ms_per_request)} ms above its hops' floor (${ms(by("hops").cpu_ms_per_request)} ms); the 1.5 ms target leaves ${ms(TARGET_CPU_MS - by("hops").cpu_ms_per_request)} ms for everything warmpath does at those hops. Per SSE event, ${Math.round(perEventUs ?? NaN)} µs against ${Math.round(by("hops").relay_per_event_us)} µs for the hops relaying it through JavaScript and ${Math.round(by("proxy").relay_per_event_us)} µs for a worker that does not read it.`,
    "",
  ];
}

/** The per-stage table of the one-process path's CPU. */
function stageLines(stages: Stages | undefined, ms: (v: number | undefined) => string): string[] {
  if (!stages) return [];
  const us = (v: number) => `${Math.round(v * 1000)}`;
  return [
    "## Where the CPU goes (one process, round trip 0)",
    "",
    `CPU per request of the typical chat, the whole path in one workerd process: ${stages.cpu_rounds_ms.map((v) => ms(v)).join(", ")} ms in ${stages.cpu_rounds_ms.length} rounds of ${WARMUP + ONE_AT_A_TIME} requests (the median is the figure: ${ms(stages.workerd_ms + stages.host_ms)} ms), of which ${ms(stages.workerd_ms)} ms in workerd and ${ms(stages.host_ms)} ms in its Node host (Miniflare, which also carries the workers' log lines to the terminal: on Cloudflare the runtime ships them). workerd's share is split by a V8 CPU profile of every worker's isolate over ${stages.requests} more requests (${stages.samples} samples; bench/wan/stages.ts): each sample goes to the stage of the innermost frame of its stack whose source module names one, and the shares are scaled to the unprofiled CPU. The profiler slows the isolates unevenly, so each figure is an estimate to a few tens of µs. Why warm first, and a median of rounds: V8 compiles and optimises the path's code over its first several hundred requests, each isolate its own, so ${WARM_REQUESTS} requests of the typical chat and ${WARM_STREAMS} of the streamed answer go first, unmeasured (a measurement of a few dozen requests just after boot, a quick run, is mostly that compilation); the rounds that follow still spread by this shared machine's moods, and the median is the figure.`,
    "",
    "| stage | µs per request | share of workerd |",
    "| --- | ---: | ---: |",
    ...STAGES.map(
      (s) => `| ${s} | ${us(stages.ms[s])} | ${stages.workerd_ms > 0 ? ((stages.ms[s] / stages.workerd_ms) * 100).toFixed(0) : "–"}% |`,
    ),
    `| (workerd's Node host: Miniflare, log lines) | ${us(stages.host_ms)} | |`,
    "",
    `- **Relay per SSE event**: ${stages.relay_per_event_us.toFixed(1)} µs of CPU per content event, each its own chunk as a model node sends tokens (the same request answered with ${STREAM_EVENTS} events: ${stages.stream_cpu_rounds_ms.map((v) => ms(v)).join(", ")} ms per request in ${stages.stream_cpu_rounds_ms.length} rounds of ${STREAM_REQUESTS}, each less its round's typical request, over ${STREAM_EVENTS - 1} events; the median of the rounds). A 500-token answer streamed a token an event adds ${ms((stages.relay_per_event_us * 499) / 1000)} ms over the typical request's.`,
    "",
  ];
}

function render(
  meta: { command: string; generated_at: string; seconds: number; machine: string },
  rows: Row[],
  oneProcess: Row[],
  cpu: CpuRow[],
  stages: Stages | undefined,
  floor: FloorRow[],
): string {
  const own = oneProcess.find((r) => r.path === "warmpath-one-process");
  const ownCpu = cpu.find((c) => c.path === "warmpath-one-process")?.cpu_ms_per_request;
  const ms = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? "–" : v.toFixed(1));
  const warm = rows.filter((r) => r.path === "warmpath");
  const misses = warm.filter((r) => (r.added_p50_ms ?? 0) > TARGET_P50_MS || (r.added_p99_ms ?? 0) > TARGET_P99_MS);
  const retryAdds = rows
    .filter((r) => r.path === "warmpath" && r.mode === "retry")
    .map((r) => {
      const one = rows.find((o) => o.rtt_ms === r.rtt_ms && o.path === "warmpath" && o.mode === "one-at-a-time")!;
      return { rtt: r.rtt_ms, extra: r.ttfb_p50_ms - one.ttfb_p50_ms };
    });
  if (rows.length === 0) {
    // --one-process: the router's own cost only.
    return [
      "# The router's own cost, one process (--one-process)",
      "",
      `Generated by \`${meta.command}\` (bench/wan/run.ts) on ${meta.generated_at.slice(0, 16).replace("T", " ")} UTC in ${meta.seconds} s; ${meta.machine}.`,
      "",
      `- +${ms(own?.added_p50_ms)} ms p50 / +${ms(own?.added_p99_ms)} ms p99 to the first byte over the direct call, ${ms(ownCpu)} ms of CPU per request.`,
      "",
      ...stageLines(stages, ms),
      ...floorLines(floor, ownCpu, stages?.relay_per_event_us, ms),
    ].join("\n");
  }
  const lines = [
    "# The long haul: time to first byte, warmpath against calling the GPUs directly",
    "",
    `Generated by \`${meta.command}\` (bench/wan/run.ts) on ${meta.generated_at.slice(0, 16).replace("T", " ")} UTC in ${meta.seconds} s; ${meta.machine}. Do not edit: rerun it. All times in milliseconds, as the client sees them, from the request's write to the first body byte of a streamed chat completion.`,
    "",
    "## Method",
    "",
    "- **The long haul** is a loopback TCP relay that holds each chunk for half the emulated round trip each way (bench/wan/relay.ts); 0, 20, 90 and 130 ms stand for the same machine, the same continent, transatlantic and transpacific. Connections are kept alive, as between Cloudflare and an origin and over a service binding.",
    "- **direct**: the client calls the node across the relay.",
    "- **warmpath**: the client calls the edge worker (no delay: it runs at the client's Cloudflare location), whose service binding to the region's worker crosses the relay; the region worker asks its Durable Object and calls the node on loopback (it is placed by the GPUs). Each worker runs in a workerd process of its own (scripts/system.ts, runtime `workerd`), the deploy bundles with no development machinery.",
    "- **single-worker** (DERIVED): the layout before the split, one worker at the client's edge asking the region's object and then calling the node, each across the long haul. workerd cannot put a relay between a worker and its Durable Object, so this row is that worker measured at round trip 0 (wrangler.toml's single-process composition in workerd) plus 2 round trips per request (object, node) and 4 with a retry (object, refusing node, object, next node).",
    `- **Modes**: one request at a time (${ONE_AT_A_TIME} per path after ${WARMUP} to warm up, the paths interleaved); steady, ${STEADY_RATE} requests a second per path for ${STEADY_SECONDS} s, open loop, interleaved; retry, ${RETRIES} requests whose first node answered 503 and the next answered (only those the router sent to the refusing node first: \`x-warmpath-attempts: 2\`).`,
    "- **The request** is a typical streamed chat of about 2,000 prompt tokens: a system prompt of ~1,000 tokens every request shares and a user turn of ~1,000 tokens of its own (8 KB of JSON, `max_tokens` 512), answered with its first event and then its usage and `[DONE]`; the relay's cost per further SSE event is measured apart (below), so a longer answer's cost is that figure times its events.",
    "- The nodes answer at once (bench/wan/node.ts): what is measured is the path. Percentiles are nearest-rank; _added_ is the path's percentile less the direct call's at the same round trip (one at a time for the retry rows).",
    "",
    "## Results",
    "",
    "| round trip | place | mode | path | TTFB p50 | TTFB p99 | added p50 | added p99 | n | errors |",
    "| ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...[...oneProcess, ...rows].map(
      (r) =>
        `| ${r.rtt_ms} | ${PLACES[r.rtt_ms] ?? ""} | ${r.mode} | ${r.path}${r.derived ? " (derived)" : ""} | ${ms(r.ttfb_p50_ms)} | ${ms(r.ttfb_p99_ms)} | ${r.path === "direct" ? "" : ms(r.added_p50_ms)} | ${r.path === "direct" ? "" : ms(r.added_p99_ms)} | ${r.n} | ${r.errors} |`,
    ),
    "",
    ...stageLines(stages, ms),
    ...floorLines(floor, ownCpu, stages?.relay_per_event_us, ms),
    "## Targets",
    "",
    `- warmpath's added time to first byte over the direct call at every round trip: <= ${TARGET_P50_MS} ms p50 and <= ${TARGET_P99_MS} ms p99. ${
      misses.length === 0
        ? "**Met** in every row."
        : `**Missed** in ${misses.length} of ${warm.length} rows: ${misses.map((r) => `${r.rtt_ms} ms ${r.mode} (+${ms(r.added_p50_ms)} / +${ms(r.added_p99_ms)})`).join("; ")}.`
    }`,
    `- The router's own cost, the whole path (edge, binding, region worker, object) in one workerd process with its bindings in-process, round trip 0: **+${ms(own?.added_p50_ms)} ms p50 / +${ms(own?.added_p99_ms)} ms p99** to the first byte over the direct call one at a time (target <= 2 / <= 10: ${(own?.added_p50_ms ?? Infinity) <= 2 && (own?.added_p99_ms ?? Infinity) <= 10 ? "met" : "missed"}), **${ms(ownCpu)} ms of CPU per request** (target <= ${TARGET_CPU_MS}: ${(ownCpu ?? Infinity) <= TARGET_CPU_MS ? "met" : "missed"}): the workerd process and its host, less their idle rate, which includes the local stand-ins for the edge rate limiter (a Durable Object in the same process) and the log relay to the host.`,
    `- CPU per request with each worker in a process of its own (the warmpath rows): ${cpu
      .filter((c) => c.path === "warmpath")
      .map((c) => `${ms(c.cpu_ms_per_request)} ms at ${c.rtt_ms} ms`)
      .join(", ")}; that adds an HTTP exchange between two processes per request, which on Cloudflare is the service binding's.`,
    `- A retry adds no crossing: warmpath's retried requests' p50 exceeds its one-at-a-time p50 by ${retryAdds.map((a) => `${ms(a.extra)} ms at ${a.rtt} ms`).join(", ")} (a crossing would add the round trip); the single-worker layout adds ${RTTS.map((r) => `${2 * r} ms`).join(", ")} on top of its own retry.`,
    "",
  ];
  return lines.join("\n");
}

await main();
process.exit(0);
