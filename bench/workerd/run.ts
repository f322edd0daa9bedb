/**
 * The router's own cost inside workerd (issue 13), not only under Node: bundles the bench worker
 * (bench/workerd/worker.mts, importing the production src/ and durable-objects/ modules), runs it
 * in workerd through Miniflare's Node API, and measures
 *
 *   1. the edge's prefix hashing (canonicalise + hash a chat prompt): µs per call and MB/s;
 *   2. a routing decision in the region router on an index of 10^4-10^6 node-block entries over
 *      8-256 nodes: µs per route + firstByte + complete;
 *   3. one region Durable Object's throughput: route + complete pairs per second through a real
 *      RegionDurableObject stub, at rising concurrency, with latency;
 *   4. with `--validation` alone (`npm run bench:validate`, into bench/workerd/VALIDATION.md):
 *      validating a request body at the edge, a short exchange and a 400-item agentic session in
 *      each API with long lists, by the edge's fast schemas and by zod alone.
 *
 * Times are taken from outside the isolate, whole batches at a time, less an empty batch
 * (bench/workerd/timing.ts says why). Writes bench/workerd/RESULTS.md (VALIDATION.md), or with
 * `--quick` (a few small cases, under a minute) .tmp/bench-workerd-quick/RESULTS.md
 * (.tmp/bench-validate-quick/VALIDATION.md), so a quick run never overwrites the full results.
 *
 *   node bench/workerd/run.ts [--quick] [--validation] [--out FILE]   (npm run bench:workerd, bench:validate)
 */
import { parseArgs } from "node:util";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { Agent, get } from "node:http";
import { createRequire } from "node:module";
import { cpus, loadavg } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { parse as parseToml } from "smol-toml";
import { format, resolveConfig } from "prettier";
import { median, percentileOf } from "../../src/core/stats.ts";
import { batchSizeFor, perCallFromBatches, type PerCall } from "./timing.ts";
import {
  chatPrompt,
  FILL_TARGET,
  HASH_SIZES,
  hashBatch,
  IN_FLIGHT,
  NODE_TOKEN_BINDING,
  ROUTE_POOL_SIZE,
  ROUTE_PROMPT_CHARS,
  routePool,
  RouteScenario,
  STEP_MS,
  THROUGHPUT_CONFIG,
  THROUGHPUT_NODES,
  type RouteShape,
  agenticBody,
  validateBatch,
  VALIDATE_APIS,
  VALIDATE_ITEMS,
  type ValidateApi,
} from "./scenarios.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, "..", "..");

const { values: args } = parseArgs({
  options: { quick: { type: "boolean", default: false }, validation: { type: "boolean", default: false }, out: { type: "string" } },
});
const quick = args.quick === true;
/** `--validation` (`npm run bench:validate`): section 4 alone, into its own file (VALIDATION.md). */
const validationOnly = args.validation === true;
const OUT_FILE = validationOnly ? "VALIDATION.md" : "RESULTS.md";
const OUT = resolve(
  args.out ??
    (quick ? join(REPO, ".tmp", validationOnly ? "bench-validate-quick" : "bench-workerd-quick", OUT_FILE) : join(HERE, OUT_FILE)),
);

/** What a run measures and how long it spends on it. The full run takes about two minutes on 2 cores, --quick under 10 s. */
interface Profile {
  hashSizes: readonly number[];
  /** Wall time each timed batch aims at, ms: long next to the overhead's jitter (~0.1-0.5 ms), short next to the run. */
  batchTargetMs: number;
  /** Timed batches (each with an empty batch before it) per hashing size and per index shape. */
  hashBatches: number;
  routeBatches: number;
  routeEntries: readonly number[];
  routeNodes: readonly number[];
  /** Calls routed after filling and before timing (bench/route-cost.ts warms up with up to 5,000). */
  routeWarmup: number;
  /** The shape also timed under Node, for comparison (the target's). */
  nodeShape: RouteShape;
  /** Single calls timed one by one under Node at {@link nodeShape}, for a true per-call tail. */
  nodeSingleCalls: number;
  /** Concurrency levels of the throughput test. */
  concurrency: readonly number[];
  /** Driver-driven levels: each runs this long (ms), the first {@link levelWarmupMs} not counted. */
  levelMs: number;
  levelWarmupMs: number;
  /** Worker-driven levels: pairs per timed run, and runs per level. */
  loadPairs: number;
  loadRuns: number;
  /** Pairs sent before the throughput test, so the region object's index and JIT are warm. */
  throughputWarmup: number;
  /** Timed batches per body validated (section 4). */
  validateBatches: number;
}

