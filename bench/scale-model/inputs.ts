/**
 * The scale model's inputs (bench/scale-model.ts, which prints docs/SCALING.md): every figure the
 * model starts from, each a named constant with its source beside it, of three kinds:
 *
 * - **measured** here (bench/workerd/RESULTS.md, bench/wan/results.json read as this loads,
 *   bench/ROUTE_COST.md, bench/SHARDS.md, and the protocol as the code makes it);
 * - **published** by Cloudflare: prices and limits, with the page each comes from;
 * - **assumed**, marked `ASSUMPTION`, where neither exists.
 *
 * Also what is compared: the ways to place the decision (part A), the protocols and the deployment
 * (part B). Nothing here computes a result: that is bench/scale-model/model.ts.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { DEFAULT_FLEET } from "../fleet.ts";
import { DEFAULT_REGION_SETTINGS } from "../../src/core/region/settings.ts";

/** The repository's root, for the files the model reads and names. */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** The agent's main loop: the path the doc cites. */
export const AGENT_SOURCE = "agent/agent.ts";

// ---------------------------------------------------------------------------------------------
// Inputs: geography (part A)
// ---------------------------------------------------------------------------------------------

/** A place, by coordinates (degrees). */
export interface Site {
  name: string;
  lat: number;
  lon: number;
}

/** Where a client and the GPUs serving it are. */
export interface Placement {
  name: string;
  client: Site;
  gpus: Site;
}

/** Representative placements (city coordinates), from a GPU site in the client's metro to one across the Pacific. */
export const PLACEMENTS: readonly Placement[] = [
  { name: "same metro", client: { name: "New York", lat: 40.71, lon: -74.01 }, gpus: { name: "Secaucus NJ", lat: 40.79, lon: -74.06 } },
  { name: "same continent", client: { name: "Chicago", lat: 41.88, lon: -87.63 }, gpus: { name: "Dallas", lat: 32.78, lon: -96.8 } },
  { name: "transatlantic", client: { name: "London", lat: 51.51, lon: -0.13 }, gpus: { name: "Ashburn VA", lat: 39.04, lon: -77.49 } },
  { name: "transpacific", client: { name: "Tokyo", lat: 35.68, lon: 139.69 }, gpus: { name: "Los Angeles", lat: 34.05, lon: -118.24 } },
];

/**
 * ASSUMPTION: client to the Cloudflare data center its request enters (Cloudflare lists 330+
 * cities, https://www.cloudflare.com/network/; a metro's PoP is tens of km away).
 */
export const ACCESS_KM = 50;
/**
 * ASSUMPTION: the region object to the GPUs. The object is created in a data center of its
 * location hint's area (`enam`, `weur`, ...: docs/DEPLOY.md), which spans a subcontinent, not in
 * the GPUs' building; 500 km is e.g. Ashburn to Toronto's or Chicago's data centers.
 */
export const OBJECT_TO_GPU_KM = 500;
/**
 * ASSUMPTION: a worker placed near the GPUs (`placement.region` or `placement.hostname`, which run
 * it "in the Cloudflare data center with the lowest latency" to that host:
 * https://developers.cloudflare.com/workers/configuration/placement/) to the GPUs.
 */
export const PLACED_WORKER_TO_GPU_KM = 50;
/** For Smart Placement's single placement: how far the region it picked is from the request's region (ASSUMPTION: one ocean). */
export const OTHER_REGION_KM = 6_000;
/** ASSUMPTION: Cloudflare data centers that may run the worker and pull a snapshot (https://www.cloudflare.com/network/: 330+ cities). */
export const EDGE_COLOS = 330;
/** A new connection to the origin: TCP (1 round trip) then TLS 1.3 (1 round trip) before the request (RFC 8446 full handshake, no 0-RTT). */
export const HANDSHAKE_ROUND_TRIPS = 2;

// ---------------------------------------------------------------------------------------------
// Inputs: the ways to place the decision (part A)
// ---------------------------------------------------------------------------------------------

/**
 * The ways to place the decision: `split` (5) is the one built (issue 22: src/edge/, src/region/,
 * scripts/deploy/generate.ts); `single` (1) is the one it replaced; the others are the
 * alternatives considered.
 */
export type OptionId = "direct" | "single" | "preconnect" | "relay" | "snapshot" | "smart" | "split";

