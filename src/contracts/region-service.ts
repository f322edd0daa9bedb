/**
 * The edge -> region worker boundary: what the edge worker sends a region's worker over its
 * service binding, and what the region worker answers. One zod contract per message, used by the
 * edge (src/edge/region-client.ts, which builds them) and the region worker (src/region/app.ts,
 * which validates them: a binding is still a trust boundary between two separately deployed
 * scripts).
 *
 * HTTP over the binding rather than RPC: the same bytes then cross a service binding, a loopback
 * socket between two workerd processes (npm start, the faults suite) and the long-haul relay of
 * bench:wan, and a region worker's death mid-stream is a broken body the edge can see.
 *
 * **Version skew.** An edge and its region workers are deployed one after the other (region
 * workers first, docs/DEPLOY.md), so for a while one runs a newer contract than the other. Every
 * request carries the edge's {@link REGION_CONTRACT_VERSION} in {@link CONTRACT_HEADER}; a region
 * worker serves every version from {@link MIN_REGION_CONTRACT_VERSION} to its own, and refuses any
 * other with the refusal `contract-mismatch` before it touches a node or an object. The edge treats
 * that as a failed region (the next region, else 503) and logs `region_contract_mismatch`; every
 * answer carries the region worker's version back, and an answer without it (an older worker, or
 * the runtime's own error page) is never taken for the region's.
 */
import { z } from "zod";
import { nodeIdSchema, nodeReportSchema } from "./node.ts";
import {
  MAX_COMMITTED_TOKENS_PER_MINUTE,
  MAX_OBJECTIVE_MS,
  demotionSchema,
  priorityClassSchema,
  rateLimitStateSchema,
  responseIdSchema,
  shedReasonSchema,
} from "./routing.ts";
import { blockHashesSchema } from "./block-hashes.ts";
import { traceScopeSchema } from "./trace.ts";
import { nodeCredentialSchema } from "../core/node-identity.ts";

/** The contract this code speaks. Raise it when a message below changes incompatibly. */
export const REGION_CONTRACT_VERSION = 1;
/** The oldest edge contract a region worker still serves (a compatible path while an edge catches up). */
export const MIN_REGION_CONTRACT_VERSION = 1;
/** Carries the contract version both ways; a region's refusal (a JSON {@link RegionRefusal}) is marked by the other. */
export { CONTRACT_HEADER, REFUSAL_HEADER } from "./headers.ts";

/** The region worker's paths, under the region they are for. */
export const regionPath = {
  dispatch: (region: string) => `/region/v1/${region}/dispatch`,
  report: (region: string) => `/region/v1/${region}/report`,
  remove: (region: string) => `/region/v1/${region}/remove`,
  state: (region: string) => `/region/v1/${region}/state`,
  history: (region: string) => `/region/v1/${region}/history`,
  digest: (region: string) => `/region/v1/${region}/digest`,
  restart: (region: string) => `/region/v1/${region}/restart`,
  /** POST a SpendReport to the budget ledger's home region (its first region's worker): the totals back. */
  spend: (region: string) => `/region/v1/${region}/spend`,
  /** GET with `tenant`, `from`, `to` in the query (usageQuerySchema): the region's usage ledger rows. */
  usage: (region: string) => `/region/v1/${region}/usage`,
} as const;

/** Request headers a node may see; everything else (notably the client's API key) stays at the edge. */
/**
 * A value an HTTP header may carry: what the client's request had (the edge copies it from there),
 * and what `Headers.set` takes when the region worker sets it on the node's call (it throws on CR,
 * LF and NUL, after the request was placed).
 */
const HEADER_VALUE = /^[^\r\n\0]*$/;

export const NODE_HEADERS = [
  "content-type",
  "accept",
  "accept-encoding",
  "user-agent",
  "openai-beta",
  "anthropic-version",
  "anthropic-beta",
];

/** The inference paths a region worker forwards to its nodes. */
const inferencePathSchema = z.enum(["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"]);
export type InferencePath = z.infer<typeof inferencePathSchema>;

/** Which API's stream terminator ends the answer (src/proxy/stream-end.ts). */
const streamApiSchema = z.enum(["openai", "responses", "messages"]);
export type StreamApi = z.infer<typeof streamApiSchema>;

/** One region or node tried, and how it ended (the decision line's `attempts`). */
const attemptSchema = z.object({
  region: z.string().max(64),
  node: nodeIdSchema.optional(),
  outcome: z.string().max(512),
});
export type Attempt = z.infer<typeof attemptSchema>;