const FULL: Profile = {
  hashSizes: HASH_SIZES,
  batchTargetMs: 25,
  hashBatches: 60,
  routeBatches: 100,
  routeEntries: [10_000, 100_000, 1_000_000],
  routeNodes: [8, 64, 256],
  routeWarmup: 5_000,
  nodeShape: { nodes: 64, entries: 1_000_000 },
  nodeSingleCalls: 20_000,
  concurrency: [1, 2, 4, 8, 16, 32, 64],
  levelMs: 3_000,
  levelWarmupMs: 300,
  loadPairs: 3_000,
  loadRuns: 3,
  throughputWarmup: 4_000,
  validateBatches: 30,
};

const QUICK: Profile = {
  hashSizes: HASH_SIZES,
  batchTargetMs: 10,
  hashBatches: 8,
  routeBatches: 10,
  routeEntries: [10_000],
  routeNodes: [8, 64],
  routeWarmup: 3_000,
  nodeShape: { nodes: 64, entries: 10_000 },
  nodeSingleCalls: 2_000,
  concurrency: [1, 8, 32],
  levelMs: 600,
  levelWarmupMs: 100,
  loadPairs: 500,
  loadRuns: 2,
  throughputWarmup: 1_000,
  validateBatches: 6,
};

const profile = quick ? QUICK : FULL;

/** Targets from issue 13. */
const HASH_TARGET = { chars: 100_000, us: 300 };
const ROUTE_TARGET = { nodes: 64, entries: 1_000_000, us: 50 };

/** Fill requests per call to the bench object (a few seconds at most), and at most this many per new entry in all. */
const FILL_CHUNK = 20_000;
const FILL_REQUESTS_PER_ENTRY = 0.5;
/** A calibration batch grows 4x at a time until it runs at least this long (ms, overhead subtracted). */
const CALIBRATION_MIN_MS = 4;
/**
 * Calibration batches timed at each size; their median decides, so that one batch slowed by a
 * collection or a neighbour cannot set K (it once made K = 6, a batch shorter than the jitter).
 */
const CALIBRATION_REPEATS = 3;
/** Empty batches timed before calibrating, for a first estimate of the overhead. */
const OVERHEAD_SAMPLES = 7;
/** Untimed batches first, so the code under test is compiled before anything is measured. */
const JIT_WARMUP_BATCHES = 3;

// ---------------------------------------------------------------------------------------------
// The runtime

/** The version of an installed package, resolved from `from` (a file path) as Node would load it. */
function packageVersion(name: string, from: string): string {
  const file = createRequire(from).resolve(`${name}/package.json`);
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

const miniflareEntry = createRequire(import.meta.url).resolve("miniflare");
const versions = {
  node: process.version,
  miniflare: packageVersion("miniflare", import.meta.url),
  workerd: packageVersion("workerd", miniflareEntry),
  wrangler: packageVersion("wrangler", import.meta.url),
};
/** The compatibility date the router deploys with, so the bench runs under the same runtime semantics. */
const compatibilityDate = (parseToml(readFileSync(join(REPO, "wrangler.toml"), "utf8")) as { compatibility_date: string })
  .compatibility_date;

async function bundleWorker(): Promise<string> {
  const result = await build({
    entryPoints: [join(HERE, "worker.mts")],
    bundle: true,
    format: "esm",
    platform: "browser",
    conditions: ["workerd", "worker", "browser"],
    target: "es2023",
    external: ["cloudflare:*"],
    write: false,
    logLevel: "warning",
  });
  return result.outputFiles[0]!.text;
}

const log = (line: string) => process.stderr.write(line + "\n");
const runStart = Date.now();
const loadBefore = loadavg();

log(`bench:workerd${quick ? " --quick" : ""}: bundling the bench worker`);
const script = await bundleWorker();
const WORKER_NAME = "bench";
const mf = new Miniflare(
  convertV4MiniflareOptions({
    name: WORKER_NAME,
    modules: true,
    script,
    compatibilityDate,
    durableObjects: {
      // The production class under its production binding name (wrangler.toml), SQLite-backed as deployed.
      REGION: { className: "RegionDurableObject", useSQLite: true },
      ROUTE_BENCH: { className: "RouteBench" },
    },
    bindings: { WARMPATH_CONFIG: THROUGHPUT_CONFIG, [NODE_TOKEN_BINDING]: "bench-node-token" },
    // A socket straight to the bench worker, bypassing Miniflare's entry worker (which would add a
    // second worker hop to every request): half the per-request overhead, and less jitter.
    unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
  }),
);
await mf.ready;
const base = await mf.unsafeGetDirectURL(WORKER_NAME);
/** Keep-alive connections, enough for the highest concurrency: no connection setup in any timing. */
const agent = new Agent({ keepAlive: true, maxSockets: Math.max(...profile.concurrency) + 1 });

/** Wall time (ms) of one request to the bench worker, and its answer (JSON, except /noop's text). */
function call<T>(path: string): Promise<{ ms: number; body: T }> {
  return new Promise((resolveCall, reject) => {
    const t0 = process.hrtime.bigint();
    get(new URL(path, base), { agent }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => {
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        if (res.statusCode !== 200) reject(new Error(`${path}: ${res.statusCode} ${text.slice(0, 500)}`));
        else resolveCall({ ms, body: (path === "/noop" ? text : JSON.parse(text)) as T });
      });
    }).on("error", reject);
  });
}