/** The option built. */
export const BUILT_OPTION: OptionId = "split";

export const OPTIONS: ReadonlyArray<{ id: OptionId; label: string }> = [
  { id: "direct", label: "client calls the GPUs directly (reference)" },
  { id: "single", label: "(1) one worker asks the object, then calls the origin (before issue 22)" },
  { id: "preconnect", label: "(1b) (1) + origin connection opened during the route RPC" },
  { id: "relay", label: "(2) the object calls the origin and relays the stream" },
  { id: "snapshot", label: "(3) worker decides from a replicated snapshot" },
  { id: "smart", label: "(4) Smart Placement, the region it placed the worker by" },
  { id: "split", label: "(5) built: edge worker + per-region worker placed by the GPUs" },
];

// ---------------------------------------------------------------------------------------------
// Inputs: the deployment (part B)
// ---------------------------------------------------------------------------------------------

/** The deployment asked about (issue 13). */
export const TOTAL_RPS = 100_000;
export const REGIONS = 5;
export const NODES = 2_000;
/**
 * Every agent reports once a second (docs/API.md, Node API; bench/fleet.ts DEFAULT_FLEET.reportIntervalMs;
 * the agent's `--interval-ms`, default 1000). The agent sleeps the interval after each report's
 * answer (AGENT_SOURCE `run`), so its reports arrive a little more than 1 s apart.
 */
export const REPORT_INTERVAL_S = DEFAULT_FLEET.reportIntervalMs / 1000;
/**
 * Calls to the region (shard) object of a request whose answer streams (SSE) or is stored: `route`,
 * then `firstByte` and `complete` on the RouteSession it returns (src/region/dispatch.ts,
 * durable-objects/region.ts). Built: one billed Durable Object request (calls on an RpcTarget an RPC
 * call returned stay in its session); before issue 22, three.
 */
export const DO_CALLS_STREAMED = 3;
/**
 * Calls of a request whose answer does not stream: `route` and `complete`, which carries the first
 * byte (CompletionOutcome.firstByteMsAgo, src/contracts/routing.ts; `foldFirstByte` in
 * src/region/dispatch.ts). A stored response (Responses API) still sends `firstByte` at once: it
 * counts as streamed here.
 */
export const DO_CALLS_UNSTREAMED = 2;
/**
 * ASSUMPTION: the share of routed requests that stream (or store their response), so send
 * `firstByte` as a call of its own. No trace here records it (Mooncake's has no `stream` field);
 * chat clients and agents mostly stream, so the conservative case, every request, is modelled.
 */
export const STREAMED_SHARE = 1;
/** Calls per request to the region (shard) object, on average over streamed and unstreamed requests (billed or not). */
export const DO_CALLS_PER_REQUEST = STREAMED_SHARE * DO_CALLS_STREAMED + (1 - STREAMED_SHARE) * DO_CALLS_UNSTREAMED;
/** The shortest exchange interval, and the one bench/SHARDS.md measured (durable-objects/region.ts, SHARD_LOAD_SYNC_MS); before issue 22 the only one. */
export const SHARD_LOAD_SYNC_MS = 20;
/**
 * The requests a second a sharded region's exchange object takes, the shards' exchanges and the
 * region's node reports together (durable-objects/region.ts, EXCHANGE_OBJECT_BUDGET): 90% of the
 * documented ~1,000. The reports come first; the exchanges share what is left ...
 */
export const EXCHANGE_OBJECT_BUDGET = 900;
/** ... never less than this many a second (durable-objects/region.ts, MIN_EXCHANGES_PER_SECOND): past EXCHANGE_OBJECT_BUDGET less this in reports a second, the exchange object is over its budget whatever the interval. */
export const MIN_EXCHANGES_PER_SECOND = 100;
/** Node reports a second into one region's ingest past which its exchange object is over EXCHANGE_OBJECT_BUDGET (at the fewest exchanges), and past which it is over the documented 1,000. */
export const EXCHANGE_REPORTS_OVER_BUDGET = EXCHANGE_OBJECT_BUDGET - MIN_EXCHANGES_PER_SECOND;
/**
 * A node's `last_seen` row is rewritten once more than a third of `node_silence_ms` has passed
 * (durable-objects/region.ts, LAST_SEEN_WRITE_FRACTION), by the object that ingests its reports (the
 * region's one object, or its exchange). A shard applying the exchange's feed writes a node's row
 * only when the report registers or changes the node (`applyReport(..., seenIsDurable = false)`).
 */
