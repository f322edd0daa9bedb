/**
 * Every header name warmpath reads or writes, once: the client's hints, the answer's explanation,
 * OpenAI's rate-limit headers, and the two between the edge and a region worker. CORS exposes and
 * allows from these lists (src/edge/middleware/cors.ts), the region worker explains with them
 * (src/region/respond.ts), and docs/API.md's header table documents each.
 */

/** The request's id, both ways (a client's own is kept when well-formed). */
export const REQUEST_ID = "x-request-id";

/** W3C Trace Context (src/core/trace-context.ts): a client's trace, continued; warmpath's own, sent to each node. */
export const TRACEPARENT = "traceparent";
export const TRACESTATE = "tracestate";
/** The trace id of the request (the client's, or a new one), on every inference answer. */
export const TRACE_ID = "x-warmpath-trace-id";

/** Hints a client may send. */
export const HINT = {
  /** A session or user key (the strongest routing hint). */
  session: "x-session-id",
  /** Pins the request to one region. */
  region: "x-warmpath-region",
  /** A shared cache namespace the tenant may use. */
  namespace: "x-warmpath-namespace",
  /** Its priority class, at most the tenant's (docs/ADMISSION.md). */
  priority: "x-warmpath-priority",
  /** Its time-to-first-token objective in ms, at most the tenant's (docs/ADMISSION.md). */
  objective: "x-warmpath-ttft-objective-ms",
} as const;

/** Why the answer came from where it did (set by the region worker, before the node's first byte reaches the client). */
export const EXPLAIN = {
  region: "x-warmpath-region",
  node: "x-warmpath-node",
  decision: "x-warmpath-decision",
  policy: "x-warmpath-policy",
  prefixMatch: "x-warmpath-prefix-match",
  attempts: "x-warmpath-attempts",
  shard: "x-warmpath-shard",
  regionChoice: "x-warmpath-region-choice",
  heldNodes: "x-warmpath-held-nodes",
  /** The class, the objective (ms) and the time in the region's queue (ms) admission applied (docs/ADMISSION.md). */
  priority: "x-warmpath-priority",
  objective: "x-warmpath-ttft-objective-ms",
  queued: "x-warmpath-queued-ms",
  /** Why its class was lowered: `share` (its tenant floods) or `commitment` (past its commitment). */
  demoted: "x-warmpath-demoted",
} as const;

/** OpenAI's rate-limit headers (src/proxy/rate-limit-headers.ts), by kind. */
const RATE_LIMIT_HEADERS = ["requests", "tokens"].flatMap((kind) =>
  ["limit", "remaining", "reset"].map((what) => `x-ratelimit-${what}-${kind}`),
);

/** The contract version, both ways between the edge and a region worker (src/contracts/region-service.ts). */
export const CONTRACT_HEADER = "x-warmpath-contract";
/** Set on a region's refusal, never on a node's answer. */
export const REFUSAL_HEADER = "x-warmpath-region-refusal";

/** What a browser script may read of an answer (CORS `Access-Control-Expose-Headers`). */
export const EXPOSED_HEADERS = [REQUEST_ID, TRACE_ID, ...Object.values(EXPLAIN), ...RATE_LIMIT_HEADERS, "retry-after"];
/** What a browser may send (CORS `Access-Control-Allow-Headers`). */
export const ALLOWED_REQUEST_HEADERS = [
  "authorization",
  "content-type",
  "x-api-key",
  "anthropic-version",
  "anthropic-beta",
  "openai-beta",
  ...Object.values(HINT),
  REQUEST_ID,
  TRACEPARENT,
  TRACESTATE,
];