/** What a batch endpoint answers: the isolate's own clock reading of the batch (0 when frozen). */
interface BatchAnswer {
  isolateMs: number;
}

/** Runs one batch of `k` calls and returns its wall time, ms (and the isolate clock's, when there is one). */
type BatchTimer = (k: number) => Promise<{ ms: number; isolateMs?: number }>;

/** Batch timing result, with the isolate clock's µs per call beside the external one (NaN without one). */
interface Timed extends PerCall {
  isolateUs: number;
}

/** A batch endpoint of the bench worker, timed from outside. */
const endpoint =
  (pathFor: (k: number) => string): BatchTimer =>
  async (k) => {
    const r = await call<BatchAnswer>(pathFor(k));
    return { ms: r.ms, isolateMs: r.body.isolateMs };
  };

/** The same work in this Node process: a batch is one synchronous call, timed with hrtime around it. */
const inNode =
  (batch: (k: number) => unknown): BatchTimer =>
  async (k) => {
    const t0 = process.hrtime.bigint();
    batch(k);
    return { ms: Number(process.hrtime.bigint() - t0) / 1e6 };
  };

/**
 * Times batches: warm-up, overhead estimate, calibration of K to {@link Profile.batchTargetMs},
 * then `batches` pairs of (empty batch, full batch), interleaved so that any drift of the machine
 * weighs on both alike.
 */
async function timeBatches(time: BatchTimer, batches: number): Promise<Timed> {
  for (let i = 0; i < JIT_WARMUP_BATCHES; i++) await time(1);
  const overhead: number[] = [];
  for (let i = 0; i < OVERHEAD_SAMPLES; i++) overhead.push((await time(0)).ms);
  let k = 1;
  let ms = 0;
  for (;;) {
    const samples: number[] = [];
    for (let r = 0; r < CALIBRATION_REPEATS; r++) samples.push((await time(k)).ms);
    ms = median(samples) - median(overhead);
    if (ms >= CALIBRATION_MIN_MS || k >= 1 << 20) break;
    k *= 4;
  }
  const K = batchSizeFor(ms, k, profile.batchTargetMs);
  const full: number[] = [];
  const empty: number[] = [];
  const isolate: number[] = [];
  for (let i = 0; i < batches; i++) {
    empty.push((await time(0)).ms);
    const r = await time(K);
    full.push(r.ms);
    isolate.push(r.isolateMs ?? Number.NaN);
  }
  return { ...perCallFromBatches(full, empty, K), isolateUs: (median(isolate) * 1000) / K };
}

// ---------------------------------------------------------------------------------------------
// 4. Validating a request body (`--validation`: this section alone)

interface ValidateRow {
  api: ValidateApi;
  items: number;
  bytes: number;
  fast: { workerd: Timed; node: Timed };
  zod: { workerd: Timed; node: Timed };
}