export const LAST_SEEN_WRITE_FRACTION = 1 / 3;
/**
 * Before issue 22 (`git show c0b67e8^:durable-objects/region.ts`): every report of a sharded region
 * went to shard 0, which had the worker pass a node's report on to the other shards (`mirrorReport`)
 * when it registered or changed the node, and otherwise once at least a third of
 * `node_silence_ms` had passed since the last time (MIRROR_FRACTION): every 5 s by default. Built,
 * only a report that registers or changes a node goes to every shard directly (src/region/app.ts).
 */
export const MIRROR_FRACTION = 1 / 3;
/** ASSUMPTION: an object's alarm fires about once per node-silence timeout (it is re-armed for the next expiry; each setAlarm is a row written). */
export const ALARMS_PER_OBJECT_PER_S = 1000 / DEFAULT_REGION_SETTINGS.nodeSilenceMs;

/** Seconds in a billing month: Cloudflare's GB-month is averaged over 30 days (https://developers.cloudflare.com/durable-objects/platform/pricing/). */
export const MONTH_S = 30 * 24 * 3600;

/** Mean output of a conversation request: 342.6 tokens (Mooncake FAST'25 conversation trace, 12,031 requests, the trace bench/run.ts replays). */
export const OUTPUT_TOKENS_MEAN = 343;
/** ASSUMPTION: OpenAI-compatible engines stream one SSE event per decoded token (vLLM, SGLang, llama.cpp do by default). */
export const TOKENS_PER_STREAM_EVENT = 1;
/** Decode speed of one answer (bench/fleet.ts DEFAULT_FLEET.decodeRate, tokens/s), so an answer streams for OUTPUT_TOKENS_MEAN / this. */
export const DECODE_TOKENS_PER_S = DEFAULT_FLEET.decodeRate;
/** The routed prompt of the CPU measurements: 10,000 characters, 20 blocks (bench/workerd/RESULTS.md tables 1-3). */
export const PROMPT_CHARS = 10_000;
/** Characters per base block (src/core/prefix.ts default `block_chars`). */
export const BLOCK_CHARS = 512;

// Measured CPU (bench/workerd/RESULTS.md, workerd 1.20261102.1, 2-core AMD EPYC; medians).
/** Table 1: `prefixKey` of a 10,000-character chat request in workerd, µs. */
export const HASH_US_10K = 10.9;
/** Table 2: `RegionRouter.route` (+ firstByte/complete of an earlier request) at 100,000 index entries, by nodes: µs. */
export const ROUTE_US_BY_NODES: ReadonlyArray<readonly [nodes: number, us: number]> = [
  [8, 8.9],
  [64, 22.2],
  [256, 65.4],
];
/** Table 3 (one chain): the object's work per route + complete pair beyond the two RPCs (validation, routing, completing), 8 nodes, µs. */
export const PAIR_WORK_US = 34.6;
/** Table 3 (one chain, floor rows): the two RPCs themselves, both sides on one thread, µs; half is an upper bound on one call's cost to the object. */
export const RPC_FLOOR_PAIR_US = 55.2;
/** ASSUMPTION: the share of an object's one thread to plan for (at 70% an M/M/1 queue waits 2.3x the service time). */
export const TARGET_UTILISATION = 0.7;
/** The workers' CPU per request as bench/wan/results.json reports it (parseWanCpu). */
export interface MeasuredCpu {
  /**
   * CPU ms per request of the whole path in one workerd process: the edge worker, the service
   * binding, the region worker and the Durable Object, with the local stand-ins that shared it.
   */
  totalMs: number;
  /** The `path` of the row read from the `cpu` array. */
  path: string;
  /** Whether the figure counts the Node host (Miniflare, receiving the log lines) as well as workerd. */
  includesHost: boolean;
  /** The host's own CPU, when the file reports it apart (then not in totalMs). */
  hostMs?: number;
  /** The commit and time the file says it was generated at. */
  commit?: string;
  generatedAt?: string;
}