/** Why a farther region was tried first: it holds more of this long prompt's prefix (src/core/warm-region.ts). */
const warmRegionSchema = z.object({
  region: z.string().max(64),
  nearest: z.string().max(64),
  heldTokens: z.number().min(0),
  nearestHeldTokens: z.number().min(0),
  savedMs: z.number(),
  extraRoundTripMs: z.number(),
});
export type WarmRegion = z.infer<typeof warmRegionSchema>;

/** The most attempts carried from region to region (regions x nodes, bounded by the limits). */
const MAX_ATTEMPTS = 64;

/** A request to place and serve in one region: everything the edge learned that the region needs. */
export const dispatchRequestSchema = z.object({
  requestId: z.string().min(1).max(128),
  /** When the edge received the request (ms epoch): deadlines and durations count from it. */
  startedAt: z.number().int().min(0),
  tenant: z.object({
    id: z.string().min(1).max(64),
    weight: z.number().positive().max(1_000),
    requestsPerMinute: z.number().int().positive().optional(),
    promptTokensPerMinute: z.number().int().positive().optional(),
    /** Its committed prompt tokens a minute in each region, if any (tenant-demand.ts). */
    committedTokensPerMinute: z.number().int().positive().max(MAX_COMMITTED_TOKENS_PER_MINUTE).optional(),
    /** Its configured time-to-first-token objective (ms), if any. */
    objectiveMs: z.number().int().min(1).max(MAX_OBJECTIVE_MS).optional(),
  }),
  /** The request's class (the tenant's, lowered by `x-warmpath-priority`) and its own objective (`x-warmpath-ttft-objective-ms`): docs/ADMISSION.md. */
  priority: priorityClassSchema.optional(),
  requestObjectiveMs: z.number().int().min(1).max(MAX_OBJECTIVE_MS).optional(),
  model: z.string().min(1).max(256),
  path: inferencePathSchema,
  api: streamApiSchema,
  /** The client asked for a stream: the answer is SSE, whatever its Content-Type. */
  stream: z.boolean(),
  /**
   * A stream that did not ask for usage: the region worker asks the node for it, and takes its
   * event back out of the client's stream (src/proxy/stream-usage.ts).
   */
  askUsage: z.boolean(),
  /**
   * The request's cache namespace (`tenant:acme`, `shared:commons`) and the client's own
   * `cache_salt`, from which a region with `engine_cache_isolation = "cache_salt"` salts the body
   * (src/region/cache-salt.ts). `bodyHasCacheSalt`: the body carries a `cache_salt` key to replace.
   */
  cacheNamespace: z.string().min(1).max(128),
  clientCacheSalt: z.string().max(1024).optional(),
  bodyHasCacheSalt: z.boolean(),
  /** The answer's id may be continued from (the Responses API): the region remembers its node. */
  storesResponses: z.boolean(),
  /** Prefix block hashes (16 hex characters each), first block first. */
  hashes: blockHashesSchema,
  promptTokens: z.number().int().min(0),
  /**
   * The completion tokens the client's body allows (`max_completion_tokens`, `max_tokens`,
   * `max_output_tokens`: src/core/usage/reservations.ts requestedMaxTokens), if it sets any: what a
   * budgeted request holds against its budget (docs/USAGE.md). Optional: an older edge sends none.
   */
  maxTokens: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
  /**
   * What the edge read of the body's top level when it parsed it: its completion budget
   * (src/proxy/completion-budget.ts), and whether it has a `stream_options` key. The region worker
   * takes them instead of scanning the body's text again (src/region/node-body.ts: up to
   * `max_body_bytes` of it: 10% of the region isolate's CPU samples for a 130 KB agentic chat, a V8
   * profile of the one-process path).
   * Optional: an older edge sends none, and the region worker scans.
   */
  bodyFields: z.object({ completionBudget: z.number().min(0).optional(), hasStreamOptions: z.boolean() }).optional(),
  sessionKey: z.string().max(1024).optional(),
  previousResponseId: responseIdSchema.optional(),
  /** The nearest region, when this one is its failover. */
  failoverFrom: z.string().min(1).max(64).optional(),
  /** A nearer region was saturated: take the request only if this one can start it sooner. */
  waitToBeatSeconds: z.number().min(0).max(86_400).optional(),
  warm: warmRegionSchema.optional(),
  /** Earlier regions' attempts, for the decision line. */
  attempts: z.array(attemptSchema).max(MAX_ATTEMPTS),
  /** The client's headers a node may see (content type, accept, user agent, API betas), nothing else. */
  headers: z.record(z.string().max(64), z.string().max(1024).regex(HEADER_VALUE, "must be a header value (no CR, LF or NUL)")),
  /**
   * The request's trace: the region worker's spans hang from the edge's span for this region, and
   * each node call sends the node a child `traceparent` (src/region/trace.ts). Optional: an older
   * edge sends none, and the region worker then starts a trace of its own.
   */
  trace: traceScopeSchema.optional(),
});
export type DispatchRequest = z.infer<typeof dispatchRequestSchema>;