const validateRows: ValidateRow[] = [];
for (const api of validationOnly ? VALIDATE_APIS : []) {
  for (const items of VALIDATE_ITEMS) {
    log(`validating: ${api}, ${items} items`);
    const text = JSON.stringify(agenticBody(api, items));
    const body = JSON.parse(text) as unknown;
    const timed = async (how: "fast" | "zod") => ({
      workerd: await timeBatches(
        endpoint((k) => `/validate?api=${api}&items=${items}&how=${how}&k=${k}`),
        profile.validateBatches,
      ),
      node: await timeBatches(
        inNode((k) => validateBatch(api, body, how, k)),
        profile.validateBatches,
      ),
    });
    validateRows.push({ api, items, bytes: Buffer.byteLength(text), fast: await timed("fast"), zod: await timed("zod") });
  }
}

// ---------------------------------------------------------------------------------------------
// 1. Prefix hashing

interface HashRow {
  chars: number;
  blocks: number;
  workerd: Timed;
  node: Timed;
}

const hashRows: HashRow[] = [];
for (const chars of validationOnly ? [] : profile.hashSizes) {
  log(`hashing: ${chars.toLocaleString("en-US")} characters`);
  const workerd = await timeBatches(
    endpoint((k) => `/hash?chars=${chars}&k=${k}`),
    profile.hashBatches,
  );
  const { body } = await call<{ blocks: number }>(`/hash?chars=${chars}&k=1`);
  const prompt = chatPrompt(chars);
  const node = await timeBatches(
    inNode((k) => hashBatch(prompt, k)),
    profile.hashBatches,
  );
  hashRows.push({ chars, blocks: body.blocks, workerd, node });
}

// ---------------------------------------------------------------------------------------------
// 2. Routing on a filled index

interface RouteRow {
  shape: RouteShape;
  held: number;
  full: boolean;
  fillRequests: number;
  fillSeconds: number;
  timed: Timed;
  runtime: "workerd" | "node";
  /** Node only: single calls timed one by one. */
  single?: { p50: number; p99: number };
}

/** Fills a scenario through `fill(requests)` in chunks until the index is full or the request budget is spent. */
async function fillIndex(shape: RouteShape, fill: (requests: number) => Promise<{ entries: number; full: boolean; routed: number }>) {
  const budget = Math.ceil(shape.entries * FILL_REQUESTS_PER_ENTRY);
  const t0 = Date.now();
  let sent = 0;
  let state = { entries: 0, full: false, routed: 0 };
  while (!state.full && sent < budget) {
    state = await fill(Math.min(FILL_CHUNK, budget - sent));
    sent += state.routed;
  }
  return { entries: state.entries, full: state.full, requests: sent, seconds: (Date.now() - t0) / 1000 };
}

const routeRows: RouteRow[] = [];
for (const entries of validationOnly ? [] : profile.routeEntries) {
  for (const nodes of profile.routeNodes) {
    const shape = { nodes, entries };
    log(`routing: ${nodes} nodes, ${entries.toLocaleString("en-US")} entries: filling`);
    await call(`/route/setup?nodes=${nodes}&entries=${entries}`);
    const filled = await fillIndex(
      shape,
      async (n) => (await call<{ entries: number; full: boolean; routed: number }>(`/route/fill?requests=${n}`)).body,
    );
    await call(`/route/run?k=${profile.routeWarmup}`);
    log(`  filled to ${filled.entries.toLocaleString("en-US")} entries in ${filled.seconds.toFixed(1)} s; timing`);
    const timed = await timeBatches(
      endpoint((k) => `/route/run?k=${k}`),
      profile.routeBatches,
    );
    routeRows.push({
      shape,
      held: filled.entries,
      full: filled.full,
      fillRequests: filled.requests,
      fillSeconds: filled.seconds,
      timed,
      runtime: "workerd",
    });
  }
}