/** Where the measured worker CPU comes from (npm run bench:wan, bench/wan/run.ts). */
export const WAN_RESULTS = "bench/wan/results.json";
/** The row of WAN_RESULTS's `cpu` array read: the whole path in one process. */
export const WAN_CPU_PATH = "warmpath-one-process";

/**
 * The workers' CPU per routed request from bench/wan/results.json's `cpu` array: the row whose
 * `path` is WAN_CPU_PATH, its `cpu_ms_per_request` (one workerd process and its Node host, CPU from
 * /proc less the idle rate, one request at a time, round trip 0). A file of the later layout, which
 * names the row `one-process` and reports workerd (`workerd_ms`) and its host (`by_process`) apart,
 * gives workerd's figure, the host's beside it. Throws when the array, the row or the figure is
 * missing: the document is generated from the file or not at all.
 */
export function parseWanCpu(json: string): MeasuredCpu {
  let data: unknown;
  try {
    data = JSON.parse(json);
  } catch (e) {
    throw new Error(`${WAN_RESULTS}: not JSON (${(e as Error).message})`);
  }
  const d = (data ?? {}) as { cpu?: unknown; generated_at?: unknown; machine?: { commit?: unknown } };
  if (!Array.isArray(d.cpu)) throw new Error(`${WAN_RESULTS}: no "cpu" array`);
  const rows = d.cpu as Array<Record<string, unknown>>;
  const figure = (row: Record<string, unknown>, key: string) => {
    const x = row[key];
    if (typeof x !== "number" || !Number.isFinite(x) || x <= 0)
      throw new Error(`${WAN_RESULTS}: "${key}" of the cpu row "${String(row.path)}" is not a figure: ${JSON.stringify(x)}`);
    return x;
  };
  const commit = typeof d.machine?.commit === "string" ? /^[0-9a-f]{7,40}/.exec(d.machine.commit)?.[0] : undefined;
  const generatedAt =
    typeof d.generated_at === "string" ? d.generated_at.replace(/^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}).*$/, "$1 $2 UTC") : undefined;
  const where = { ...(commit ? { commit } : {}), ...(generatedAt ? { generatedAt } : {}) };
  const row = rows.find((r) => r?.path === WAN_CPU_PATH);
  if (row) return { totalMs: figure(row, "cpu_ms_per_request"), path: WAN_CPU_PATH, includesHost: true, ...where };
  const later = rows.find((r) => r?.path === "one-process" && (r.rtt_ms ?? 0) === 0);
  if (later) {
    const byProcess = (later.by_process ?? {}) as Record<string, unknown>;
    const host = Object.entries(byProcess)
      .filter(([k, v]) => / host$/.test(k) && typeof v === "number")
      .reduce((s, [, v]) => s + (v as number), 0);
    return { totalMs: figure(later, "workerd_ms"), path: "one-process", includesHost: false, hostMs: host, ...where };
  }
  throw new Error(`${WAN_RESULTS}: no "${WAN_CPU_PATH}" row in its "cpu" array (run npm run bench:wan)`);
}

/**
 * Measured: the workers' CPU per routed request (bench/wan/results.json, the `cpu` row of the whole
 * path in one workerd process; read when this runs, so a rerun of bench:wan flows into the
 * document). It replaces bench/e2e/RESULTS.md's 2.00 ms, measured on a single worker before the
 * edge/region split (commit 43f19cc). An upper bound for the workers with short answers: it counts
 * the region object's CPU and local stand-ins that do not exist in production (Miniflare's
 * simulation of the edge rate limiter, the Durable Object in the same process, the log relay to
 * the host). Not in it: the nodes answer a one-token stream in one write, so relaying a 343-event
 * stream is not measured (B6 shows 0.5-5 ms and the figure). Both workers' CPU is billed: a service
 * binding adds no billed request, and its callee's CPU is counted here with the caller's.
 */
export const MEASURED_CPU: MeasuredCpu = parseWanCpu(readFileSync(ROOT + WAN_RESULTS, "utf8"));
export const WORKER_CPU_MS = MEASURED_CPU.totalMs;
/**
 * ASSUMPTION: the workers' CPU per node report, edge and region worker together (authenticate the
 * node's secret, validate, forward over the service binding, validate, one RPC to the ingest). A
 * report that registers or changes a node also makes an RPC per shard: rare, not counted.
 */
