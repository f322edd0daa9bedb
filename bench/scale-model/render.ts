/**
 * The scale model's rendering: docs/SCALING.md, the whole document (figures and the prose around
 * them), as markdown, from the inputs (bench/scale-model/inputs.ts) and the model
 * (bench/scale-model/model.ts). Deterministic: the same inputs give the same bytes.
 */
import { ROUND_TRIP_MS_PER_KM } from "../../src/core/region-select.ts";
import { MAX_SHARDS } from "../../src/core/shard.ts";
import { DEFAULT_MAX_INDEX_ENTRIES, indexMemoryBound } from "../../src/core/prefix-index.ts";
import { DEFAULT_REGION_SETTINGS } from "../../src/core/region/settings.ts";
import { DIGEST_TTL_MS } from "../../src/core/warm-region.ts";
import {
  ACCESS_KM,
  AGENT_SOURCE,
  BASE_DEPLOYMENT,
  BEFORE,
  BUILT,
  BUILT_COUNTED,
  BUILT_OPTION,
  DECODE_TOKENS_PER_S,
  DO_CALLS_PER_REQUEST,
  DO_CALLS_STREAMED,
  DO_CALLS_UNSTREAMED,
  DO_PLANNING_LOW_RPS,
  DO_SOFT_LIMIT_RPS,
  EDGE_COLOS,
  EXCHANGE_OBJECT_BUDGET,
  EXCHANGE_REPORTS_OVER_BUDGET,
  HASH_US_10K,
  LOG_BYTES_DECISION_LINE,
  LOG_BYTES_REPORT_INVOCATION,
  LOG_BYTES_REQUEST_INVOCATION,
  MEASURED_CPU,
  MIN_EXCHANGES_PER_SECOND,
  MONTH_S,
  NODE_ROW_BYTES,
  NODES,
  OBJECT_MEMORY_BYTES,
  OBJECT_TO_GPU_KM,
  type OptionId,
  OPTIONS,
  OTHER_REGION_KM,
  OUTPUT_TOKENS_MEAN,
  PAIR_WORK_US,
  PLACED_WORKER_TO_GPU_KM,
  type Placement,
  PLACEMENTS,
  PRICES,
  PROMPT_CHARS,
  REGIONS,
  REPORT_CPU_MS,
  REPORT_INTERVAL_S,
  ROUTE_US_BY_NODES,
  RPC_FLOOR_PAIR_US,
  SHARD_LOAD_SYNC_MS,
  SHARDS_DEEP_KEY_TTFT_RATIO,
  SHARDS_EXCHANGE_HIT_RATE_WORST,
  SHARDS_EXCHANGE_TTFT_RATIO,
  SHARDS_MD_BUSIEST,
  SHARDS_REPORTS_ONLY_TTFT_RATIO,
  SHARDS_REWRITE_LAST_SEEN,
  STREAMED_SHARE,
  TARGET_UTILISATION,
  TOKENS_PER_STREAM_EVENT,
  TOTAL_RPS,
  WAN_RESULTS,
  WORKER_CPU_MS,
  WORKERS_CONNECTIONS_PER_REQUEST,
  WORKERS_PER_REQUEST,
  WORKERS_SUBREQUESTS_PER_REQUEST,
} from "./inputs.ts";
import {
  billedObjectRequests,
  coldConnectionMs,
  type CostLine,
  cpuBoundRps,
  distances,
  exchangeIntervalMs,
  firstByteLegs,
  lastSeenWriteIntervalS,
  lastSeenWriteReports,
  logBytesPerReport,
  logBytesPerRequest,
  longHauls,
  mirrorIntervalS,
  monthlyCost,
  objectCallsPerRequest,
  objectLoad,
  objectUsPerRequest,
  pathMs,
  retryLegs,
  routeUs,
  rttMs,
  shardMemoryBytes,
  shardsNeeded,
  simulateSkew,
  smartOtherRegionLegs,
  streamsInFlight,
  totalUsd,
  worstCaseSubrequests,
  worstCaseSubrequestsBefore,
} from "./model.ts";

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
      `The index is bounded; tickets in flight are not (${fmt(inflight)} per region, each keeping its prompt's hashes as one string: \`Ticket.chain\`, src/core/region/tickets.ts; bytes measured in bench/ROUTE_COST.md), and objects of one class may share an isolate's 128 MB (pricing page, footnote 5).`,
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