if (!validationOnly) {
  const shape = profile.nodeShape;
  log(`routing under Node: ${shape.nodes} nodes, ${shape.entries.toLocaleString("en-US")} entries`);
  const scenario = new RouteScenario(shape, routePool());
  const filled = await fillIndex(shape, async (n) => scenario.fill(n));
  scenario.run(profile.routeWarmup);
  const timed = await timeBatches(
    inNode((k) => scenario.run(k)),
    profile.routeBatches,
  );
  const single: number[] = [];
  for (let i = 0; i < profile.nodeSingleCalls; i++) {
    const t0 = process.hrtime.bigint();
    scenario.run(1);
    single.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  routeRows.push({
    shape,
    held: filled.entries,
    full: filled.full,
    fillRequests: filled.requests,
    fillSeconds: filled.seconds,
    timed,
    runtime: "node",
    single: { p50: median(single), p99: percentileOf(single, 0.99) },
  });
}

// ---------------------------------------------------------------------------------------------
// 3. One region object's throughput

interface LoadRow {
  /** `pair`: route + complete on the region object; `floor`: the same two RPCs to an object that does nothing. */
  kind: "pair" | "floor";
  concurrency: number;
  pairsPerSecond: number;
  meanMs: number;
}
interface HttpRow {
  concurrency: number;
  path: "/pair" | "/noop";
  perSecond: number;
  p50: number;
  p99: number;
  count: number;
}

if (!validationOnly) log(`throughput: warming the region object (${profile.throughputWarmup} pairs)`);
if (!validationOnly) await call(`/load?c=8&n=${profile.throughputWarmup}`);

/** Worker-driven: `c` chains inside the worker, timed from outside, less an empty run's overhead. */
async function loadLevel(c: number, kind: LoadRow["kind"]): Promise<LoadRow> {
  const floor = kind === "floor" ? "&floor=1" : "";
  const runs: number[] = [];
  const empty: number[] = [];
  for (let r = 0; r < profile.loadRuns; r++) {
    empty.push((await call(`/load?c=${c}&n=0${floor}`)).ms);
    runs.push((await call(`/load?c=${c}&n=${profile.loadPairs}${floor}`)).ms);
  }
  const seconds = (median(runs) - median(empty)) / 1000;
  const pairsPerSecond = profile.loadPairs / seconds;
  // Little's law: in a closed loop of c chains, the mean time per pair is c / throughput.
  return { kind, concurrency: c, pairsPerSecond, meanMs: (c / pairsPerSecond) * 1000 };
}

const maxC = profile.concurrency[profile.concurrency.length - 1]!;
const loadRows: LoadRow[] = [];
for (const c of validationOnly ? [] : profile.concurrency) {
  log(`throughput: ${c} chains inside the worker`);
  loadRows.push(await loadLevel(c, "pair"));
}
for (const c of validationOnly ? [] : [1, maxC]) {
  log(`throughput: ${c} chains inside the worker, RPC floor`);
  loadRows.push(await loadLevel(c, "floor"));
}

/** Driver-driven: `c` concurrent HTTP requests, each one pair (or nothing), each timed from here. */
async function httpLevel(c: number, path: "/pair" | "/noop"): Promise<HttpRow> {
  const latencies: number[] = [];
  let seq = 0;
  const start = Date.now();
  const measureFrom = start + profile.levelWarmupMs;
  const end = start + profile.levelMs;
  const loop = async () => {
    while (Date.now() < end) {
      const { ms } = await call(path === "/pair" ? `/pair?i=${seq++}` : "/noop");
      const now = Date.now();
      if (now >= measureFrom && now <= end) latencies.push(ms);
    }
  };
  await Promise.all(Array.from({ length: c }, loop));
  // Requests that end inside the window count; those still in flight at its end do not.
  const seconds = (end - measureFrom) / 1000;
  return {
    concurrency: c,
    path,
    perSecond: latencies.length / seconds,
    p50: median(latencies),
    p99: percentileOf(latencies, 0.99),
    count: latencies.length,
  };
}

const httpRows: HttpRow[] = [];
for (const c of validationOnly ? [] : profile.concurrency) {
  log(`throughput: ${c} concurrent HTTP requests`);
  httpRows.push(await httpLevel(c, "/pair"));
}
for (const c of validationOnly ? [] : [1, maxC]) {
  log(`throughput: ${c} concurrent HTTP requests, no object`);
  httpRows.push(await httpLevel(c, "/noop"));
}

await mf.dispose();
const loadAfter = loadavg();
const runSeconds = (Date.now() - runStart) / 1000;

// ---------------------------------------------------------------------------------------------
// Report

const n0 = (x: number) => Math.round(x).toLocaleString("en-US");
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const ms2 = (x: number) => x.toFixed(2);
const command = `node bench/workerd/run.ts${process.argv.slice(2).length ? " " + process.argv.slice(2).join(" ") : ""}`;
const cpu = cpus();

const hashAt = hashRows.find((r) => r.chars === HASH_TARGET.chars);
const routeAt = routeRows.find(
  (r) => r.runtime === "workerd" && r.shape.nodes === ROUTE_TARGET.nodes && r.shape.entries === ROUTE_TARGET.entries,
);
const pairLoad = loadRows.filter((r) => r.kind === "pair");
const peakLoad = pairLoad.reduce((a, b) => (b.pairsPerSecond > a.pairsPerSecond ? b : a), pairLoad[0]!);
const single = pairLoad.find((r) => r.concurrency === 1);
const floorSingle = loadRows.find((r) => r.kind === "floor" && r.concurrency === 1);
const pairRows = httpRows.filter((r) => r.path === "/pair");
const peakHttp = pairRows.reduce((a, b) => (b.perSecond > a.perSecond ? b : a), pairRows[0]!);

const verdict = (what: string, measured: number | undefined, target: number, unit: string) =>
  measured === undefined
    ? `- ${what}: not measured in this run (${quick ? "--quick" : "profile"} does not include it).`
    : `- ${what}: **${f1(measured)} ${unit}**, ${measured < target ? "under" : "**over**"} the ${target} ${unit} target.`;

/** A report's title, how it was made, and the machine and runtime it was measured on. */
const headMd = (title: string, script: string): string[] => [
  `# ${title}\n`,
  `Generated by \`${command}\` (\`npm run ${script}${quick ? " -- --quick" : ""}\`) in ${runSeconds.toFixed(0)} s. Do not edit: rerun to refresh.\n`,
  "## Machine\n",
  `- CPU: ${cpu[0]?.model ?? "unknown"}, ${cpu.length} cores; load average (1 min) ${f2(loadBefore[0]!)} before the run, ${f2(loadAfter[0]!)} after. ` +
    "The machine may be shared: a busy neighbour inflates every figure, and the tails most.",
  `- workerd ${versions.workerd} (through Miniflare ${versions.miniflare}, compatibility date ${compatibilityDate} from wrangler.toml); ` +
    `the project's wrangler is ${versions.wrangler}, which runs its own, slightly newer, workerd under \`wrangler dev\`.`,
  `- Node ${versions.node} for the Node columns (the same code, bench/workerd/scenarios.ts, in the driver's process).\n`,
];

const resultsMd = (): string[] => [
  ...headMd("The router's own cost inside workerd", "bench:workerd"),
  "## Method\n",
  "The bench worker (bench/workerd/worker.mts) is bundled with esbuild from the production modules and run in workerd by Miniflare; the driver (bench/workerd/run.ts) times it from outside. " +
    "Inside workerd a script cannot time one call: deployed, `Date.now()` and `performance.now()` are frozen during synchronous execution and move only on I/O, and this local runtime lets them move but in whole milliseconds. " +
    "So the driver asks the worker for a batch of K calls and measures the HTTP request's wall time, then subtracts the median wall time of an empty batch (K = 0: the same request and, for the router, the same RPC to the object, no calls). " +
    `K is calibrated so a batch takes about ${profile.batchTargetMs} ms, far above the overhead's jitter; each timed batch follows an empty one, so drift weighs on both. ` +
    "**Median** = (median batch time - median empty time) / K. **p99** = the 99th percentile over batches of each batch's time per call: the tail of K-call averages (a garbage collection inside a batch shows there), not of single calls, which cannot be observed from outside; the Node row of table 2 also times single calls. " +
    "The *isolate clock* column is the worker's own `performance.now()` over the same batches: a cross-check, to a millisecond per batch, that the subtraction leaves the work and nothing else.\n",
  "## 1. Prefix hashing at the edge\n",
  `Per call: \`prefixKey\` (src/core/prefix.ts): canonicalise an OpenAI-style chat request (src/core/canonical.ts) and hash it into chained blocks, what the worker does once per request (src/edge/api/inference.ts). ` +
    "The prompts are bench/hash.ts's (a system prompt and alternating turns). MB/s is prompt characters (ASCII, so bytes) per µs.\n",
  "| prompt | blocks | workerd median µs | workerd p99 µs | workerd MB/s | isolate clock µs | Node median µs | Node MB/s | K x batches |",
  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ...hashRows.map(
    (r) =>
      `| ${n0(r.chars)} chars | ${r.blocks} | ${f1(r.workerd.medianUs)} | ${f1(r.workerd.p99Us)} | ${n0(r.chars / r.workerd.medianUs)} | ${f1(r.workerd.isolateUs)} | ${f1(r.node.medianUs)} | ${n0(r.chars / r.node.medianUs)} | ${n0(r.workerd.k)} x ${r.workerd.batches} |`,
  ),
  "",
  verdict(`100 KB in workerd (median)`, hashAt?.workerd.medianUs, HASH_TARGET.us, "µs"),
  "",
  "## 2. A routing decision in the region router\n",
  `Per call: \`RegionRouter.route\` (src/core/region/router.ts: walk the prefix index, score every node, warmpath's policy, insert the prompt's blocks), then \`firstByte\` and \`complete\` of the request ${IN_FLIGHT} calls earlier, as bench/route-cost.ts does, one call every ${STEP_MS} ms of simulated time. ` +
    `The router runs in a Durable Object (\`RouteBench\`, holding one RegionRouter between batches, as the region object does). ` +
    `Routed prompts: ${n0(ROUTE_POOL_SIZE)} prompts of ${n0(ROUTE_PROMPT_CHARS)} characters (20 blocks) cycled, each one of 20 system prompts (half its length) and its own tail. ` +
    `The index is capped (\`maxIndexEntries\`) at the entries shown, each node's KV capacity set to twice its share of the cap so that the cap binds, and filled before timing by routing cold prompts (20 new blocks each, which the policy spreads over every node) until it holds ${FILL_TARGET * 100}% of the cap; then ${n0(profile.routeWarmup)} untimed calls, and the timed calls run on the full index (each insert evicts, as an LRU at its cap does).\n`,
  "| runtime | nodes | index entries (cap) | held | median µs | p99 µs | decisions/s (1 / median) | isolate clock µs | K x batches | fill |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ...routeRows.map(
    (r) =>
      `| ${r.runtime} | ${r.shape.nodes} | ${n0(r.shape.entries)} | ${n0(r.held)}${r.full ? "" : " (not full)"} | ${f1(r.timed.medianUs)} | ${f1(r.timed.p99Us)} | ${n0(1e6 / r.timed.medianUs)} | ${Number.isNaN(r.timed.isolateUs) ? "-" : f1(r.timed.isolateUs)} | ${n0(r.timed.k)} x ${r.timed.batches} | ${n0(r.fillRequests)} requests, ${f1(r.fillSeconds)} s |`,
  ),
  "",
  ...routeRows
    .filter((r) => r.single)
    .map(
      (r) =>
        `Single calls under Node (${n0(profile.nodeSingleCalls)}, each timed with hrtime, ${r.shape.nodes} nodes, ${n0(r.shape.entries)} entries): p50 ${f1(r.single!.p50)} µs, p99 ${f1(r.single!.p99)} µs.\n`,
    ),
  verdict(
    `${n0(ROUTE_TARGET.entries)} entries on ${ROUTE_TARGET.nodes} nodes in workerd (median)`,
    routeAt?.timed.medianUs,
    ROUTE_TARGET.us,
    "µs",
  ),
  "",
  "## 3. One region object's throughput\n",
  `Per pair: what src/region/dispatch.ts asks the region's Durable Object per request, \`stub.route(init, request)\` then \`stub.complete(ticket, outcome)\` with the answer's usage, over RPC to the production \`RegionDurableObject\` (durable-objects/region.ts, SQLite-backed). ` +
    `Its \`RegionInit\` is built by the production loader (src/config/load.ts) from a one-region configuration (bench/workerd/scenarios.ts: ${THROUGHPUT_NODES} static nodes, every setting at its default, so the default index cap); prompts are table 2's ${n0(ROUTE_PROMPT_CHARS)}-character pool, so the object validates 20 hashes per call. ` +
    `Production also sends \`firstByte\`, a third, smaller RPC per request; it is not in these pairs. ` +
    `The object is warmed with ${n0(profile.throughputWarmup)} pairs first. ` +
    "workerd serves the caller and the object on one thread here, so each figure includes the caller's side of every RPC: a lower bound on what the object alone sustains.\n",
  `**(a) Load generated inside the worker**: c chains, each awaiting its pair before sending the next, ${n0(profile.loadPairs)} pairs per run, ${profile.loadRuns} runs per level timed from outside less an empty run (median); mean latency by Little's law (c / throughput). No HTTP per pair, so this is the object's throughput with the cheapest possible caller.\n`,
  "| calls | chains | pairs/s | mean latency ms |",
  "|---|---:|---:|---:|",
  ...loadRows.map(
    (r) =>
      `| ${r.kind === "pair" ? "route + complete" : "RPC floor (same calls, no work)"} | ${r.concurrency} | ${n0(r.pairsPerSecond)} | ${ms2(r.meanMs)} |`,
  ),
  "",
  single && floorSingle
    ? `One chain: ${f1(single.meanMs * 1000)} µs per pair, of which ${f1(floorSingle.meanMs * 1000)} µs is the two RPCs themselves (the floor rows: the same calls and arguments to an object that does nothing) and ${f1((single.meanMs - floorSingle.meanMs) * 1000)} µs the object's work (validating the init and the request, routing, completing).\n`
    : "",
  `**(b) One HTTP request per pair from the driver**: c requests in flight, each a pair, for ${(profile.levelMs / 1000).toFixed(1)} s per level (the first ${profile.levelWarmupMs} ms not counted); each request timed by the driver over a keep-alive connection straight to the bench worker, so latency includes the local HTTP hop, and the driver shares the 2 cores with workerd. The \`/noop\` rows are the same requests with no object call: that hop alone.\n`,
  "| path | concurrency | requests/s | p50 ms | p99 ms | requests timed |",
  "|---|---:|---:|---:|---:|---:|",
  ...httpRows.map((r) => `| ${r.path} | ${r.concurrency} | ${n0(r.perSecond)} | ${ms2(r.p50)} | ${ms2(r.p99)} | ${n0(r.count)} |`),
  "",
  `Peak: ${n0(peakLoad.pairsPerSecond)} pairs/s at ${peakLoad.concurrency} chains inside the worker (mean ${ms2(peakLoad.meanMs)} ms); ${n0(peakHttp.perSecond)} pairs/s at ${peakHttp.concurrency} concurrent HTTP requests (p50 ${ms2(peakHttp.p50)} ms, p99 ${ms2(peakHttp.p99)} ms).`,
  "",
];