export const REPORT_CPU_MS = 0.3;

// Memory.
/** A Durable Object's memory (https://developers.cloudflare.com/workers/platform/limits/: 128 MB), which objects of one class sharing an isolate share. */
export const OBJECT_MEMORY_BYTES = 128 * 1024 * 1024;
/**
 * A request in flight's ticket, measured (bench/ROUTE_COST.md, "Memory per request in flight":
 * 4,615 B at 196 blocks, 25,993 B at 1,513, in Node's V8): a fixed part (its object, the `touched`
 * pairs, its ledger entry, its place in the load model) ...
 */
export const TICKET_FIXED_BYTES = 1_430;
/** ... and its prompt's hashes joined into one string (`Ticket.chain`, src/core/region/tickets.ts): the slope between those rows. */
export const TICKET_BYTES_PER_BLOCK = 16.2;

// Per-object throughput.
/** Cloudflare: "An individual Object has a soft limit of 1,000 requests per second" (https://developers.cloudflare.com/durable-objects/platform/limits/). */
export const DO_SOFT_LIMIT_RPS = 1_000;
/** The low end of the planning range bench/ROUTE_COST.md and docs/DEPLOY.md quote (Cloudflare: ~500-1,000 requests/s per object). */
export const DO_PLANNING_LOW_RPS = 500;

/** Workers Paid: 10,000 subrequests and 6 simultaneous outgoing connections per request (https://developers.cloudflare.com/workers/platform/limits/; objects: the same, https://developers.cloudflare.com/durable-objects/platform/limits/). */
export const WORKERS_SUBREQUESTS_PER_REQUEST = 10_000;
export const WORKERS_CONNECTIONS_PER_REQUEST = 6;
/** Defaults of `limits.max_retries` and `limits.max_region_attempts` (src/config/schema.ts). */
export const MAX_RETRIES_DEFAULT = 2;
export const MAX_REGION_ATTEMPTS_DEFAULT = 3;

// bench/SHARDS.md (8 simulated nodes, x1/x2): the busiest shard's share of decisions, by shards.
export const SHARDS_MD_BUSIEST: ReadonlyArray<{ workload: string; byShards: ReadonlyArray<readonly [number, number]> }> = [
  {
    workload: "chat-heavy",
    byShards: [
      [2, 0.524],
      [4, 0.364],
      [8, 0.374],
    ],
  },
  {
    workload: "mooncake",
    byShards: [
      [2, 1],
      [4, 1],
      [8, 1],
    ],
  },
];
/**
 * bench/SHARDS.md: mean TTFT of 2-8 shards sharing load every 20 ms, over one object (best and
 * worst rows), each shard sizing its index of a node by its share of the node's recent prefill
 * (RegionSettings.minCacheShare 0.1: src/core/region/settings.ts, RegionRouter.shareForeignLoad).
 * Its shards receive every report (bench/shard-driver.ts), not the 5-s mirrors of production.
 */
export const SHARDS_EXCHANGE_TTFT_RATIO: readonly [number, number] = [0.973, 1.042];
/** bench/SHARDS.md: the worst hit rate change of those rows, relative to one object. */
export const SHARDS_EXCHANGE_HIT_RATE_WORST = -0.004;
/** bench/SHARDS.md, "A deeper key": Mooncake keyed by block 16 over 2-8 shards, mean TTFT over one object (best and worst rows). */
export const SHARDS_DEEP_KEY_TTFT_RATIO: readonly [number, number] = [1.086, 1.753];
/**
 * An earlier measurement, not in bench/SHARDS.md: shards with reports only (every 1 s) and no
 * exchange had a mean TTFT up to 1.4x one object's (durable-objects/region.ts, SHARD_LOAD_SYNC_MS
 * note; run before shards sized their share of a node's cache). bench/test/shard-driver.test.ts
 * checks only that the exchange beats reports alone.
 */
export const SHARDS_REPORTS_ONLY_TTFT_RATIO = 1.4;

// ---------------------------------------------------------------------------------------------
// Inputs: prices (USD, Workers Paid, read 2026-12-04)
// ---------------------------------------------------------------------------------------------

