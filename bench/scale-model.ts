/**
 * The production path and internet scale, on paper: `node bench/scale-model.ts` (npm run bench:scale)
 * prints docs/SCALING.md, the whole document (figures and the prose around them), as markdown, to
 * stdout. Regenerate it with `npm run --silent bench:scale > docs/SCALING.md` (without --silent npm
 * prints its own banner first), then `npx prettier --write docs/SCALING.md` (it aligns the tables).
 *
 * Why a model and not a measurement: the two questions are about places this repository cannot
 * run in (Cloudflare's network between a client's edge, a region's worker and Durable Objects and
 * its GPUs) and a load it cannot generate (100,000 requests/s). So this file computes them from
 * three kinds of input, each a named constant below with its source beside it:
 *
 * - **measured** here: the CPU of hashing and routing in workerd (bench/workerd/RESULTS.md), the
 *   workers' CPU per request, the whole path in one workerd (read from bench/wan/results.json when
 *   this runs: an upper bound, with the object and local stand-ins), the
 *   index's memory bound (src/core/prefix-index.ts, bench/ROUTE_COST.md), the busiest shard's share
 *   and the cost of sharing load between shards (bench/SHARDS.md), the protocol itself (how many
 *   calls a request and a node report make to the region's objects, and what they write:
 *   src/region/dispatch.ts, src/region/app.ts, src/edge/forward.ts, src/edge/api/nodes.ts,
 *   durable-objects/region.ts, the agent);
 * - **published** by Cloudflare: prices and limits, with the page each comes from;
 * - **assumed**, marked `ASSUMPTION`, where neither exists (e.g. the share of requests that stream,
 *   bytes per log line); the doc lists them, and the tables show how much they matter.
 *
 * The protocol modelled is the one built (issue 22): an edge worker (src/edge/) forwards each
 * request once over a service binding to its region's worker, placed by the region's GPUs
 * (src/region/); the region object's `route` returns a RouteSession on which the first byte and the
 * completion are calls in the same RPC session (one billed object request); a sharded region's
 * exchange ingests every node report and hands them to the shards, which write a node's row only
 * when it changes (the exchange keeps `last_seen`); the exchange interval grows with the shards and
 * the region's node reports, keeping the exchange object within its budget (exchangeIntervalMs).
 * The protocol before it (one worker, three billed calls, reports into shard 0 mirrored to the
 * others) is kept for comparison.
 *
 * Part A: the round trips of each way to place the decision (client, edge, object, origin), the
 * latency each adds over calling the origin directly, its load on the region object and its
 * consistency: option 5 is the one built, the others the alternatives considered. Part B: what
 * 100,000 requests/s over 5 regions and 2,000 nodes costs in Durable Object requests, CPU, memory
 * and money, where the per-object limits bind, and how many shards a region needs, with a sampled
 * Zipf distribution of prompts' first blocks through the production shard function
 * (src/core/shard.ts) showing why that number depends on prefix skew.
 *
 * Everything is a pure function of the constants (tested in bench/test/scale-model.test.ts);
 * the simulation is seeded, so the output is the same on every run.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { DEFAULT_FLEET } from "./fleet.ts";
import { ROUND_TRIP_MS_PER_KM, distanceKm } from "../src/core/region-select.ts";
import { MAX_SHARDS, shardOf } from "../src/core/shard.ts";
import { DEFAULT_MAX_INDEX_ENTRIES, indexMemoryBound } from "../src/core/prefix-index.ts";
import { DEFAULT_REGION_SETTINGS } from "../src/core/region/settings.ts";
import { blockWeight } from "../src/core/block-layout.ts";
import { seededRandom, zipfSampler } from "../src/core/random.ts";
import { DIGEST_TTL_MS } from "../src/core/warm-region.ts";

/** The repository's root, for the files the model reads and names. */
const ROOT = fileURLToPath(new URL("..", import.meta.url));

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

/** Round trip over a fibre route of `km` great-circle km (src/core/region-select.ts: 0.015 ms/km, light in fibre on routes 1.5x the great circle). */
export function rttMs(km: number): number {
  return km * ROUND_TRIP_MS_PER_KM;
}

// ---------------------------------------------------------------------------------------------
// Part A: the path of one request, per option
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

/** One round trip of a path: between which points, how far, and whether it crosses from the client's side to the GPUs' side. */
export interface Leg {
  from: string;
  to: string;
  km: number;
  longHaul: boolean;
}

/**
 * Distances in a plane: client and edge at the origin, the GPUs `L` km away on the x axis, the
 * region object beside the GPUs at OBJECT_TO_GPU_KM (off the path), a placed worker at the GPUs'
 * site (PLACED_WORKER_TO_GPU_KM from them). A leg is long-haul when it joins the client's side
 * (client, edge) to the GPUs' side (object, origin, placed worker).
 */
export function distances(p: Placement): { clientGpu: number; edgeObject: number; objectGpu: number; placedGpu: number } {
  const clientGpu = distanceKm(p.client.lat, p.client.lon, p.gpus.lat, p.gpus.lon);
  return {
    clientGpu,
    edgeObject: Math.hypot(clientGpu, OBJECT_TO_GPU_KM),
    objectGpu: OBJECT_TO_GPU_KM,
    placedGpu: PLACED_WORKER_TO_GPU_KM,
  };
}

/** The round trips before the client's first byte (network only; processing is part B's). */
export function firstByteLegs(option: OptionId, p: Placement): Leg[] {
  const d = distances(p);
  const access: Leg = { from: "client", to: "edge", km: ACCESS_KM, longHaul: false };
  switch (option) {
    case "direct":
      return [{ from: "client", to: "origin", km: d.clientGpu, longHaul: true }];
    case "single":
    case "preconnect":
      return [
        access,
        { from: "edge", to: "object", km: d.edgeObject, longHaul: true },
        { from: "edge", to: "origin", km: d.clientGpu, longHaul: true },
      ];
    case "relay":
      return [
        access,
        { from: "edge", to: "object", km: d.edgeObject, longHaul: true },
        { from: "object", to: "origin", km: d.objectGpu, longHaul: false },
      ];
    case "snapshot":
      return [access, { from: "edge", to: "origin", km: d.clientGpu, longHaul: true }];
    case "smart":
    case "split":
      return [
        access,
        { from: "edge", to: "placed worker", km: d.clientGpu, longHaul: true },
        { from: "placed worker", to: "object", km: d.objectGpu, longHaul: false },
        { from: "placed worker", to: "origin", km: d.placedGpu, longHaul: false },
      ];
  }
}

/** Smart Placement for a request to a region other than the one it placed the (single) worker by: that region is OTHER_REGION_KM from this one. */
export function smartOtherRegionLegs(p: Placement): Leg[] {
  const d = distances(p);
  return [
    { from: "client", to: "edge", km: ACCESS_KM, longHaul: false },
    { from: "edge", to: "placed worker", km: Math.hypot(d.clientGpu, OTHER_REGION_KM), longHaul: true },
    { from: "placed worker", to: "object", km: OTHER_REGION_KM + OBJECT_TO_GPU_KM, longHaul: true },
    { from: "placed worker", to: "origin", km: OTHER_REGION_KM, longHaul: true },
  ];
}

/** Network time of a path: the sum of its round trips. */
export function pathMs(legs: readonly Leg[]): number {
  return legs.reduce((s, l) => s + rttMs(l.km), 0);
}

/** Long-haul round trips on a path. */
export function longHauls(legs: readonly Leg[]): number {
  return legs.filter((l) => l.longHaul).length;
}

/** What a retry on another node (before the first byte) adds: a new decision where the decider is, and a new origin call. */
export function retryLegs(option: OptionId, p: Placement): Leg[] {
  const d = distances(p);
  switch (option) {
    case "direct":
      return [{ from: "client", to: "origin", km: d.clientGpu, longHaul: true }];
    case "single":
    case "preconnect":
      return [
        { from: "edge", to: "object", km: d.edgeObject, longHaul: true },
        { from: "edge", to: "origin", km: d.clientGpu, longHaul: true },
      ];
    case "relay":
      return [{ from: "object", to: "origin", km: d.objectGpu, longHaul: false }];
    case "snapshot":
      return [{ from: "edge", to: "origin", km: d.clientGpu, longHaul: true }];
    case "smart":
    case "split":
      return [
        { from: "placed worker", to: "object", km: d.objectGpu, longHaul: false },
        { from: "placed worker", to: "origin", km: d.placedGpu, longHaul: false },
      ];
  }
}

/**
 * What a cold connection to the origin adds before the first byte (HANDSHAKE_ROUND_TRIPS on the
 * hop that calls the origin). With (1b) the handshake starts with the route RPC, so only what
 * outlasts the RPC is added (and only if the worker guessed the node the object then chose).
 */
export function coldConnectionMs(option: OptionId, p: Placement): number {
  const d = distances(p);
  const handshake = (km: number) => HANDSHAKE_ROUND_TRIPS * rttMs(km);
  switch (option) {
    case "direct":
    case "single":
    case "snapshot":
      return handshake(d.clientGpu);
    case "preconnect":
      return Math.max(0, handshake(d.clientGpu) - rttMs(d.edgeObject));
    case "relay":
      return handshake(d.objectGpu);
    case "smart":
    case "split":
      return handshake(d.placedGpu);
  }
}

/**
 * Calls to the region's object per request: `route`, `firstByte` (a streamed or stored answer's
 * only) and `complete` (src/region/dispatch.ts), on average DO_CALLS_PER_REQUEST, for every option
 * whose worker asks the object; one when the object makes the origin call itself (the bookkeeping
 * is then internal) or when a snapshot decider reports each dispatch back asynchronously (fewer if
 * an isolate batches its reports). Billed, with the RPC session built: one (billedObjectRequests).
 */
export function objectCallsPerRequest(option: OptionId): number {
  switch (option) {
    case "direct":
      return 0;
    case "relay":
    case "snapshot":
      return 1;
    default:
      return DO_CALLS_PER_REQUEST;
  }
}