const validationMd = (): string[] => [
  ...headMd("Validating a request body at the edge, inside workerd", "bench:validate"),
  "## Method\n",
  "As bench/workerd/RESULTS.md's (the same harness, bench/workerd/run.ts): the bench worker runs the production modules in workerd, and each figure is a batch of K calls timed from outside less an empty batch, per call (median over the batches), beside the same code in the driver's Node process. " +
    "The two schemas of a row are timed in the same sitting. zod's figures vary most from run to run: it copies every item it checks, so garbage collection lands in its batches.\n",
  "## Validating a request body\n",
  "Per call: the edge's check of a parsed request body (src/edge/api/inference.ts), by its fast schema (src/edge/api/schemas.ts `fastSchemas`: the long lists checked by one loop each, src/edge/api/list-checks.ts) and by its zod schema alone, as the edge checked it before. " +
    "Bodies (bench/workerd/scenarios.ts `agenticBody`): 2 items (a short exchange), and a coding agent's session of 400 (the task, then alternating tool calls and results of ~400 characters). " +
    "workerd allows no eval, so zod runs there without its JIT; Node runs it with its JIT (the Node columns), as a Node service would.\n",
  "| API | items | body KB | workerd fast µs | workerd zod µs | isolate clock µs (fast) | Node fast µs | Node zod µs | K x batches (workerd fast) |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ...validateRows.map(
    (r) =>
      `| ${r.api} | ${r.items} | ${f1(r.bytes / 1024)} | ${f1(r.fast.workerd.medianUs)} | ${f1(r.zod.workerd.medianUs)} | ${Number.isNaN(r.fast.workerd.isolateUs) ? "-" : f1(r.fast.workerd.isolateUs)} | ${f1(r.fast.node.medianUs)} | ${f1(r.zod.node.medianUs)} | ${n0(r.fast.workerd.k)} x ${r.fast.workerd.batches} |`,
  ),
  "",
];

const md = validationOnly ? validationMd() : resultsMd();

// Formatted as the repository's Prettier check (npm test) expects of a committed Markdown file.
const text = await format(md.join("\n"), { ...(await resolveConfig(OUT)), parser: "markdown" });
mkdirSync(dirname(OUT), { recursive: true });
writeFileSync(OUT, text);
process.stdout.write(text);
log(`wrote ${relative(process.cwd(), OUT)}`);