export interface Prices {
  subscription: number;
  workerRequestsIncluded: number;
  workerRequestPerMillion: number;
  workerCpuMsIncluded: number;
  workerCpuPerMillionMs: number;
  doRequestsIncluded: number;
  doRequestPerMillion: number;
  doGbSecondsIncluded: number;
  doPerMillionGbSeconds: number;
  doBilledGb: number;
  rowsWrittenIncluded: number;
  rowsWrittenPerMillion: number;
  rowsReadIncluded: number;
  rowsReadPerMillion: number;
  storageGbMonthIncluded: number;
  storagePerGbMonth: number;
  analyticsPointsIncluded: number;
  analyticsPerMillion: number;
  logIngestGbIncluded: number;
  logIngestPerGb: number;
  logStorageGbMonthIncluded: number;
  logStoragePerGbMonth: number;
  logRetentionDays: number;
}

export const PRICES: Prices = {
  // https://developers.cloudflare.com/workers/platform/pricing/ (Standard usage model): $5/month;
  // 10 million requests included + $0.30 per additional million; 30 million CPU ms included +
  // $0.02 per additional million CPU ms. Subrequests (the origin fetch) are not billed.
  subscription: 5,
  workerRequestsIncluded: 10e6,
  workerRequestPerMillion: 0.3,
  workerCpuMsIncluded: 30e6,
  workerCpuPerMillionMs: 0.02,
  // https://developers.cloudflare.com/durable-objects/platform/pricing/: requests 1 million + $0.15
  // per million ("Every RPC method call on a Durable Objects stub is its own RPC session and
  // therefore a single billed request"; calls on a stub an RPC call returns are not billed);
  // duration 400,000 GB-s + $12.50 per million GB-s, billed at 128 MB per object.
  doRequestsIncluded: 1e6,
  doRequestPerMillion: 0.15,
  doGbSecondsIncluded: 400_000,
  doPerMillionGbSeconds: 12.5,
  doBilledGb: 0.128,
  // Same page, SQLite storage backend: rows read 25 billion + $0.001 per million; rows written 50
  // million + $1.00 per million ("Each setAlarm is billed as a single row written"); stored data
  // 5 GB-month + $0.20 per GB-month.
  rowsWrittenIncluded: 50e6,
  rowsWrittenPerMillion: 1,
  rowsReadIncluded: 25e9,
  rowsReadPerMillion: 0.001,
  storageGbMonthIncluded: 5,
  storagePerGbMonth: 0.2,
  // https://developers.cloudflare.com/analytics/analytics-engine/pricing/: 10 million data points
  // written included + $0.25 per additional million (the worker writes one per routed request).
  analyticsPointsIncluded: 10e6,
  analyticsPerMillion: 0.25,
  // https://developers.cloudflare.com/observability/pricing/ (Workers Logs from 2026-12-01): 50 GB
  // ingestion + $0.25 per GB; 12 GB-month storage + $0.10 per GB-month; seven-day retention.
  logIngestGbIncluded: 50,
  logIngestPerGb: 0.25,
  logStorageGbMonthIncluded: 12,
  logStoragePerGbMonth: 0.1,
  logRetentionDays: 7,
};

/**
 * Workers invoked per routed request and per node report: the edge, and the region worker over its
 * service binding (src/edge/forward.ts, src/edge/api/nodes.ts); both log to Workers Logs (the
 * generated configurations share the environment's `observability`: scripts/deploy/generate.ts).
 */
export const WORKERS_PER_REQUEST = 2;
/** ASSUMPTION: bytes of one request's decision line with its candidates (src/proxy/decision-log.ts; the region worker writes it: src/region/respond.ts). */
export const LOG_BYTES_DECISION_LINE = 1_000;
/** ASSUMPTION: bytes of a routed request's invocation event, per worker invoked. */
export const LOG_BYTES_REQUEST_INVOCATION = 1_000;
/** ASSUMPTION: bytes of a node report's invocation event, per worker invoked. */
export const LOG_BYTES_REPORT_INVOCATION = 800;
/** ASSUMPTION: bytes of one node's row in the object's SQLite (id, URL, models, capacity, last_seen, boot id, secret hash). */
export const NODE_ROW_BYTES = 300;

// ---------------------------------------------------------------------------------------------
// Inputs: the protocols compared and the deployment (part B)
// ---------------------------------------------------------------------------------------------