/** Billed object requests per request: an option whose worker asks the object makes its calls in one RPC session (as built: RouteSession). */
export function billedObjectRequests(option: OptionId): number {
  return option === "direct" ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// Inputs: the deployment (part B)
// ---------------------------------------------------------------------------------------------

/** The deployment asked about (issue 13). */
export const TOTAL_RPS = 100_000;
export const REGIONS = 5;
export const NODES = 2_000;
/**
 * Every agent reports once a second (README, Node API; bench/fleet.ts DEFAULT_FLEET.reportIntervalMs;
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
/**
 * The interval between a shard's exchanges, given the region's shards and its node reports a second
 * (as the exchange counted them, durable-objects/region.ts `reportsPerSecond`): 20 ms, or longer so
 * that the shards' exchanges and the reports stay within EXCHANGE_OBJECT_BUDGET (at 400 reports a
 * second: 20 ms up to 10 shards, 62 ms at 31). Restated from durable-objects/region.ts
 * `exchangeIntervalMs`, which Node cannot import (it imports `cloudflare:workers`);
 * bench/test/scale-model.test.ts imports the real one with a stub of that module and checks that
 * the two agree for every shard count up to MAX_SHARDS at several report rates.
 */
export function exchangeIntervalMs(shards: number, reportsPerSecond: number): number {
  const room = Math.max(MIN_EXCHANGES_PER_SECOND, EXCHANGE_OBJECT_BUDGET - reportsPerSecond);
  return Math.max(SHARD_LOAD_SYNC_MS, (shards * 1000) / room);
}
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
export const PAIR_WORK_US = 34.5;
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
/** ... and its prompt's hashes joined into one string (`Ticket.chain`, src/core/region/router.ts): the slope between those rows. */
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
/** Bytes Workers Logs ingests per logged request: the decision line and each worker's invocation event (`workers`: 1 before issue 22). */
export function logBytesPerRequest(workers = WORKERS_PER_REQUEST): number {
  return LOG_BYTES_DECISION_LINE + workers * LOG_BYTES_REQUEST_INVOCATION;
}
/** Bytes per logged node report: each worker's invocation event. */
export function logBytesPerReport(workers = WORKERS_PER_REQUEST): number {
  return workers * LOG_BYTES_REPORT_INVOCATION;
}
/** ASSUMPTION: bytes of one node's row in the object's SQLite (id, URL, models, capacity, last_seen, boot id, secret hash). */
export const NODE_ROW_BYTES = 300;

// ---------------------------------------------------------------------------------------------
// Part B: load, capacity, memory, money
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

/**
 * Reports between a node's `last_seen` writes in the object that ingests its reports: the first
 * report more than a third of the silence timeout after the last write. The agent's reports are a
 * little more than REPORT_INTERVAL_S apart (the agent sleeps after each answer: AGENT_SOURCE), so
 * the 5th report (5 s and a little) is past the 5 s threshold; at exactly 1 s it would be the 6th.
 */
export function lastSeenWriteReports(): number {
  const thresholdS = (DEFAULT_REGION_SETTINGS.nodeSilenceMs * LAST_SEEN_WRITE_FRACTION) / 1000;
  return Math.ceil(thresholdS / REPORT_INTERVAL_S - 1e-9);
}

/** Seconds between a node's `last_seen` writes in the object that ingests its reports. */
export function lastSeenWriteIntervalS(): number {
  return lastSeenWriteReports() * REPORT_INTERVAL_S;
}

/**
 * Before issue 22: seconds between two mirrors of a node's report to the other shards: the first
 * report at least a third of the silence timeout after the last mirror (MIRROR_FRACTION).
 */
export function mirrorIntervalS(): number {
  const thresholdS = (DEFAULT_REGION_SETTINGS.nodeSilenceMs * MIRROR_FRACTION) / 1000;
  return Math.ceil(thresholdS / REPORT_INTERVAL_S - 1e-9) * REPORT_INTERVAL_S;
}

/**
 * Before issue 22: seconds between a node's `last_seen` writes in a shard that only got mirrors:
 * `mirrorReport` persisted like `report` (`applyReport`), so a mirror wrote once more than a third
 * of the silence timeout had passed since the last write. Mirrors came every 5 s and a little
 * (see lastSeenWriteReports), so every mirror wrote; at exactly 1 s, every other one.
 */
export function mirroredWriteIntervalS(): number {
  const thresholdS = (DEFAULT_REGION_SETTINGS.nodeSilenceMs * LAST_SEEN_WRITE_FRACTION) / 1000;
  const m = mirrorIntervalS();
  return Math.ceil(thresholdS / m - 1e-9) * m;
}

/** The exchange interval a protocol runs at with `shards` shards and `reportsPerSecond` node reports into the region: the fixed one before issue 22, else the built exchangeIntervalMs. */
export function syncMsOf(p: Protocol, shards: number, reportsPerSecond: number): number {
  return p.fixedSyncMs ?? exchangeIntervalMs(shards, reportsPerSecond);
}

/** Requests per second that reach each kind of object, region-wide and per object. */
export interface ObjectLoad {
  /** Billed Durable Object requests per second, whole deployment. */
  billedDoRps: number;
  /**
   * Incoming requests per second at a shard carrying `share` of its region's requests (counted
   * calls), if it is the shard that ingests reports (unsharded: the region's object; before issue
   * 22: shard 0): the busiest shard may be it.
   */
  shardRps: (share: number) => number;
  /** The same at any other shard: mirrored reports before issue 22, none as built (the exchange's feed rides on the shard's own calls). */
  otherShardRps: (share: number) => number;
  /** Incoming requests per second at the region's exchange object (0 unsharded): the shards' exchanges, and as built the region's reports. */
  exchangeRps: number;
  /** The interval between a shard's exchanges, ms. */
  syncMs: number;
  /** Objects in the deployment (shards and exchanges). */
  objects: number;
  /** SQLite rows written per second, whole deployment. */
  rowsWrittenPerS: number;
  /** Objects per region holding the node table. */
  nodeTables: number;
}

export function objectLoad(d: Deployment, p: Protocol): ObjectLoad {
  const n = d.shardsPerRegion;
  const regionRps = d.rps / d.regions;
  const reportsPerS = d.nodes / REPORT_INTERVAL_S;
  const regionReports = reportsPerS / d.regions;
  const sharded = n > 1;
  const mirrored = sharded && p.reports === "mirrored";
  const syncMs = syncMsOf(p, n, regionReports);
  const exchangesPerS = sharded ? (n * 1000) / syncMs : 0;
  const objects = d.regions * (n + (sharded ? 1 : 0));
  // Every report is one call (to shard 0, the exchange, or the region's one object); mirrors add one per other shard.
  const mirrorsPerS = mirrored ? (d.nodes / mirrorIntervalS()) * (n - 1) : 0;
  const alarms = objects * ALARMS_PER_OBJECT_PER_S;
  const billedDoRps = d.rps * p.billedCallsPerRequest + reportsPerS + mirrorsPerS + exchangesPerS * d.regions + alarms;
  // Unsharded, or mirrored: a shard (the only one, or shard 0) takes every report; built, the exchange does.
  const shardIngests = !sharded || mirrored;
  const shardRps = (share: number) =>
    regionRps * share * p.countedCallsPerRequest + (shardIngests ? regionReports : 0) + ALARMS_PER_OBJECT_PER_S;
  const otherShardRps = (share: number) =>
    regionRps * share * p.countedCallsPerRequest +
    (!sharded ? regionReports : mirrored ? d.nodes / d.regions / mirrorIntervalS() : 0) +
    ALARMS_PER_OBJECT_PER_S;
  const exchangeRps = sharded ? exchangesPerS + (p.reports === "exchange" ? regionReports : 0) : 0;
  // Node tables: the ingest's, and in a sharded region every shard's (as built, the exchange's too).
  const nodeTables = !sharded ? 1 : mirrored ? n : n + 1;
  // last_seen rows: the ingest rewrites a node's every 5 s; so did each shard that applied its reports (mirrors before issue 22);
  // as built a shard writes a node's row only when a report registers or changes it (rare, not modelled).
  const ingestRows = d.nodes / lastSeenWriteIntervalS();
  const shardRows = !sharded
    ? 0
    : mirrored
      ? (d.nodes * (n - 1)) / mirroredWriteIntervalS()
      : p.shardsRewriteLastSeen
        ? (d.nodes * n) / lastSeenWriteIntervalS()
        : 0;
  const rowsWrittenPerS = ingestRows + shardRows + alarms;
  return { billedDoRps, shardRps, otherShardRps, exchangeRps, syncMs, objects, rowsWrittenPerS, nodeTables };
}

/** One line of the monthly bill. */
export interface CostLine {
  item: string;
  quantity: number;
  unit: string;
  usd: number;
}

const over = (used: number, included: number) => Math.max(0, used - included);

/** The monthly bill of a deployment under a protocol, at Cloudflare's published prices. */
export function monthlyCost(d: Deployment, p: Protocol, prices: Prices = PRICES): CostLine[] {
  const load = objectLoad(d, p);
  const reportsPerS = d.nodes / REPORT_INTERVAL_S;
  // Billed: the edge's invocations. The region worker's, over a service binding, are not billed as requests; their CPU is (workerCpuMs covers both).
  const workerRequests = (d.rps + reportsPerS) * MONTH_S;
  const cpuMs = (d.rps * d.workerCpuMs + reportsPerS * REPORT_CPU_MS) * MONTH_S;
  const doRequests = load.billedDoRps * MONTH_S;
  // ASSUMPTION: an object serving hundreds of requests a second never hibernates, so it is billed for the whole month.
  const gbSeconds = load.objects * prices.doBilledGb * MONTH_S;
  const rowsWritten = load.rowsWrittenPerS * MONTH_S;
  const storageGbMonth = (d.regions * load.nodeTables * (d.nodes / d.regions) * NODE_ROW_BYTES) / 1e9;
  const points = d.rps * d.analyticsSampleRate * MONTH_S;
  const logGb = ((d.rps * logBytesPerRequest(p.workers) + reportsPerS * logBytesPerReport(p.workers)) * d.logSampleRate * MONTH_S) / 1e9;
  // Stored: each day's maximum queryable GB (the retention window), averaged over 30 days.
  const logGbMonth = (logGb / 30) * prices.logRetentionDays;
  const m = 1e6;
  return [
    { item: "Workers subscription", quantity: 1, unit: "month", usd: prices.subscription },
    {
      item: "Workers requests (routed + node reports)",
      quantity: workerRequests,
      unit: "requests",
      usd: (over(workerRequests, prices.workerRequestsIncluded) / m) * prices.workerRequestPerMillion,
    },
    {
      item: "Workers CPU",
      quantity: cpuMs,
      unit: "CPU ms",
      usd: (over(cpuMs, prices.workerCpuMsIncluded) / m) * prices.workerCpuPerMillionMs,
    },
    {
      item: "Durable Object requests",
      quantity: doRequests,
      unit: "requests",
      usd: (over(doRequests, prices.doRequestsIncluded) / m) * prices.doRequestPerMillion,
    },
    {
      item: "Durable Object duration",
      quantity: gbSeconds,
      unit: "GB-s",
      usd: (over(gbSeconds, prices.doGbSecondsIncluded) / m) * prices.doPerMillionGbSeconds,
    },
    {
      item: "SQLite rows written",
      quantity: rowsWritten,
      unit: "rows",
      usd: (over(rowsWritten, prices.rowsWrittenIncluded) / m) * prices.rowsWrittenPerMillion,
    },
    // Per request the object reads no storage (durable-objects/region.ts: route and complete touch none); reads happen at construction only.
    { item: "SQLite rows read", quantity: 0, unit: "rows", usd: 0 },
    {
      item: "SQLite storage",
      quantity: storageGbMonth,
      unit: "GB-month",
      usd: over(storageGbMonth, prices.storageGbMonthIncluded) * prices.storagePerGbMonth,
    },
    {
      item: "Analytics Engine data points",
      quantity: points,
      unit: "points",
      usd: (over(points, prices.analyticsPointsIncluded) / m) * prices.analyticsPerMillion,
    },
    { item: "Workers Logs ingestion", quantity: logGb, unit: "GB", usd: over(logGb, prices.logIngestGbIncluded) * prices.logIngestPerGb },
    {
      item: "Workers Logs storage",
      quantity: logGbMonth,
      unit: "GB-month",
      usd: over(logGbMonth, prices.logStorageGbMonthIncluded) * prices.logStoragePerGbMonth,
    },
  ];
}

export function totalUsd(lines: readonly CostLine[]): number {
  return lines.reduce((s, l) => s + l.usd, 0);
}

/** CPU of a route on `nodes` nodes: the workerd medians of ROUTE_US_BY_NODES, linear between and beyond the measured points (scoring is per node). */
export function routeUs(nodes: number): number {
  const pts = ROUTE_US_BY_NODES;
  let i = 0;
  while (i < pts.length - 2 && nodes > pts[i + 1]![0]) i++;
  const [n0, u0] = pts[i]!;
  const [n1, u1] = pts[i + 1]!;
  return u0 + ((nodes - n0) * (u1 - u0)) / (n1 - n0);
}

/** The object's CPU per routed request: the route, the rest of the pair's work, and one RPC's cost per call (upper bound: the floor counts both sides). */
export function objectUsPerRequest(nodes: number): number {
  const rest = PAIR_WORK_US - routeUs(8);
  return routeUs(nodes) + rest + DO_CALLS_PER_REQUEST * (RPC_FLOOR_PAIR_US / 2);
}

/** Routed requests per second one object's thread sustains at TARGET_UTILISATION (measured CPU, no documented limit). */
export function cpuBoundRps(nodes: number): number {
  return (TARGET_UTILISATION * 1e6) / objectUsPerRequest(nodes);
}

/**
 * The fewest shards (1..MAX_SHARDS) whose busiest shard stays within `capacity` incoming
 * requests/s and (with `exchange`) whose exchange object does too, or undefined. `busiest(n)` is
 * the busiest shard's share of its region's requests with n shards; it may be the shard that
 * ingests the reports (unsharded, or shard 0 before issue 22), so that shard's reports are added to
 * it. With `cpu`, capacity is in routed requests (the measured-CPU view), else in incoming calls
 * (the documented limit). The exchange interval is the protocol's own (syncMsOf), not fitted to
 * `capacity`: as built it keeps the exchange object within EXCHANGE_OBJECT_BUDGET, a constant of
 * the code.
 */
export function shardsNeeded(
  d: Deployment,
  p: Protocol,
  capacity: number,
  busiest: (n: number) => number,
  cpu = false,
  exchange = true,
): number | undefined {
  const regionRps = d.rps / d.regions;
  for (let n = 1; n <= MAX_SHARDS; n++) {
    if (cpu) {
      if (regionRps * busiest(n) <= capacity) return n;
      continue;
    }
    const load = objectLoad({ ...d, shardsPerRegion: n }, p);
    if (load.shardRps(busiest(n)) <= capacity && (!exchange || load.exchangeRps <= capacity)) return n;
  }
  return undefined;
}

/** Subrequests of one invocation at most, with the default limits, by worker (worstCaseSubrequests). */
export interface Subrequests {
  /** The edge: one call per region attempt to its region worker (src/edge/forward.ts), and after the answer one digest call per region (src/edge/region-digests.ts). */
  edge: { regionCalls: number; digestCalls: number };
  /**
   * A region worker serving a request (src/region/dispatch.ts): 1 + max_retries nodes; each attempt
   * asks `route` (once more on a retryable error) and a failed attempt sends `complete`; the one that
   * answers sends `firstByte`, `rememberResponse` (a stored response whose id names another shard)
   * and `complete`. Calls on the RouteSession are counted as calls, though they share one session.
   */
  region: { origin: number; object: number };
  /** A region worker answering a digest call: one per shard (src/region/app.ts). */
  digestShards: number;
  /** Everything one client request can cause, if a service binding's callee counted against its caller's budget. */
  together: number;
}

export function worstCaseSubrequests(regions = REGIONS, shards = MAX_SHARDS): Subrequests {
  const nodes = 1 + MAX_RETRIES_DEFAULT;
  const region = { origin: nodes, object: nodes * 2 + (nodes - 1) + 3 };
  const edge = { regionCalls: MAX_REGION_ATTEMPTS_DEFAULT, digestCalls: regions };
  const together = edge.regionCalls * (1 + region.origin + region.object) + edge.digestCalls * (1 + shards);
  return { edge, region, digestShards: shards, together };
}

/**
 * Before issue 22, one worker did it all (`git show bb04529^:src/proxy/dispatch.ts`): every region
 * attempt's nodes and object calls, and every shard of each region with a stale digest.
 */
export function worstCaseSubrequestsBefore(regions = REGIONS, shards = MAX_SHARDS): { origin: number; object: number; digests: number } {
  const attempts = MAX_REGION_ATTEMPTS_DEFAULT * (1 + MAX_RETRIES_DEFAULT);
  return { origin: attempts, object: attempts * 2 + (attempts - 1) + 3, digests: regions * shards };
}

/** Blocks of a prompt of `chars` characters (src/core/block-layout.ts: 512-character blocks, doubling after 512). */
export function blocksFor(chars: number): number {
  const base = Math.ceil(chars / BLOCK_CHARS);
  let blocks = 0;
  for (let covered = 0; covered < base; blocks++) covered += blockWeight(blocks);
  return blocks;
}

/** Answers streaming at once in a region (Little's law: arrival rate x stream duration). */
export function streamsInFlight(regionRps: number): number {
  return regionRps * (OUTPUT_TOKENS_MEAN / DECODE_TOKENS_PER_S);
}

/** One shard object's memory: the index's hard bound, the tickets it holds, against 128 MB. */
export function shardMemoryBytes(
  regionRps: number,
  share: number,
  promptChars = PROMPT_CHARS,
): { index: number; tickets: number; total: number } {
  const index = indexMemoryBound(DEFAULT_MAX_INDEX_ENTRIES);
  const tickets = streamsInFlight(regionRps) * share * (TICKET_FIXED_BYTES + TICKET_BYTES_PER_BLOCK * blocksFor(promptChars));
  return { index, tickets, total: index + tickets };
}

// ---------------------------------------------------------------------------------------------
// Simulation: the busiest shard under a Zipf distribution of first blocks
// ---------------------------------------------------------------------------------------------

export interface SkewResult {
  /** Share of requests of the most popular first block. */
  topShare: number;
  /** Busiest shard's share in the busiest one-second window, by shard count (index n - 1). */
  busiest: number[];
}

/**
 * Samples `seconds` one-second windows of `rps` requests whose first blocks follow Zipf(s) over
 * `keys` distinct blocks (random 64-bit hex names, as src/core/hash.ts produces), assigns each to
 * its shard with the production `shardOf`, and returns the busiest shard's share in the busiest
 * window for 1..maxShards shards: the per-second peak a per-object rate limit sees.
 */
export function simulateSkew(keys: number, s: number, rps: number, seconds: number, maxShards = MAX_SHARDS, seed = 13): SkewResult {
  const rnd = seededRandom(seed);
  const hex = () =>
    Math.floor(rnd() * 2 ** 32)
      .toString(16)
      .padStart(8, "0");
  const names = Array.from({ length: keys }, () => hex() + hex());
  const draw = zipfSampler(keys, s, rnd);
  const samples = Array.from({ length: seconds }, () => Int32Array.from({ length: rps }, () => draw()));
  let norm = 0;
  for (let k = 1; k <= keys; k++) norm += 1 / Math.pow(k, s);
  const busiest: number[] = [];
  for (let n = 1; n <= maxShards; n++) {
    const shardOfKey = Int32Array.from(names, (name) => shardOf(name, n));
    let worst = 0;
    for (const window of samples) {
      const counts = new Int32Array(n);
      for (const key of window) counts[shardOfKey[key]!]!++;
      worst = Math.max(worst, Math.max(...counts) / rps);
    }
    busiest.push(worst);
  }
  return { topShare: 1 / norm, busiest };
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

const fmt = (x: number, digits = 0) => x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const ms = (x: number) => fmt(x, x < 10 ? 1 : 0);
const usd = (x: number, digits = 0) => `$${fmt(x, digits)}`;
const big = (x: number) => (x >= 1e9 ? `${fmt(x / 1e9, 1)} B` : x >= 1e6 ? `${fmt(x / 1e6, 1)} M` : fmt(x, x < 10 ? 2 : 0));
const mib = (bytes: number) => `${fmt(bytes / 2 ** 20, 1)} MiB`;
const pct = (x: number) => `${fmt(100 * x, 1)}%`;
const signed = (x: number) => `${x < 0 ? "-" : "+"}${ms(Math.abs(x))}`;
const range = (a: number, b: number, f: (x: number) => string = (x) => fmt(x)) => (f(a) === f(b) ? f(a) : `${f(a)}-${f(b)}`);

function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>, right: readonly boolean[] = []): string {
  const align = header.map((_, i) => ((right[i] ?? i > 0) ? "---:" : "---"));
  return [header, align, ...rows].map((r) => `| ${r.join(" | ")} |`).join("\n");
}

/** Words that would start a list, a heading, a quote or a table row at the start of a line: never wrapped onto one. */
const BLOCK_START = /^([-+*#>|]|\d+[.)])/;

/** A paragraph (or list item: `first` is its marker, `rest` its indent) wrapped at 100 columns, as the doc's prose is. */
export function wrap(text: string, first = "", rest = "", width = 100): string {
  const lines: string[] = [];
  let words: string[] = [];
  let prefix = first;
  const length = () => prefix.length + words.join(" ").length;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (words.length > 0 && length() + 1 + word.length > width) {
      if (!BLOCK_START.test(word)) {
        lines.push(prefix + words.join(" "));
        words = [word];
        prefix = rest;
        continue;
      }
      // Carry the previous word down with it, so the line does not start with a marker.
      const previous = words[words.length - 1]!;
      if (words.length > 1 && !BLOCK_START.test(previous)) {
        lines.push(prefix + words.slice(0, -1).join(" "));
        words = [previous, word];
        prefix = rest;
        continue;
      }
    }
    words.push(word);
  }
  lines.push(prefix + words.join(" "));
  return lines.join("\n");
}

/** A count in the price table: 10 M, 25 B. */
const units = (x: number) => (x >= 1e9 ? `${fmt(x / 1e9)} B` : x >= 1e6 ? `${fmt(x / 1e6)} M` : fmt(x));

/** Object calls per request, as A3 shows them. */
function callsLabel(option: OptionId): string {
  const calls = objectCallsPerRequest(option);
  if (option === "relay") return String(calls);
  if (option === "snapshot") return `${calls} (asynchronous)`;
  const before = option === "single" ? `; ${DO_CALLS_STREAMED} before issue 22` : "";
  return `${DO_CALLS_STREAMED} streamed, ${DO_CALLS_UNSTREAMED} not; ${billedObjectRequests(option)} billed (one RPC session${before})`;
}

/** The workers' measured CPU per request, as the document words it. */
function cpuWords(digits = 2): string {
  return `${fmt(MEASURED_CPU.totalMs, digits)} ms`;
}

/** Where the measured CPU comes from. */
function cpuSource(): string {
  const c = MEASURED_CPU;
  const at = [c.generatedAt ? `generated ${c.generatedAt}` : "", c.commit ? `at commit ${c.commit}` : ""].filter(Boolean).join(" ");
  const what = c.includesHost ? "workerd and its Node host" : `workerd alone, its Node host's ${fmt(c.hostMs ?? 0, 1)} ms not counted`;
  return `${WAN_RESULTS}${at ? ` (${at})` : ""}, \`cpu\` row "${c.path}": the whole path (edge worker, service binding, region worker, Durable Object) in one workerd process, ${what}, CPU from /proc less idle, one request at a time`;
}

/** What the measured CPU counts beyond the workers: why it is an upper bound. */
const CPU_UPPER_BOUND =
  "an upper bound for the workers' CPU: it includes the region object's CPU and local stand-ins that do not exist in production (Miniflare's simulation of the edge rate limiter, the Durable Object in the same process, the log relay to the host)";

/** Everything the summary needs from parts A and B. */
interface Figures {
  designN: number;
  designSync: number;
  /** Monthly bills at the design point: before issue 22, built (default logging), built with logs at 1%, built with the change not made (analytics sampled). */
  beforeBill: number;
  builtBill: number;
  builtLogsBill: number;
  notMadeBill: number;
  floorMonth: number;
  /** Shards needed (uniform, Zipf 0.6) as built, 1 counted; and whether any B3 workload fits if the session's calls count. */
  zeroSixRange: [number | undefined, number | undefined];
  countedFits: boolean;
  beforeFits: boolean;
  hotZipf08: number;
  /** The exchange object's calls a second at the design point, and the busiest shard's. */
  exchangeRps: number;
  busiestRps: number;
  cpuRps: number;
}

function partA(out: string[]): void {
  const transpacific = PLACEMENTS[3]!;
  const transatlantic = PLACEMENTS[2]!;
  const nodesPerRegion = NODES / REGIONS;
  const added = (o: OptionId, p: Placement) => pathMs(firstByteLegs(o, p)) - pathMs(firstByteLegs("direct", p));
  out.push("## A. The production path");
  out.push("");
  out.push(
    wrap(
      `Option 5 is built (issue 22): an edge worker (src/edge/) and one worker per region, placed by the region's GPUs (src/region/; scripts/deploy/generate.ts, placement from \`regions[].placement\`). The other options are the alternatives considered, (1) the single worker it replaced. A path is a list of round trips at ${fmt(ROUND_TRIP_MS_PER_KM, 3)} ms per great-circle km (src/core/region-select.ts). Assumed: the object ${fmt(OBJECT_TO_GPU_KM)} km from the GPUs (a location hint names an area), a placed worker ${fmt(PLACED_WORKER_TO_GPU_KM)} km, the client ${fmt(ACCESS_KM)} km from its edge. Processing is not counted (part B: ${fmt(objectUsPerRequest(nodesPerRegion))} µs of object CPU per request; the workers', ${cpuWords()} measured with short answers, an upper bound: B6).`,
    ),
  );
  out.push("");
  out.push("### A1. Placements");
  out.push("");
  out.push(
    "Client -> GPUs: " +
      PLACEMENTS.map((p) => {
        const d = distances(p).clientGpu;
        return `${p.name}, ${p.client.name} -> ${p.gpus.name}, ${fmt(d)} km (one round trip ${ms(rttMs(d))} ms)`;
      }).join("; ") +
      ".",
  );
  out.push("");
  out.push("### A2. Network time to the first byte, and what it adds over a direct call (ms)");
  out.push("");
  out.push(
    table(
      ["option", "long-haul round trips", ...PLACEMENTS.map((p) => p.name)],
      OPTIONS.map((o) => [
        o.label,
        String(longHauls(firstByteLegs(o.id, transpacific))),
        ...PLACEMENTS.map((p) => {
          const t = pathMs(firstByteLegs(o.id, p));
          return o.id === "direct" ? ms(t) : `${ms(t)} (+${ms(t - pathMs(firstByteLegs("direct", p)))})`;
        }),
      ]),
      [false, true, true, true, true, true],
    ),
  );
  out.push("");
  const other = smartOtherRegionLegs(PLACEMENTS[0]!);
  out.push(
    `Smart Placement places the whole worker once ("closest to the upstream with the most requests"): a same-metro request for a region ${fmt(OTHER_REGION_KM)} km from that placement takes ${ms(pathMs(other))} ms (${longHauls(other)} long-haul round trips) against ${ms(pathMs(firstByteLegs(BUILT_OPTION, PLACEMENTS[0]!)))} ms as built.`,
  );
  out.push("");
  out.push("### A3. Retries, cold connections, load on the object, consistency");
  out.push("");
  const consistency: Record<OptionId, string> = {
    direct: "-",
    single: `one writer per prefix; shards share load every ${SHARD_LOAD_SYNC_MS}-${ms(exchangeIntervalMs(MAX_SHARDS, nodesPerRegion / REPORT_INTERVAL_S))} ms (by shards and node reports)`,
    preconnect: "as (1)",
    relay: "as (1)",
    snapshot: `up to ${fmt(EDGE_COLOS)} deciders per region, each blind to the others' dispatches for the snapshot age`,
    smart: "as (1)",
    split: "as (1)",
  };
  const streams: Record<OptionId, string> = {
    direct: "-",
    single: "no",
    preconnect: "no",
    relay: "every stream, for its whole length",
    snapshot: "no",
    smart: "no",
    split: "no",
  };
  out.push(
    table(
      [
        "option",
        `each retry adds, ${transatlantic.name} / ${transpacific.name} ms`,
        `cold origin connection adds, ${transpacific.name} ms`,
        "object calls per request",
        "streams through the object",
        "consistency",
      ],
      OPTIONS.filter((o) => o.id !== "direct").map((o) => [
        o.label,
        `${ms(pathMs(retryLegs(o.id, transatlantic)))} / ${ms(pathMs(retryLegs(o.id, transpacific)))}`,
        ms(coldConnectionMs(o.id, transpacific)),
        callsLabel(o.id),
        streams[o.id],
        consistency[o.id],
      ]),
      [false, true, true, false, false, false],
    ),
  );
  out.push("");
  const splitGain = PLACEMENTS.map((p) => ({
    p,
    req: pathMs(firstByteLegs("split", p)) - pathMs(firstByteLegs("single", p)),
    retry: pathMs(retryLegs("split", p)) - pathMs(retryLegs("single", p)),
  }));
  out.push(
    `(5) minus (1), per request / per retry (negative: (5) is faster): ${splitGain.map((g) => `${g.p.name} ${signed(g.req)} / ${signed(g.retry)} ms`).join("; ")}.`,
  );
  out.push("");
  const gains = splitGain.filter((g) => g.req < 0);
  const losses = splitGain.filter((g) => g.req >= 0);
  const snap1s = 1000 / 2 + rttMs(distances(transpacific).edgeObject) / 2;
  const indexBytes = indexMemoryBound(DEFAULT_MAX_INDEX_ENTRIES);
  out.push(
    wrap(
      `**One worker (before issue 22).** Exact decisions, but the route RPC is a second long haul and a retry repeats both; same-metro clients pay only the object's distance from the GPUs (+${ms(added("single", PLACEMENTS[0]!))} ms). (1b) helps only a cold connection (${ms(coldConnectionMs("single", transpacific))} -> ${ms(coldConnectionMs("preconnect", transpacific))} ms transpacific), must guess the node before the object answers, and Workers has no connect-only call (it would be a warm-up request to the guessed node).`,
      "1. ",
      "   ",
    ),
  );
  out.push(
    wrap(
      `**The object relays.** One long haul, local retries, but the object proxies every stream (A4): events through one thread, open fetches in 128 MB, and a reset (a deploy after its 5-minute deferral, any eviction) cuts every stream in flight, where a reset of the object as built loses only completion reports (the region worker relays: docs/DEPLOY.md); the region worker's retry, idle-timeout and SSE-error handling move into the object. Per-request subrequest and connection limits (B7) do not bind; the thread and memory do.`,
      "2. ",
      "   ",
    ),
  );
  out.push(
    wrap(
      `**A snapshot at the edge.** Fastest (+${ms(added("snapshot", transpacific))} ms), but every data center decides, blind to the others' dispatches until the next snapshot (A5); bench/SHARDS.md priced stale load for 2-8 deciders at ${fmt(SHARDS_EXCHANGE_TTFT_RATIO[0], 2)}-${fmt(SHARDS_EXCHANGE_TTFT_RATIO[1], 2)}x mean TTFT with a ${SHARD_LOAD_SYNC_MS} ms exchange (an earlier run with reports only: up to ${fmt(SHARDS_REPORTS_ONLY_TTFT_RATIO, 1)}x). A ${SHARD_LOAD_SYNC_MS} ms snapshot is ${fmt((EDGE_COLOS * 1000) / SHARD_LOAD_SYNC_MS)} pulls a second per region, against ${fmt(DO_SOFT_LIMIT_RPS)} per object, and cannot carry the ${mib(indexBytes)} index; a 1 s one is ${ms(snap1s)} ms old on average transpacific; a new prefix is learned only when its report lands.`,
      "3. ",
      "   ",
    ),
  );
  out.push(
    wrap(
      `**Smart Placement** runs the whole worker "closest to the upstream with the most requests" (https://developers.cloudflare.com/workers/configuration/placement/): one region gains, the others pay ${longHauls(other)} long hauls.`,
      "4. ",
      "   ",
    ),
  );
  out.push(
    wrap(
      `**Edge worker + per-region placed worker: built.** (4) per region. The edge (src/edge/: bounds, authentication, hashing, region order) sends each request once over a service binding to its region's worker and fails over to the next region on a refusal or an unreachable region worker (src/edge/forward.ts); the region worker asks the object, calls the node, retries other nodes before the first byte and relays (src/region/dispatch.ts). Each region worker is deployed with targeted placement from its region's \`placement\` (\`region = "aws:us-east-1"\`, \`hostname\` or \`host\`: scripts/deploy/generate.ts; changelog 2026-01-22) and has no public address ("when you enable Smart Placement, each Worker runs in the optimal location"; "Service bindings don't increase costs": https://developers.cloudflare.com/workers/runtime-apis/bindings/service-bindings/). ${losses.map((g) => `${g.p.name[0]!.toUpperCase()}${g.p.name.slice(1).replaceAll(" ", "-")} clients pay ${ms(g.req)} ms more than with (1)`).join("; ")}; others gain ${range(-gains[0]!.req, -gains[gains.length - 1]!.req, ms)} ms per request, ${range(-gains[0]!.retry, -gains[gains.length - 1]!.retry, ms)} ms per retry.`,
      "5. ",
      "   ",
    ),
  );
  out.push("");

  // (2): what relaying asks of the region's objects.
  const regionRps = TOTAL_RPS / REGIONS;
  const events = regionRps * (OUTPUT_TOKENS_MEAN / TOKENS_PER_STREAM_EVENT);
  const inflight = streamsInFlight(regionRps);
  out.push(`### A4. Option (2) at ${fmt(regionRps)} requests/s per region`);
  out.push("");
  out.push(
    `${fmt(OUTPUT_TOKENS_MEAN)} stream events per answer (Mooncake's mean output, one event a token) make ${big(events)} events/s per region; answers stream for ${fmt(OUTPUT_TOKENS_MEAN / DECODE_TOKENS_PER_S, 1)} s (${fmt(DECODE_TOKENS_PER_S)} tokens/s), so ${fmt(inflight)} streams are in flight per region. Per shard, if the object did nothing else:`,
  );
  out.push("");
  out.push(
    table(
      [
        "shards",
        "events/s per shard",
        "CPU budget per event µs",
        "streams per shard",
        "memory per stream (128 MB less the index bound) KB",
        "streams cut by one object reset",
      ],
      [1, 16, 64].map((n) => {
        const perShard = events / n;
        const streamsPer = inflight / n;
        return [
          String(n),
          big(perShard),
          fmt(1e6 / perShard, 2),
          fmt(streamsPer),
          fmt((OBJECT_MEMORY_BYTES - indexBytes) / streamsPer / 1024, 1),
          fmt(streamsPer),
        ];
      }),
    ),
  );
  out.push("");

  // (3): what a snapshot costs and how stale it is.
  out.push("### A5. Option (3): snapshot pulls and age");
  out.push("");
  out.push(
    table(
      ["snapshot period ms", "pulls/s per region (one per colo)", "full index per pull: GB/s per region", "mean age, transpacific ms"],
      [20, 100, 1000].map((t) => {
        const pulls = (EDGE_COLOS * 1000) / t;
        return [fmt(t), fmt(pulls), fmt((pulls * indexBytes) / 1e9, 1), ms(t / 2 + rttMs(distances(transpacific).edgeObject) / 2)];
      }),
    ),
  );
  out.push("");
  out.push(
    `For comparison (bench/SHARDS.md): 2-8 deciders sharing load every ${SHARD_LOAD_SYNC_MS} ms cost ${fmt(SHARDS_EXCHANGE_TTFT_RATIO[0], 2)}-${fmt(SHARDS_EXCHANGE_TTFT_RATIO[1], 2)}x the single object's mean TTFT, hit rate within ${pct(Math.abs(SHARDS_EXCHANGE_HIT_RATE_WORST))}; with reports only (1 s) and no exchange, up to ${fmt(SHARDS_REPORTS_ONLY_TTFT_RATIO, 1)}x in an earlier run (durable-objects/region.ts; bench/SHARDS.md does not measure it).`,
  );
  out.push("");
}

function partB(out: string[]): Figures {
  const regionRps = TOTAL_RPS / REGIONS;
  const nodesPerRegion = NODES / REGIONS;
  const regionReports = nodesPerRegion / REPORT_INTERVAL_S;
  const mirrorsPerShard = nodesPerRegion / mirrorIntervalS();
  // The exchanges a second the exchange object leaves the shards, and the most shards at the shortest interval.
  const room = Math.max(MIN_EXCHANGES_PER_SECOND, EXCHANGE_OBJECT_BUDGET - regionReports);
  const growsAt = Math.floor((SHARD_LOAD_SYNC_MS * room) / 1000);
  const overBudgetNodes = EXCHANGE_REPORTS_OVER_BUDGET * REPORT_INTERVAL_S;
  const overLimitNodes = (DO_SOFT_LIMIT_RPS - MIN_EXCHANGES_PER_SECOND) * REPORT_INTERVAL_S;
  out.push("## B. Internet scale");
  out.push("");
  out.push(
    wrap(
      `Per routed request, as built: an edge Worker invocation (a billed request) that forwards it over a service binding to its region's worker (an invocation that is not a billed request; its CPU is billed: B6), which opens one RPC session with the prompt's shard: \`route\`, then \`firstByte\` and \`complete\` on the RouteSession \`route\` returns (durable-objects/region.ts; src/region/dispatch.ts), ${DO_CALLS_STREAMED} calls if the answer streams, ${DO_CALLS_UNSTREAMED} if it does not (\`complete\` then carries the first byte), modelled as ${STREAMED_SHARE === 1 ? "every request streaming" : `${pct(STREAMED_SHARE)} of requests streaming`} (ASSUMPTION), and one billed object request; the origin fetch (an unbilled subrequest), an Analytics Engine point, a decision line and each worker's invocation in the logs. A stored response whose id names another shard also calls \`rememberResponse\` there (rare, not modelled). Per node report (${fmt(NODES / REPORT_INTERVAL_S)}/s): an edge invocation (src/edge/api/nodes.ts), a region worker invocation and one object request to the region's ingest, its one object or, sharded, its exchange (src/region/app.ts; \`regionIngestStub\`, src/config/load.ts), which rewrites the node's \`last_seen\` row every ${fmt(lastSeenWriteReports())} reports (${fmt(lastSeenWriteIntervalS())} s and a little: the agent sleeps ${fmt(REPORT_INTERVAL_S)} s after each answer, ${AGENT_SOURCE}). The exchange hands the accepted reports to each shard in its answer to the shard's next exchange; a shard applies them to its router and writes a node's row only when the report registers or changes the node (\`applyReport(..., seenIsDurable = false)\`): the exchange keeps \`last_seen\` durably, and a restarted shard takes the whole feed at its first exchange (it keeps its shard number, so it hears the feed before its alarm expires anyone). A report that registers or changes a node also goes to every shard directly (\`mirrorReport\`; rare, not modelled). Shards call the exchange every \`exchangeIntervalMs(shards, reportsPerSecond)\` = max(${SHARD_LOAD_SYNC_MS}, shards x 1000 / max(${MIN_EXCHANGES_PER_SECOND}, ${EXCHANGE_OBJECT_BUDGET} - reportsPerSecond)) ms (durable-objects/region.ts: EXCHANGE_OBJECT_BUDGET, MIN_EXCHANGES_PER_SECOND; reportsPerSecond is the region's node reports as its exchange counted them over its last 10 s and told the shards): at ${fmt(regionReports)} reports a second, ${SHARD_LOAD_SYNC_MS} ms up to ${growsAt} shards, ${ms(exchangeIntervalMs(MAX_SHARDS, regionReports))} ms at ${MAX_SHARDS}. Prices (USD):`,
    ),
  );
  out.push("");
  out.push(
    table(
      ["item", "price", "source"],
      [
        [
          "Workers",
          `${usd(PRICES.subscription)}/month; requests ${units(PRICES.workerRequestsIncluded)} included + ${usd(PRICES.workerRequestPerMillion, 2)}/M; CPU ${units(PRICES.workerCpuMsIncluded)} ms included + ${usd(PRICES.workerCpuPerMillionMs, 2)}/M ms`,
          "https://developers.cloudflare.com/workers/platform/pricing/",
        ],
        [
          "Service bindings",
          `"don't increase costs": the region worker's invocation is no billed request (its CPU is counted with the edge's here)`,
          "https://developers.cloudflare.com/workers/runtime-apis/bindings/service-bindings/",
        ],
        [
          "DO requests",
          `${units(PRICES.doRequestsIncluded)} included + ${usd(PRICES.doRequestPerMillion, 2)}/M; every RPC call is one, calls on a stub an RPC call returned are not`,
          "https://developers.cloudflare.com/durable-objects/platform/pricing/",
        ],
        [
          "DO duration",
          `${fmt(PRICES.doGbSecondsIncluded)} GB-s included + ${usd(PRICES.doPerMillionGbSeconds, 2)}/M GB-s, ${fmt(PRICES.doBilledGb * 1000)} MB per object`,
          "same",
        ],
        [
          "DO SQLite",
          `rows read ${units(PRICES.rowsReadIncluded)} included + ${usd(PRICES.rowsReadPerMillion, 3)}/M; written ${units(PRICES.rowsWrittenIncluded)} + ${usd(PRICES.rowsWrittenPerMillion, 2)}/M (\`setAlarm\` = 1); ${fmt(PRICES.storageGbMonthIncluded)} GB-month + ${usd(PRICES.storagePerGbMonth, 2)}/GB-month`,
          "same",
        ],
        [
          "Analytics Engine",
          `${units(PRICES.analyticsPointsIncluded)} data points included + ${usd(PRICES.analyticsPerMillion, 2)}/M`,
          "https://developers.cloudflare.com/analytics/analytics-engine/pricing/",
        ],
        [
          "Workers Logs (from 2026-12-01)",
          `${fmt(PRICES.logIngestGbIncluded)} GB ingested included + ${usd(PRICES.logIngestPerGb, 2)}/GB; ${fmt(PRICES.logStorageGbMonthIncluded)} GB-month + ${usd(PRICES.logStoragePerGbMonth, 2)}/GB-month; ${PRICES.logRetentionDays} days kept`,
          "https://developers.cloudflare.com/observability/pricing/",
        ],
        [
          "Limits",
          `per object: ${fmt(DO_SOFT_LIMIT_RPS)} requests/s ("soft limit"), 128 MB, 10 GB SQLite; per request: ${fmt(WORKERS_SUBREQUESTS_PER_REQUEST)} subrequests, ${WORKERS_CONNECTIONS_PER_REQUEST} connections`,
          "https://developers.cloudflare.com/durable-objects/platform/limits/, https://developers.cloudflare.com/workers/platform/limits/",
        ],
      ],
      [false, false, false],
    ),
  );
  out.push("");
  out.push("### B1. Per-object load");
  out.push("");
  const objUs = objectUsPerRequest(nodesPerRegion);
  out.push(
    `${fmt(TOTAL_RPS)} requests/s over ${REGIONS} regions: ${fmt(regionRps)} requests/s and ${fmt(nodesPerRegion)} nodes per region, ${fmt(regionReports)} reports/s per region into its ingest. ` +
      `Object CPU per routed request on ${fmt(nodesPerRegion)} nodes: route ${fmt(routeUs(nodesPerRegion), 1)} µs (workerd medians, linear in nodes) + ${fmt(PAIR_WORK_US - routeUs(8), 1)} µs validation and completion + ${fmt(DO_CALLS_PER_REQUEST, DO_CALLS_PER_REQUEST % 1 ? 2 : 0)} x ${fmt(RPC_FLOOR_PAIR_US / 2, 1)} µs RPC = ${fmt(objUs, 0)} µs, so one object's thread routes ${fmt(cpuBoundRps(nodesPerRegion))} requests/s at ${pct(TARGET_UTILISATION)} busy.`,
  );
  out.push("");
  const rows: string[][] = [];
  for (const p of [BEFORE, BUILT]) {
    for (const n of [1, 16, 32, 64]) {
      const d = { ...BASE_DEPLOYMENT, shardsPerRegion: n };
      const load = objectLoad(d, p);
      const first = fmt(load.shardRps(1 / n));
      const others = fmt(load.otherShardRps(1 / n));
      rows.push([
        p.name,
        String(n),
        n === 1 ? first : `${first} / ${others}`,
        n > 1 ? ms(load.syncMs) : "-",
        n > 1 ? fmt(load.exchangeRps) : "-",
        big(load.billedDoRps),
        fmt(load.rowsWrittenPerS),
      ]);
    }
  }
  out.push(
    table(
      [
        "protocol",
        "shards",
        "calls/s into shard 0 / each other shard (even split)",
        "exchange interval ms",
        "exchange object calls/s",
        "billed DO requests/s",
        "SQLite rows written/s",
      ],
      rows,
      [false, true, true, true, true, true, true],
    ),
  );
  out.push("");
  const d1 = objectLoad(BASE_DEPLOYMENT, BEFORE);
  const b1 = objectLoad(BASE_DEPLOYMENT, BUILT);
  const exchangeFull = Math.floor((DO_SOFT_LIMIT_RPS * SHARD_LOAD_SYNC_MS) / 1000);
  out.push(
    wrap(
      `Before issue 22 (first rows; \`git show bb04529^:src/proxy/dispatch.ts\`): one worker made ${DO_CALLS_STREAMED} billed calls a streamed request, one object per region took ${fmt(d1.shardRps(1))} calls a second, every report went to shard 0, which had the worker pass each node's report on to every other shard every ${fmt(mirrorIntervalS())} s (${fmt(mirrorsPerShard)} a second per shard), and the exchange ran every ${SHARD_LOAD_SYNC_MS} ms: over ${fmt(DO_SOFT_LIMIT_RPS)} calls a second beyond ${exchangeFull} shards. Built: one billed request per routed request, and unsharded the region's object takes ${fmt(b1.shardRps(1))} calls a second if the session's calls count as one. Sharded, the shards take no reports: the exchange ingests them (one call each) and hands them on in its answers; it takes the region's ${fmt(regionReports)} reports and ${fmt(1000 / SHARD_LOAD_SYNC_MS)} exchanges a second per shard up to ${growsAt} shards, ${fmt(room)} a second beyond (EXCHANGE_OBJECT_BUDGET, ${fmt(EXCHANGE_OBJECT_BUDGET)}, less the reports): ${fmt(room + regionReports)} a second from ${growsAt} shards on, ${pct(EXCHANGE_OBJECT_BUDGET / DO_SOFT_LIMIT_RPS)} of the documented limit, for any region of up to ${fmt(overBudgetNodes)} nodes (past that, B7). Rows written: only the ingest rewrites a node's \`last_seen\`, every ${fmt(lastSeenWriteIntervalS())} s; a shard writes a node's row only when a report registers or changes it, where before issue 22 every mirror wrote one. Whether a session's calls count against an object's request rate is not documented: "${BUILT_COUNTED.countedCallsPerRequest} counted" assumes so, "1 counted" not; the headline uses "1 counted".`,
    ),
  );
  out.push("");

  // Skew.
  const seconds = 10;
  const scenarios: Array<{ label: string; busiest: (n: number) => number; top: number }> = [];
  for (const [keys, s] of [
    [10_000, 0],
    [10_000, 0.6],
    [10_000, 0.8],
    [10_000, 1.0],
  ] as const) {
    const r = simulateSkew(keys, s, regionRps, seconds);
    scenarios.push({
      label: s === 0 ? `uniform, ${fmt(keys)} first blocks` : `Zipf ${s}, ${fmt(keys)} first blocks`,
      busiest: (n) => r.busiest[n - 1]!,
      top: r.topShare,
    });
  }
  for (const w of SHARDS_MD_BUSIEST) {
    const last = w.byShards[w.byShards.length - 1]!;
    const at = (n: number) => {
      if (n === 1) return 1;
      const known = [...w.byShards].reverse().find(([k]) => k <= n);
      return known ? known[1] : 1;
    };
    scenarios.push({ label: `${w.workload} (bench/SHARDS.md)`, busiest: at, top: last[1] });
  }
  const designN = shardsNeeded(BASE_DEPLOYMENT, BUILT, DO_SOFT_LIMIT_RPS, scenarios[1]!.busiest) ?? MAX_SHARDS;
  out.push(`### B2. The busiest shard under skew (${fmt(regionRps)} requests/s, busiest of ${seconds} one-second windows)`);
  out.push("");
  out.push(
    table(
      ["first blocks", "hottest block", ...[8, 16, 32, 64].map((n) => `busiest of ${n}`), "hottest block requests/s"],
      scenarios.map((sc) => [sc.label, pct(sc.top), ...[8, 16, 32, 64].map((n) => pct(sc.busiest(n))), fmt(sc.top * regionRps)]),
      [false, true, true, true, true, true, true],
    ),
  );
  out.push("");
  out.push(
    wrap(
      `A shard owns prompts by their first block (src/core/shard.ts), so its share never falls below its hottest block's. The sample draws first blocks from Zipf over 10,000 blocks through the production \`shardOf\`; the bench/SHARDS.md rows (2-8 shards measured, the 8-shard share kept beyond) come from a few tenants. Tenant rate limits are split evenly over the shards (\`limitsOf\`, src/region/dispatch.ts): a tenant whose prompts all open alike sits on one of ${designN} shards with 1/${designN} of its limit, so at this scale such limits belong outside the shards.`,
    ),
  );
  out.push("");
  out.push(`### B3. Shards needed per region for ${fmt(regionRps)} requests/s (none: not within ${MAX_SHARDS}, MAX_SHARDS)`);
  out.push("");
  type Scenario = (typeof scenarios)[number];
  const cell = (withExchange: number | undefined, shardsOnly: number | undefined) =>
    withExchange !== undefined ? String(withExchange) : shardsOnly !== undefined ? `${shardsOnly}‡` : "none";
  const cases: Array<{ label: string; need: (sc: Scenario) => [number | undefined, number | undefined] }> = [
    ...(
      [
        [DO_SOFT_LIMIT_RPS, BEFORE],
        [DO_SOFT_LIMIT_RPS, BUILT_COUNTED],
        [DO_SOFT_LIMIT_RPS, BUILT],
        [DO_PLANNING_LOW_RPS, BUILT],
      ] as const
    ).map(([cap, p]) => ({
      label: `${fmt(cap)} calls/s per object, ${p.name}`,
      need: (sc: Scenario): [number | undefined, number | undefined] => [
        shardsNeeded(BASE_DEPLOYMENT, p, cap, sc.busiest),
        shardsNeeded(BASE_DEPLOYMENT, p, cap, sc.busiest, false, false),
      ],
    })),
    {
      label: `measured CPU, ${fmt(cpuBoundRps(nodesPerRegion))} routed/s per object`,
      need: (sc) => {
        const n = shardsNeeded(BASE_DEPLOYMENT, BUILT, cpuBoundRps(nodesPerRegion), sc.busiest, true);
        return [n, n];
      },
    },
  ];
  const needs = cases.map((c) => scenarios.map((sc) => c.need(sc)));
  out.push(
    table(
      ["per-object capacity, protocol", ...scenarios.map((s) => s.label.replace(" (bench/SHARDS.md)", "*"))],
      cases.map((c, i) => [c.label, ...needs[i]!.map(([a, b]) => cell(a, b))]),
      [false, ...scenarios.map(() => true)],
    ),
  );
  out.push("");
  const low = objectLoad({ ...BASE_DEPLOYMENT, shardsPerRegion: MAX_SHARDS }, BUILT);
  const lowRoom = Math.max(MIN_EXCHANGES_PER_SECOND, DO_PLANNING_LOW_RPS - regionReports);
  out.push(
    wrap(
      `\\* bench/SHARDS.md workloads. A deeper shard key (block 16) split Mooncake over 2-8 shards at ${fmt(SHARDS_DEEP_KEY_TTFT_RATIO[0], 2)}-${fmt(SHARDS_DEEP_KEY_TTFT_RATIO[1], 2)}x the single object's mean TTFT (bench/SHARDS.md). ‡ The shards fit, the exchange object does not: it takes up to ${fmt(low.exchangeRps)} calls a second (${fmt(low.exchangeRps - regionReports)} exchanges and ${fmt(regionReports)} reports), within EXCHANGE_OBJECT_BUDGET (${fmt(EXCHANGE_OBJECT_BUDGET)}), a constant of the code; ${lowRoom + regionReports <= DO_PLANNING_LOW_RPS ? `a budget of ${fmt(DO_PLANNING_LOW_RPS)} would fit it, leaving the shards ${fmt(lowRoom)} exchanges a second, at ${fmt(room / lowRoom)}x the interval.` : `no budget would: the fewest exchanges (${fmt(MIN_EXCHANGES_PER_SECOND)} a second) and the reports are over ${fmt(DO_PLANNING_LOW_RPS)}.`}`,
    ),
  );
  out.push("");
  const at64 = { ...BASE_DEPLOYMENT, shardsPerRegion: MAX_SHARDS };
  const t64 = objectLoad(at64, BEFORE);
  const c64 = objectLoad(at64, BUILT_COUNTED);
  const countedEven = shardsNeeded(BASE_DEPLOYMENT, BUILT_COUNTED, DO_SOFT_LIMIT_RPS, (n) => 1 / n);
  const builtEven = shardsNeeded(BASE_DEPLOYMENT, BUILT, DO_SOFT_LIMIT_RPS, (n) => 1 / n);
  out.push(
    wrap(
      `As built, a shard takes its share of the requests' calls and its alarms, and no reports; the shard count is the busiest shard's share against the limit: an even split needs ${builtEven ?? `more than ${MAX_SHARDS}`} shards if a session's calls count as one, ${countedEven ?? `more than ${MAX_SHARDS}`} if they count as ${BUILT_COUNTED.countedCallsPerRequest} (${fmt(c64.shardRps(1 / MAX_SHARDS))} calls a second into each of ${MAX_SHARDS} shards). Before issue 22, shard 0 also took the region's ${fmt(regionReports)} reports (${fmt(t64.shardRps(1 / MAX_SHARDS))} calls a second at ${MAX_SHARDS} shards, each other shard ${fmt(t64.otherShardRps(1 / MAX_SHARDS))}) and the 20 ms exchange passed the limit beyond ${exchangeFull} shards: no workload fitted.`,
    ),
  );
  out.push("");
  const designSync = exchangeIntervalMs(designN, regionReports);
  out.push(
    wrap(
      `The shard count is a function of skew. Past Zipf 0.6: a deeper key for the few hot first blocks only (for everything it cost Mooncake the ratios above, as prefixes shorter than the key are learned by every shard; for blocks cached on many nodes it should cost less, unmeasured), or more regions. The measured-CPU row (one thread at ${pct(TARGET_UTILISATION)}, no documented limit) is the optimistic bound; one object under production load is the measurement that would settle B3. bench/SHARDS.md's shards receive every report, as the built shards do through the feed, but share load every ${SHARD_LOAD_SYNC_MS} ms: the built exchange runs every ${ms(designSync)} ms at ${designN} shards, which it does not measure.`,
    ),
  );
  out.push("");

  // Memory.
  const inflight = streamsInFlight(regionRps);
  out.push("### B4. Memory per shard object");
  out.push("");
  out.push(
    table(
      [
        "shards",
        "index bound",
        "tickets in flight (10,000-char prompts)",
        "tickets (100,000-char prompts)",
        "total, 100,000-char",
        "of 128 MB",
      ],
      [1, 4, 16, 64].map((n) => {
        const small = shardMemoryBytes(regionRps, 1 / n);
        const large = shardMemoryBytes(regionRps, 1 / n, 100_000);
        return [
          String(n),
          mib(small.index),
          mib(small.tickets),
          mib(large.tickets),
          mib(large.total),
          pct(large.total / OBJECT_MEMORY_BYTES),
        ];
      }),
    ),
  );
  out.push("");
  out.push(
    wrap(
      `The index is bounded; tickets in flight are not (${fmt(inflight)} per region, each keeping its prompt's hashes as one string: \`Ticket.chain\`, src/core/region/router.ts; bytes measured in bench/ROUTE_COST.md), and objects of one class may share an isolate's 128 MB (pricing page, footnote 5).`,
    ),
  );
  out.push("");

  // Money.
  const design = { ...BASE_DEPLOYMENT, shardsPerRegion: designN };
  const logsSampled = { ...design, logSampleRate: 0.01 };
  const allSampled = { ...logsSampled, analyticsSampleRate: 0.01 };
  const beforeFits = needs[0]!.some(([x]) => x !== undefined);
  const bills: Array<{ label: string; lines: CostLine[] }> = [
    { label: `before issue 22${beforeFits ? "" : " (infeasible, B3)"}`, lines: monthlyCost(design, BEFORE) },
    { label: "built", lines: monthlyCost(design, BUILT) },
    { label: "built, logs 1%", lines: monthlyCost(logsSampled, BUILT) },
    { label: "+ not made: analytics 1%", lines: monthlyCost(allSampled, BUILT) },
  ];
  out.push(`### B5. Monthly bill at ${fmt(TOTAL_RPS)} requests/s, ${designN} shards per region (USD, 30 days)`);
  out.push("");
  const first = bills[0]!.lines;
  out.push(
    table(
      ["item", ...bills.map((b) => `quantity, ${b.label}`), ...bills.map((b) => b.label)],
      [
        ...first.map((line, i) => [
          line.item,
          ...bills.map((b) => `${big(b.lines[i]!.quantity)} ${b.lines[i]!.unit}`),
          ...bills.map((b) => usd(b.lines[i]!.usd)),
        ]),
        ["**total**", ...bills.map(() => ""), ...bills.map((b) => `**${usd(totalUsd(b.lines))}**`)],
      ],
      [false, ...bills.map(() => true), ...bills.map(() => true)],
    ),
  );
  out.push("");
  const floorMonth = ((PRICES.workerRequestPerMillion + PRICES.doRequestPerMillion) * TOTAL_RPS * MONTH_S) / 1e6;
  const analytics = (lines: CostLine[]) => lines.filter((l) => l.item.startsWith("Analytics")).reduce((a, l) => a + l.usd, 0);
  const logs = (lines: CostLine[]) => lines.filter((l) => l.item.startsWith("Workers Logs")).reduce((a, l) => a + l.usd, 0);
  const line = (b: number, item: string) => bills[b]!.lines.find((l) => l.item === item)!.usd;
  const rewriteRows = monthlyCost(design, SHARDS_REWRITE_LAST_SEEN).find((l) => l.item === "SQLite rows written")!.usd;
  out.push(
    `Per million routed requests: ${bills.map((b) => `${b.label} ${usd((totalUsd(b.lines) / (TOTAL_RPS * MONTH_S)) * 1e6, 2)}`).join("; ")}. ` +
      `The floor is the requests themselves: a Worker request and one billed object request, ${usd(PRICES.workerRequestPerMillion + PRICES.doRequestPerMillion, 2)} per million, ${usd(floorMonth)} a month.`,
  );
  out.push("");
  out.push(
    wrap(
      `What issue 22 bought: the RPC session, ${usd(line(0, "Durable Object requests"))} -> ${usd(line(1, "Durable Object requests"))} of object requests (reports ingested once took the mirrors out too), and rows written, ${usd(line(0, "SQLite rows written"))} -> ${usd(line(1, "SQLite rows written"))}: only the ingest rewrites a node's \`last_seen\` (every ${fmt(lastSeenWriteIntervalS())} s), the shards writing a node's row only when a report registers or changes it (\`applyReport\`, durable-objects/region.ts; with every shard rewriting it from the exchange's feed, as until commit 82c00f8, ${usd(rewriteRows)}). What it did not cut: two workers log two invocation events per request (Workers Logs ${usd(logs(bills[0]!.lines))} -> ${usd(logs(bills[1]!.lines))}, ASSUMPTION on their size). By configuration: logs sampled at 1% (\`decision_log_sample_rate\` and each worker's \`head_sampling_rate\`, which scripts/deploy/generate.ts copies from the environment's \`observability\`): ${usd(logs(bills[1]!.lines))} -> ${usd(logs(bills[2]!.lines))}. Not made: sampled Analytics Engine points (src/proxy/decision-log.ts writes one per request: ${usd(analytics(bills[2]!.lines))} -> ${usd(analytics(bills[3]!.lines))}).`,
    ),
  );
  out.push("");
  out.push("### B6. The workers' CPU per request (third column of B5)");
  out.push("");
  // 2 ms: bench/e2e/RESULTS.md's single worker before the split, the figure this model used until bench:wan measured the split.
  const cpuCases = [...new Set([0.5, 1, 2, WORKER_CPU_MS, 10])].sort((a, b) => a - b);
  out.push(
    cpuCases
      .map((c) => {
        const lines = monthlyCost({ ...logsSampled, workerCpuMs: c }, BUILT);
        const label = c === WORKER_CPU_MS ? `${fmt(c, 2)} ms (measured)` : `${fmt(c, 1)} ms`;
        return `${label}: ${fmt((TOTAL_RPS * c) / 1000)} cores, Workers CPU ${usd(lines[2]!.usd)}, total ${usd(totalUsd(lines))}`;
      })
      .join("; ") + ".",
  );
  out.push("");
  out.push(
    wrap(
      `The measured ${cpuWords()} (${cpuSource()}) is ${CPU_UPPER_BOUND}; the object's share of it is small against the workers' (B1: ${fmt(objUs)} µs on ${fmt(nodesPerRegion)} nodes; less on the benchmark's 2), and it ran on a shared 2-core machine. It replaces bench/e2e/RESULTS.md's 2.00 ms, measured on a single worker before the edge/region split (commit 43f19cc), which did not count the split's service binding and second worker. It is not an upper bound for long answers: its nodes answer a one-token stream in one write (bench/wan/node.ts), so relaying a ${fmt(OUTPUT_TOKENS_MEAN)}-event stream, which both workers pass on, is not in it, nor the hashing of a long prompt (${fmt(HASH_US_10K, 1)} µs per ${fmt(PROMPT_CHARS)} characters).`,
    ),
  );
  out.push("");
  out.push(
    `Object CPU for the whole deployment: ${fmt((TOTAL_RPS * objUs) / 1e6, 1)} cores (${fmt(objUs)} µs per request), not billed as CPU (objects bill duration). Exchange interval at ${designN} shards: ${ms(designSync)} ms (\`exchangeIntervalMs\`; bench/SHARDS.md measured ${SHARD_LOAD_SYNC_MS} ms).`,
  );
  out.push("");

  // Limits at the design point.
  const zipf06 = scenarios[1]!.busiest(designN);
  const beforeLoad = objectLoad(design, BEFORE);
  const builtLoad = objectLoad(design, BUILT);
  const countedLoad = objectLoad(design, BUILT_COUNTED);
  const mem = shardMemoryBytes(regionRps, zipf06, 100_000);
  const sub = worstCaseSubrequests(REGIONS, designN);
  const subBefore = worstCaseSubrequestsBefore(REGIONS, designN);
  out.push(`### B7. Limits at ${designN} shards per region (Zipf 0.6 busiest shard: ${pct(zipf06)})`);
  out.push("");
  out.push(
    table(
      ["limit", "published", "before issue 22", "built"],
      [
        [
          "requests/s into the busiest shard (shard 0 before / another)",
          `${fmt(DO_SOFT_LIMIT_RPS)} (soft)`,
          `${fmt(beforeLoad.shardRps(zipf06))} / ${fmt(beforeLoad.otherShardRps(zipf06))}`,
          `${fmt(builtLoad.shardRps(zipf06))} (${fmt(countedLoad.shardRps(zipf06))} if ${BUILT_COUNTED.countedCallsPerRequest} counted)`,
        ],
        [
          "requests/s into the exchange object",
          `${fmt(DO_SOFT_LIMIT_RPS)} (soft)`,
          `${fmt(beforeLoad.exchangeRps)} (${ms(beforeLoad.syncMs)} ms)`,
          `${fmt(builtLoad.exchangeRps)} (${ms(builtLoad.syncMs)} ms, reports included; budget ${fmt(EXCHANGE_OBJECT_BUDGET)})`,
        ],
        [
          "node reports/s into one object (one a node)",
          `${fmt(DO_SOFT_LIMIT_RPS)} (soft), with its other calls`,
          `${fmt(regionReports)} into shard 0, with its share of the requests`,
          `${fmt(regionReports)} into the exchange: over its budget past ${fmt(overBudgetNodes)} nodes a region, over ${fmt(DO_SOFT_LIMIT_RPS)} past ${fmt(overLimitNodes)}`,
        ],
        [
          "subrequests per worker invocation (worst case, defaults)",
          fmt(WORKERS_SUBREQUESTS_PER_REQUEST),
          `${subBefore.origin} origin + ${subBefore.object} object + ${subBefore.digests} digest calls`,
          `edge ${sub.edge.regionCalls} region + ${sub.edge.digestCalls} digest calls; region worker ${sub.region.origin} origin + ${sub.region.object} object calls, or ${sub.digestShards} for a digest; ${sub.together} all told`,
        ],
        [
          "simultaneous outgoing connections per invocation",
          fmt(WORKERS_CONNECTIONS_PER_REQUEST),
          "1 origin stream at a time",
          "1 stream at a time in each worker",
        ],
        ["memory per object (100,000-char prompts)", "128 MB", mib(mem.total), mib(mem.total)],
        [
          "SQLite per object",
          "10 GB",
          `${fmt((nodesPerRegion * NODE_ROW_BYTES) / 1024)} KB`,
          `${fmt((nodesPerRegion * NODE_ROW_BYTES) / 1024)} KB`,
        ],
      ],
      [false, true, true, true],
    ),
  );
  out.push("");
  out.push(
    wrap(
      `Digest calls: after answering a long prompt with a choice of regions, the edge asks each region whose digest in its isolate is older than ${fmt(DIGEST_TTL_MS / 1000)} s (src/edge/region-digests.ts), and that region's worker asks every shard (src/region/app.ts). "All told" counts every call one client request can cause, edge and region workers together, as if a service binding's callee spent its caller's budget.`,
    ),
  );
  out.push("");
  out.push(
    wrap(
      `**Made** in the code modelled here: the edge worker and a worker per region placed by its GPUs (src/edge/, src/region/, scripts/deploy/generate.ts; A); one billed object request per client request, \`route\` returning a RouteSession on which the region worker reports the first byte and the completion (durable-objects/region.ts, src/region/dispatch.ts); reports ingested once per region, by the region's object or its exchange, which hands the accepted reports to the shards in its answers (\`regionIngestStub\`, src/config/load.ts; src/region/app.ts passes a report that registers or changes a node to every shard as well); shards that write a node's row only when a report registers or changes it, the exchange keeping \`last_seen\` (\`applyReport\`'s \`seenIsDurable\`; a restarted shard takes the whole feed, and keeps its shard number to hear it before its alarm expires anyone); an exchange budget that follows the region's shards and nodes, the interval stretching so that the exchanges and the reports stay within ${fmt(EXCHANGE_OBJECT_BUDGET)} calls a second of one object (\`exchangeIntervalMs(shards, reportsPerSecond)\`: at ${fmt(regionReports)} reports a second, ${SHARD_LOAD_SYNC_MS} ms up to ${growsAt} shards, ${ms(designSync)} ms at ${designN}); a non-streamed answer's first byte riding with \`complete\` (CompletionOutcome.firstByteMsAgo, src/contracts/routing.ts); a ticket keeping its prompt's hashes as one string (16 bytes a block); each shard sizing its index of a node by its share of the node's recent prefill (\`minCacheShare\`, src/core/region/settings.ts). **Limit**: one object, the exchange, ingests a region's reports, so past ${fmt(overBudgetNodes)} nodes a region (a report a second each) it is over its budget whatever the interval (the shards exchange at least ${fmt(MIN_EXCHANGES_PER_SECOND)} times a second in all, MIN_EXCHANGES_PER_SECOND), and past ${fmt(overLimitNodes)} over the documented ${fmt(DO_SOFT_LIMIT_RPS)}; this deployment has ${fmt(nodesPerRegion)}. **Not made**: sampled Analytics Engine points; a measurement of exchanges slower than ${SHARD_LOAD_SYNC_MS} ms (\`npm run bench:shards\` should add 50, 100 ms); tenant rate limits outside the shards (B2); the edge's and the region worker's CPU measured apart, without the local stand-ins (${WAN_RESULTS} reports the whole path). Not modelled: the digest calls (each edge isolate asks each region at most once per ${fmt(DIGEST_TTL_MS / 1000)} s, for long prompts only: isolates / ${fmt(DIGEST_TTL_MS / 1000)} calls a second into every shard, and the number of isolates is not published), a registration's or change's call to every shard, and \`rememberResponse\` on another shard.`,
    ),
  );
  out.push("");

  const zeroSix = [needs[2]![0]![0], needs[2]![1]![0]] as [number | undefined, number | undefined];
  return {
    designN,
    designSync,
    beforeBill: totalUsd(bills[0]!.lines),
    builtBill: totalUsd(bills[1]!.lines),
    builtLogsBill: totalUsd(bills[2]!.lines),
    notMadeBill: totalUsd(bills[3]!.lines),
    floorMonth,
    zeroSixRange: zeroSix,
    countedFits: needs[1]!.some(([x]) => x !== undefined),
    beforeFits,
    hotZipf08: scenarios[2]!.top * regionRps,
    exchangeRps: builtLoad.exchangeRps,
    busiestRps: builtLoad.shardRps(zipf06),
    cpuRps: cpuBoundRps(nodesPerRegion),
  };
}

function summary(f: Figures): string[] {
  const transatlantic = PLACEMENTS[2]!;
  const transpacific = PLACEMENTS[3]!;
  const added = (o: OptionId, p: Placement) => pathMs(firstByteLegs(o, p)) - pathMs(firstByteLegs("direct", p));
  const regionRps = TOTAL_RPS / REGIONS;
  const events = regionRps * (OUTPUT_TOKENS_MEAN / TOKENS_PER_STREAM_EVENT);
  const perMillion = (x: number) => usd((x / (TOTAL_RPS * MONTH_S)) * 1e6, 2);
  const [lo, hi] = f.zeroSixRange;
  return [
    "## Summary",
    "",
    wrap(
      `**Production path: option 5, built.** The edge worker (src/edge/) forwards each request once, over a service binding, to its region's worker, placed by the region's GPUs (src/region/), which asks the object, calls the nodes and retries among them: one long haul (+${ms(added("split", transatlantic))} ms over a direct call ${transatlantic.name}, +${ms(added("split", transpacific))} ms ${transpacific.name}), ${ms(pathMs(retryLegs("split", transatlantic)))} ms per retry, the handshakes local, no streams in the object, no extra request fees. The single worker it replaced crossed twice (+${ms(added("single", transatlantic))} ms / +${ms(added("single", transpacific))} ms, ${ms(pathMs(retryLegs("single", transpacific)))} ms more per retry transpacific: A2, A3). The alternatives considered: (2) relays ${big(events)} stream events/s per region through objects whose reset cuts them; (3) makes up to ${fmt(EDGE_COLOS)} blind deciders; (4) serves one region and costs the others ${longHauls(smartOtherRegionLegs(PLACEMENTS[0]!))} long hauls.`,
      "- ",
      "  ",
    ),
    wrap(
      `**Object load as built: ${billedObjectRequests(BUILT_OPTION)} billed object request per client request** (\`route\`, then \`firstByte\` and \`complete\` on its RouteSession: ${DO_CALLS_STREAMED} calls in one RPC session; ${DO_CALLS_STREAMED} billed before issue 22). The per-object ceiling is Cloudflare's documented soft limit of ${fmt(DO_SOFT_LIMIT_RPS)} requests/s (the measured CPU would allow ${fmt(f.cpuRps)} routed/s at ${pct(TARGET_UTILISATION)} busy). The headline counts a session as 1 request against that limit ("1 counted"; not documented either way): **${lo === undefined || hi === undefined ? "none" : range(lo, hi)} shards per region for ${fmt(regionRps)} requests/s** up to Zipf 0.6 over first blocks (${f.designN} shards: busiest shard ${fmt(f.busiestRps)} calls/s, exchange every ${ms(f.designSync)} ms taking ${fmt(f.exchangeRps)} calls/s with the region's reports, its budget ${fmt(EXCHANGE_OBJECT_BUDGET)}; that one object ingests the region's reports, so past ${fmt(EXCHANGE_REPORTS_OVER_BUDGET * REPORT_INTERVAL_S)} nodes a region it is over budget: B7). ${f.countedFits ? `If all ${BUILT_COUNTED.countedCallsPerRequest} calls count, more shards (B3)` : `If all ${BUILT_COUNTED.countedCallsPerRequest} calls count, no workload fits within ${MAX_SHARDS} shards (B3)`}; before issue 22 ${f.beforeFits ? "some did" : "none did"}. **Skew decides the rest**: at Zipf 0.8 the hottest first block alone is ${fmt(f.hotZipf08)} requests/s, which no first-block sharding splits.`,
      "- ",
      "  ",
    ),
    wrap(
      `**Cost at ${fmt(TOTAL_RPS)} requests/s** (${REGIONS} regions, ${fmt(NODES)} nodes, ${f.designN} shards per region), as built: **${usd(f.builtLogsBill)} a month (${perMillion(f.builtLogsBill)} per million requests) with logs sampled at 1%** (configuration), ${usd(f.builtBill)} at the default of logging every request; ${usd(f.notMadeBill)} with the change not made (Analytics Engine points sampled at 1%: B5); the floor (one Worker request and one billed object request per request) is ${usd(f.floorMonth)}. Before issue 22, default logging: ${usd(f.beforeBill)}. The workers' CPU is measured (${cpuWords()} a request for the whole path in one workerd, an upper bound including the object and local stand-ins: B6).`,
      "- ",
      "  ",
    ),
    "",
  ];
}

function unsourced(): string[] {
  return [
    "### Figures not sourced (ASSUMPTION constants in bench/scale-model.ts)",
    "",
    wrap(
      `Every request streaming (${DO_CALLS_STREAMED} object calls in its session; ${DO_CALLS_UNSTREAMED} for one that does not). Whether a session's follow-up calls count against an object's request rate (the headline: not; B3 shows both); a production object's throughput (B3: the range).`,
      "- ",
      "  ",
    ),
    wrap(
      `The workers' CPU per report (${fmt(REPORT_CPU_MS, 1)} ms, edge and region worker together); per request it is measured (${cpuWords()}, ${WAN_RESULTS}: an upper bound, including the object and local stand-ins, for short answers: B6).`,
      "- ",
      "  ",
    ),
    wrap(
      `Bytes per log event (${fmt(LOG_BYTES_DECISION_LINE / 1000)} KB a decision line, ${fmt(LOG_BYTES_REQUEST_INVOCATION / 1000)} KB a request's invocation event per worker, ${fmt(LOG_BYTES_REPORT_INVOCATION)} B a report's: ${fmt(logBytesPerRequest() / 1000)} KB a request, ${fmt(logBytesPerReport() / 1000, 1)} KB a report with ${WORKERS_PER_REQUEST} workers); ${fmt(OUTPUT_TOKENS_MEAN)}-token answers at ${fmt(DECODE_TOKENS_PER_S)} tokens/s; first blocks Zipf over 10,000 per region; objects never hibernating; an alarm per object per ${fmt(DEFAULT_REGION_SETTINGS.nodeSilenceMs / 1000)} s; ${fmt(EDGE_COLOS)} data centers (Cloudflare's network page, not rechecked); distances: client-edge ${fmt(ACCESS_KM)} km, object-GPUs ${fmt(OBJECT_TO_GPU_KM)} km, placed worker-GPUs ${fmt(PLACED_WORKER_TO_GPU_KM)} km.`,
      "- ",
      "  ",
    ),
    "",
  ];
}

/** docs/SCALING.md, the whole document, as markdown. */
export function report(): string {
  const a: string[] = [];
  partA(a);
  const b: string[] = [];
  const figures = partB(b);
  const out: string[] = [
    "# Scaling warmpath: the production path, and 100,000 requests a second",
    "",
    wrap(
      `Generated by \`npm run --silent bench:scale > docs/SCALING.md\` (bench/scale-model.ts, tested by bench/test/scale-model.test.ts), then \`npx prettier --write docs/SCALING.md\`: a model, not a measurement; rerun it, do not edit this file. It models the protocol built in issue 22: an edge worker and a worker per region placed by its GPUs, one RPC session per request with the region's object, reports ingested once per region. Its inputs are constants at the top of bench/scale-model.ts, each with its source: bench/workerd/RESULTS.md and ${WAN_RESULTS} (CPU, the latter read as this runs), bench/SHARDS.md (busiest shard, cost of shared load), src/edge/forward.ts, src/edge/api/nodes.ts, src/region/dispatch.ts, src/region/app.ts and durable-objects/region.ts (calls and writes per request and per report). Assumptions are listed at the end; prices read 2026-12-04.`,
    ),
    "",
    `Measured inputs: hashing ${fmt(HASH_US_10K, 1)} µs per ${fmt(PROMPT_CHARS)} characters; a route ${ROUTE_US_BY_NODES.map(([n, u]) => `${fmt(u, 1)} µs on ${n}`).join(", ")} nodes (100,000 index entries); ${fmt(RPC_FLOOR_PAIR_US, 1)} µs for two RPCs; ${fmt(PAIR_WORK_US, 1)} µs of object work per route + complete (bench/workerd/RESULTS.md); the workers' CPU, ${cpuWords()} per request (${cpuSource()}: ${CPU_UPPER_BOUND}; one-token answers); the index bound ${mib(indexMemoryBound(DEFAULT_MAX_INDEX_ENTRIES))} at ${fmt(DEFAULT_MAX_INDEX_ENTRIES)} entries (src/core/prefix-index.ts); ${fmt(OUTPUT_TOKENS_MEAN)} tokens per answer (Mooncake). Assumed: ${STREAMED_SHARE === 1 ? "every answer streams" : `${pct(STREAMED_SHARE)} of answers stream`} (${DO_CALLS_STREAMED} object calls a request in one RPC session; ${DO_CALLS_UNSTREAMED} for one that does not).`,
    "",
    ...summary(figures),
    ...a,
    ...b,
    ...unsourced(),
  ];
  return out.join("\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.stdout.write(report());
