/**
 * The scale model itself: pure functions of the inputs (bench/scale-model/inputs.ts). Part A, the
 * round trips of each way to place the decision; part B, the load on each object, the shards a
 * region needs, memory and the monthly bill; and the seeded simulation of the busiest shard under a
 * Zipf distribution of first blocks, through the production `shardOf`. The document is written by
 * bench/scale-model/render.ts; bench/scale-model.ts is the entry.
 */
import { ROUND_TRIP_MS_PER_KM, distanceKm } from "../../src/core/region-select.ts";
import { MAX_SHARDS, shardOf } from "../../src/core/shard.ts";
import { DEFAULT_MAX_INDEX_ENTRIES, indexMemoryBound } from "../../src/core/prefix-index.ts";
import { DEFAULT_REGION_SETTINGS } from "../../src/core/region/settings.ts";
import { blockWeight } from "../../src/core/block-layout.ts";
import { seededRandom, zipfSampler } from "../../src/core/random.ts";
import {
  ACCESS_KM,
  ALARMS_PER_OBJECT_PER_S,
  BLOCK_CHARS,
  DECODE_TOKENS_PER_S,
  type Deployment,
  DO_CALLS_PER_REQUEST,
  EXCHANGE_OBJECT_BUDGET,
  HANDSHAKE_ROUND_TRIPS,
  LAST_SEEN_WRITE_FRACTION,
  LOG_BYTES_DECISION_LINE,
  LOG_BYTES_REPORT_INVOCATION,
  LOG_BYTES_REQUEST_INVOCATION,
  MAX_REGION_ATTEMPTS_DEFAULT,
  MAX_RETRIES_DEFAULT,
  MIN_EXCHANGES_PER_SECOND,
  MIRROR_FRACTION,
  MONTH_S,
  NODE_ROW_BYTES,
  OBJECT_TO_GPU_KM,
  type OptionId,
  OTHER_REGION_KM,
  OUTPUT_TOKENS_MEAN,
  PAIR_WORK_US,
  PLACED_WORKER_TO_GPU_KM,
  type Placement,
  PRICES,
  type Prices,
  PROMPT_CHARS,
  type Protocol,
  REGIONS,
  REPORT_CPU_MS,
  REPORT_INTERVAL_S,
  ROUTE_US_BY_NODES,
  RPC_FLOOR_PAIR_US,
  SHARD_LOAD_SYNC_MS,
  TARGET_UTILISATION,
  TICKET_BYTES_PER_BLOCK,
  TICKET_FIXED_BYTES,
  WORKERS_PER_REQUEST,
} from "./inputs.ts";

// ---------------------------------------------------------------------------------------------
// Part A: the path of one request, per option
// ---------------------------------------------------------------------------------------------

/** Round trip over a fibre route of `km` great-circle km (src/core/region-select.ts: 0.015 ms/km, light in fibre on routes 1.5x the great circle). */
export function rttMs(km: number): number {
  return km * ROUND_TRIP_MS_PER_KM;
}

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
// Part B: load, capacity, memory, money
// ---------------------------------------------------------------------------------------------

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
/** Bytes Workers Logs ingests per logged request: the decision line and each worker's invocation event (`workers`: 1 before issue 22). */
export function logBytesPerRequest(workers = WORKERS_PER_REQUEST): number {
  return LOG_BYTES_DECISION_LINE + workers * LOG_BYTES_REQUEST_INVOCATION;
}
/** Bytes per logged node report: each worker's invocation event. */
export function logBytesPerReport(workers = WORKERS_PER_REQUEST): number {
  return workers * LOG_BYTES_REPORT_INVOCATION;
}
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
  /** A metered line: what is used past the plan's inclusion, at `price` per `per` units. */
  const metered = (item: string, quantity: number, unit: string, included: number, price: number, per = m) => ({
    item,
    quantity,
    unit,
    usd: (over(quantity, included) / per) * price,
  });
  return [
    { item: "Workers subscription", quantity: 1, unit: "month", usd: prices.subscription },
    metered(
      "Workers requests (routed + node reports)",
      workerRequests,
      "requests",
      prices.workerRequestsIncluded,
      prices.workerRequestPerMillion,
    ),
    metered("Workers CPU", cpuMs, "CPU ms", prices.workerCpuMsIncluded, prices.workerCpuPerMillionMs),
    metered("Durable Object requests", doRequests, "requests", prices.doRequestsIncluded, prices.doRequestPerMillion),
    metered("Durable Object duration", gbSeconds, "GB-s", prices.doGbSecondsIncluded, prices.doPerMillionGbSeconds),
    metered("SQLite rows written", rowsWritten, "rows", prices.rowsWrittenIncluded, prices.rowsWrittenPerMillion),
    // Per request the object reads no storage (durable-objects/region.ts: route and complete touch none); reads happen at construction only.
    { item: "SQLite rows read", quantity: 0, unit: "rows", usd: 0 },
    metered("SQLite storage", storageGbMonth, "GB-month", prices.storageGbMonthIncluded, prices.storagePerGbMonth, 1),
    metered("Analytics Engine data points", points, "points", prices.analyticsPointsIncluded, prices.analyticsPerMillion),
    metered("Workers Logs ingestion", logGb, "GB", prices.logIngestGbIncluded, prices.logIngestPerGb, 1),
    metered("Workers Logs storage", logGbMonth, "GB-month", prices.logStorageGbMonthIncluded, prices.logStoragePerGbMonth, 1),
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