/** How the workers and the objects talk: the protocol built, the one before it, or a change not made. */
export interface Protocol {
  name: string;
  /** Billed Durable Object requests per routed request. */
  billedCallsPerRequest: number;
  /** Calls per routed request the object's request rate counts (for the documented per-object limit). */
  countedCallsPerRequest: number;
  /**
   * Where node reports go in a sharded region. `exchange` (built): the region's exchange ingests
   * every report (regionIngestStub, src/config/load.ts) and hands the accepted ones to the shards in
   * its answers to their exchanges (a versioned node feed: durable-objects/region.ts). `mirrored`
   * (before issue 22): every report to shard 0, and each node's report on to the other shards about
   * every 5 s (MIRROR_FRACTION). Unsharded, the region's one object takes every report either way.
   */
  reports: "mirrored" | "exchange";
  /**
   * Whether every shard rewrites a node's `last_seen` row as it applies the node's reports (before
   * issue 22, each mirror; built until shards wrote only on a change, the feed's reports), or only
   * when a report registers or changes the node (built: `applyReport(..., seenIsDurable = false)`,
   * the exchange keeping `last_seen`).
   */
  shardsRewriteLastSeen: boolean;
  /** A fixed exchange interval (before issue 22: SHARD_LOAD_SYNC_MS); without one, the built exchangeIntervalMs of the shards and the region's reports. */
  fixedSyncMs?: number;
  /** Workers invoked per request and per report, each logging its invocation: 1 before issue 22, 2 built (WORKERS_PER_REQUEST). */
  workers: number;
}

/** Before issue 22: three billed calls a streamed request, reports into shard 0 mirrored to the others, a 20 ms exchange. */
export const BEFORE: Protocol = {
  name: "before issue 22",
  billedCallsPerRequest: DO_CALLS_PER_REQUEST,
  countedCallsPerRequest: DO_CALLS_PER_REQUEST,
  reports: "mirrored",
  shardsRewriteLastSeen: true,
  fixedSyncMs: SHARD_LOAD_SYNC_MS,
  workers: 1,
};
/**
 * Built (issue 22): `route` returns a RouteSession (an RpcTarget) whose `firstByte` and `complete`
 * are calls in the same RPC session, billed once (the pricing page); the exchange ingests every
 * report and keeps `last_seen`, the shards write a node's row only when it changes; the exchange
 * interval grows with the shards and the region's reports. Counted calls: all of them if the
 * session's follow-up calls count against the object's request rate (not documented), else 1; the
 * headline uses 1 (BUILT), B3 shows both.
 */
export const BUILT_COUNTED: Protocol = {
  name: `built, session (${DO_CALLS_PER_REQUEST} counted)`,
  billedCallsPerRequest: 1,
  countedCallsPerRequest: DO_CALLS_PER_REQUEST,
  reports: "exchange",
  shardsRewriteLastSeen: false,
  workers: WORKERS_PER_REQUEST,
};
export const BUILT: Protocol = {
  name: "built, session (1 counted)",
  billedCallsPerRequest: 1,
  countedCallsPerRequest: 1,
  reports: "exchange",
  shardsRewriteLastSeen: false,
  workers: WORKERS_PER_REQUEST,
};
/** The built protocol as it was until shards wrote a node's row only on a change (commit 82c00f8): every shard rewrote each node's `last_seen` from the feed. */
export const SHARDS_REWRITE_LAST_SEEN: Protocol = {
  ...BUILT,
  name: "built, every shard rewriting last_seen",
  shardsRewriteLastSeen: true,
};

export interface Deployment {
  rps: number;
  regions: number;
  nodes: number;
  shardsPerRegion: number;
  workerCpuMs: number;
  /** Share of requests logged (decision_log_sample_rate and observability head_sampling_rate together). */
  logSampleRate: number;
  /** Share of requests written to Analytics Engine (as built: every one). */
  analyticsSampleRate: number;
}

export const BASE_DEPLOYMENT: Deployment = {
  rps: TOTAL_RPS,
  regions: REGIONS,
  nodes: NODES,
  shardsPerRegion: 1,
  workerCpuMs: WORKER_CPU_MS,
  logSampleRate: 1,
  analyticsSampleRate: 1,
};