/** Why a region did not serve a request (the edge then tries the next region, or answers). */
const refusalReasonSchema = z.enum([
  "no-node",
  "saturated",
  "over-share",
  "rate-limited",
  /** The tenant spent its budget (docs/USAGE.md): 429 `insufficient_quota`, no other region tried. */
  "over-budget",
  /** No node can meet the request's time-to-first-token objective (docs/ADMISSION.md): another region may, else 429 `objective_unreachable`. */
  "shed",
  /** Every node tried failed before its first byte. */
  "failed",
  /** It continues a stored response this region holds for no such tenant and id (docs/API.md): another region may hold it, else 400 `previous_response_not_found`. */
  "unknown-response",
  "contract-mismatch",
  /** The request named a region this worker does not serve (a binding pointed at the wrong worker). */
  "wrong-region",
]);

export const regionRefusalSchema = z.object({
  reason: refusalReasonSchema,
  message: z.string().max(4096),
  retryAfterSeconds: z.number().min(0),
  /** `saturated`: the shortest modelled wait of the region's nodes (s), for the next region to beat. */
  waitSeconds: z.number().min(0).optional(),
  rateLimit: rateLimitStateSchema.optional(),
  /** `shed`: why (routing.ts shedReasonSchema), and the objective and time queued it was shed with (ms), for the decision line. */
  shed: shedReasonSchema.optional(),
  objectiveMs: z.number().min(0).optional(),
  queuedMs: z.number().min(0).optional(),
  /** `shed` at arrival (`objective`): the soonest first token the region predicted, after its queue (ms from its arrival there; routing.ts). */
  estimatedTtftMs: z.number().min(0).optional(),
  /** `shed`: why its class had been lowered, if it had (routing.ts demotionSchema); `over-share`: `commitment` when the tenant is past its commitment, `growth` when past its usual rate. */
  demoted: demotionSchema.optional(),
  /** This region's attempts (nodes tried), to add to the edge's. */
  attempts: z.array(attemptSchema).max(MAX_ATTEMPTS),
});
export type RegionRefusal = z.infer<typeof regionRefusalSchema>;

/** A node report the edge authenticated, and the credential it presented (its hash, never itself). */
export const reportRequestSchema = z.object({ report: nodeReportSchema, credential: nodeCredentialSchema });

export const removeRequestSchema = z.object({ nodeId: nodeIdSchema, credential: nodeCredentialSchema });

/** The longest meta part of a dispatch message: 4,096 hashes, a session key and attempts fit with room. */
export const MAX_DISPATCH_META_BYTES = 256 * 1024;

/**
 * A dispatch message on the wire: a 4-byte big-endian length, the request's meta as JSON, then the
 * body to forward, byte for byte (the client's bytes, with usage asked for or the cache salt added).
 * The meta cannot ride in a header: 4,096 hashes are 64 KiB.
 */
export function encodeDispatch(meta: DispatchRequest, body: Uint8Array): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(meta));
  const out = new Uint8Array(4 + json.length + body.length);
  new DataView(out.buffer).setUint32(0, json.length);
  out.set(json, 4);
  out.set(body, 4 + json.length);
  return out;
}

/** The meta (unvalidated JSON) and the body of a dispatch message, or why it is malformed. */
export function decodeDispatch(bytes: Uint8Array): { ok: true; meta: unknown; body: Uint8Array } | { ok: false; message: string } {
  if (bytes.length < 4) return { ok: false, message: "dispatch message shorter than its length prefix" };
  const length = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0);
  if (length > MAX_DISPATCH_META_BYTES || 4 + length > bytes.length) return { ok: false, message: "dispatch meta length out of bounds" };
  try {
    const meta: unknown = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + length)));
    return { ok: true, meta, body: bytes.subarray(4 + length) };
  } catch {
    return { ok: false, message: "dispatch meta is not JSON" };
  }
}
