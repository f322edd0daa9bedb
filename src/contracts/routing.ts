/**
 * The routing boundary: what the worker sends the region Durable Object and what it answers. One
 * zod contract per message, used by the worker (which builds them), the Durable Object (which
 * validates them, since an RPC boundary is still a trust boundary: a bad call must be refused, not
 * corrupt the node table or the index) and the core router (which takes the parsed types). Kept
 * cheap (no per-hash regex) because `route` runs on every request.
 */
import { z } from "zod";
import { blockHashesSchema } from "./block-hashes.ts";
import { NODE_ENGINES, nodeEngineSchema, nodeIdSchema, nodeReportSchema } from "./node.ts";
import { MAX_SHARDS } from "../core/shard.ts";
import { billSchema, reservationSchema, routeBudgetSchema } from "./usage.ts";

/**
 * Why a node was chosen, as sent in `x-warmpath-decision`:
 * - `prefix-hit`: the node with the longest believed cached prefix.
 * - `hot-spill`: a node holds a longer prefix but is too loaded; sent to a less loaded node.
 * - `cold-spread`: no node holds a useful prefix; placed by consistent hashing with bounded loads.
 * - `session`: the session hint (`x-session-id` / `prompt_cache_key`) picked among equal choices.
 * - `pinned`: the request continues a stored response (`previous_response_id`) only its node holds.
 * - `balance`: a load-balancing baseline (round-robin, random, least-loaded) chose it.
 * - `retry`: the first node failed before the first byte; this is another node.
 * - `failover`: the nearest region could not take the request; another region served it.
 * - `stateless`: the region's Durable Object was unreachable or overloaded; the worker placed the
 *   request by rendezvous hashing over the nodes it knew (src/region/stateless.ts).
 */
export const decisionSchema = z.enum([
  "prefix-hit",
  "hot-spill",
  "cold-spread",
  "session",
  "pinned",
  "balance",
  "retry",
  "failover",
  "stateless",
]);

export type Decision = z.infer<typeof decisionSchema>;

/**
 * Token counts from an answer's `usage`. Cached tokens come from
 * `prompt_tokens_details.cached_tokens` (OpenAI, vLLM, SGLang) or llama.cpp's `timings.cache_n`;
 * absent when the engine did not report them (vLLM without prompt-token details), which is not
 * the same as none cached and is never learned from.
 */
export const usageSchema = z.object({
  promptTokens: z.number().int().min(0),
  cachedTokens: z.number().int().min(0).optional(),
  completionTokens: z.number().int().min(0),
});

export type Usage = z.infer<typeof usageSchema>;

/** A stored response's id as the region keys it: `tenant:resp_...`. */
export const responseIdSchema = z.string().min(1).max(320);

/**
 * A request's priority class (docs/ADMISSION.md): the region's queue releases interactive before
 * standard before batch, and a lower class keeps off nodes with a queue while a higher one is
 * active, so batch absorbs shedding first. A tenant's class is configured (`tenants[].priority`,
 * default `standard`); a request may lower its own with `x-warmpath-priority`, never raise it.
 */
export const PRIORITY_CLASSES = ["interactive", "standard", "batch"] as const;
export const priorityClassSchema = z.enum(PRIORITY_CLASSES);
export type PriorityClass = z.infer<typeof priorityClassSchema>;

/** The longest time-to-first-token objective a request may carry: an hour (a longer one is no objective). */
export const MAX_OBJECTIVE_MS = 3_600_000;

/** Why a request's class was lowered (src/core/region/tenant-demand.ts): its tenant is over its share of the demand, or past its commitment. */
export const demotionSchema = z.enum(["share", "commitment", "growth"]);
export type Demotion = z.infer<typeof demotionSchema>;

/** The largest commitment a tenant may be given: a billion prompt tokens a minute (past any region's prefill). */
export const MAX_COMMITTED_TOKENS_PER_MINUTE = 1_000_000_000;

/** Why a region shed a request it could have placed (reason `shed`): see RouteResult. */
export const shedReasonSchema = z.enum(["objective", "deadline", "queue-full"]);
export type ShedReason = z.infer<typeof shedReasonSchema>;

/** A shard's number within its region (0 .. shards - 1). */
const shardIndexSchema = z
  .number()
  .int()
  .min(0)
  .max(MAX_SHARDS - 1);

/**
 * What a shard of a sharded region tells the others through the region's load exchange, per
 * node: the uncached prefill it has queued there and its recent prefill, in tokens, and, for a
 * node whose places are known, its requests in flight there (ShardLoad in src/core/node-load.ts).
 */
export const shardLoadsSchema = z.record(
  nodeIdSchema,
  z.strictObject({
    queued: z.number().min(0).max(1e12),
    recent: z.number().min(0).max(1e12),
    inflight: z.number().int().min(0).max(1e9).optional(),
  }),
);

export type ShardLoads = z.infer<typeof shardLoadsSchema>;

/**
 * The node reports a sharded region's exchange accepted since a shard last asked: the exchange
 * ingests every report of the region once, and each shard takes the nodes' state from here rather
 * than from a report of its own (durable-objects/region.ts). `epoch` names the exchange's
 * instance: a shard whose `since` is from another instance takes the whole feed again.
 */
export const nodeFeedSchema = z.object({
  epoch: z.string().min(1).max(64),
  version: z.number().int().min(0),
  reports: z.array(nodeReportSchema).max(4096),
  removed: z.array(nodeIdSchema).max(4096),
});

export type NodeFeed = z.infer<typeof nodeFeedSchema>;

/** What a shard sends the exchange: its load, and where it is in the node feed. */
export const exchangeRequestSchema = z.object({
  shard: shardIndexSchema,
  load: shardLoadsSchema,
  feed: z.object({ epoch: z.string().max(64), version: z.number().int().min(0) }).optional(),
});

export type ExchangeRequest = z.infer<typeof exchangeRequestSchema>;

/** The exchange's answer: the other shards' summed load, the node reports the shard has not seen, and the region's report rate. */
export interface ExchangeAnswer {
  loads: ShardLoads;
  feed: NodeFeed;
  /** Node reports a second the exchange ingests: the more, the less room for the shards' exchanges. */
  reportsPerSecond: number;
}

export const routeRequestSchema = z.object({
  requestId: z.string().min(1).max(128),
  model: z.string().min(1).max(256),
  /** Prefix block hashes (16 hex characters each), first block first. */
  hashes: blockHashesSchema,
  /** Estimated prompt tokens. */
  promptTokens: z.number().int().min(0),
  /** Session or user key: a hint for warmpath, the pin for sticky sessions. */
  sessionKey: z.string().max(1024).optional(),
  /**
   * What the request's budget hold is kept under (src/core/usage/reservations.ts): drawn by the
   * region worker for each request it is dispatched, and carried by its retries and continuations,
   * which take up the same hold. Not the request id: that is the client's `x-request-id` when it
   * sent one, which its other requests may repeat (each admitted on one hold, concurrent requests
   * sharing an id overran the budget by all but one of them). Absent (an older region worker): the
   * request id.
   */
  holdKey: z.string().min(1).max(64).optional(),
  /** Nodes already tried for this request (a retry). */
  exclude: z.array(nodeIdSchema).max(16).optional(),
  /** It continues a stream another node of the region failed mid-way (not a retry: the client has part of the answer). */
  continuation: z.boolean().optional(),
  /** Only nodes running one of these engines (a node that reports none is `other`): a stream's continuation. */
  engines: z.array(nodeEngineSchema).max(NODE_ENGINES.length).optional(),
  /** The tenant's id (never its key), for per-tenant counters. */
  tenant: z.string().min(1).max(64).optional(),
  /** The nearer region that could not take the request: this one is its failover. */
  failoverFrom: z.string().min(1).max(64).optional(),
  /** The tenant's weight for its fair share of the region (configuration, default 1). */
  tenantWeight: z.number().positive().max(1_000).optional(),
  /** The tenant's committed prompt tokens a minute in each region (configuration; absent: judged by its share of the demand). */
  committedTokensPerMinute: z.number().int().positive().max(MAX_COMMITTED_TOKENS_PER_MINUTE).optional(),
  /** The stored response (Responses API) this request continues, scoped by tenant: only its node holds it. */
  previousResponseId: responseIdSchema.optional(),
  /**
   * A nearer region was saturated and would start this request after this many seconds, less the
   * extra round trip to this one: take it only if this region can start it sooner.
   */
  waitToBeatSeconds: z.number().min(0).max(86_400).optional(),
  /** Which of the region's shards this object is (src/core/shard.ts); absent for an unsharded region. */
  shard: shardIndexSchema.optional(),
  /** The tenant's rate limits (configuration), spent in this region when it places the request. */
  tenantLimits: z
    .object({
      requestsPerMinute: z.number().int().positive().optional(),
      promptTokensPerMinute: z.number().int().positive().optional(),
    })
    .optional(),
  /** The tenant's budget (configuration): refused here, before anything else, once it is spent over every region (docs/USAGE.md). */
  budget: routeBudgetSchema.optional(),
  /**
   * With `budget`: what the request holds against it until its bill settles it (docs/USAGE.md,
   * src/core/usage/reservations.ts). A retry or a continuation carries neither: it is the same
   * request, and keeps the hold its first placement took in this object. Absent with a budget (an
   * older worker): it holds nothing.
   */
  reservation: reservationSchema.optional(),
  /** Its priority class (the tenant's, lowered by the request's header). Default `standard`. */
  priority: priorityClassSchema.optional(),
  /** The tenant's configured time-to-first-token objective (ms); absent: the region's default (settings.admission). */
  objectiveMs: z.number().int().min(1).max(MAX_OBJECTIVE_MS).optional(),
  /** The request's own objective (`x-warmpath-ttft-objective-ms`): bounded by the tenant's (or the default) in the region. */
  requestObjectiveMs: z.number().int().min(1).max(MAX_OBJECTIVE_MS).optional(),
  /** Time already spent on it before this region (a failover: the nearer region's answer and the extra round trip), ms. */
  spentMs: z.number().int().min(0).max(MAX_OBJECTIVE_MS).optional(),
});

export type RouteRequest = z.infer<typeof routeRequestSchema>;

/** The ticket of a dispatched request: handed back with its first byte and its completion. */
const ticketSchema = z.string().min(1).max(64);

/** Candidates listed in a decision's log line: enough to see why, bounded however large the region. */
export const MAX_CONSIDERED = 8;

/** One node a request could have gone to, as the region saw it when it decided. */
export const consideredSchema = z.object({
  node: nodeIdSchema,
  /** Believed cached prefix, in blocks. */
  matchBlocks: z.number().int().min(0),
  /** Modelled uncached prefill tokens queued ahead. */
  workAheadTokens: z.number().min(0),
  /** The load model's estimated time to first token there. */
  estimatedTtftMs: z.number().min(0),
  inflight: z.number().int().min(0),
  /** Age of the node's last load report, or null before its first. */
  reportAgeMs: z.number().min(0).nullable(),
  /** The part of the estimate that is a wait for a place among the node's running requests (src/core/node-load.ts slotWaitMs); absent when there is none. */
  slotWaitMs: z.number().min(0).optional(),
});

export type Considered = z.infer<typeof consideredSchema>;

/** One rate limit after a request: what OpenAI's `x-ratelimit-*` headers report. */
const limitStateSchema = z.object({
  limit: z.number().min(0),
  remaining: z.number().min(0),
  resetSeconds: z.number().min(0),
});

/** The tenant's rate limits in the region that answered, when it has any. */
export const rateLimitStateSchema = z.object({
  requests: limitStateSchema.optional(),
  tokens: limitStateSchema.optional(),
});

export type RateLimitState = z.infer<typeof rateLimitStateSchema>;

/** A placement (`ok: true`), or why the region cannot take the request (another region may). */
const routeResultSchema = z.discriminatedUnion("ok", [
  z.object({
    ok: z.literal(true),
    ticket: ticketSchema,
    nodeId: nodeIdSchema,
    url: z.string(),
    /** The node's engine, as reported or configured. */
    engine: nodeEngineSchema.optional(),
    decision: decisionSchema,
    policy: z.string(),
    matchBlocks: z.number().int().min(0),
    totalBlocks: z.number().int().min(0),
    predictedCachedTokens: z.number().min(0),
    workAheadTokens: z.number().min(0),
    estimatedTtftMs: z.number().min(0),
    candidates: z.number().int().min(0),
    /** Nodes this request was kept off because they are held for the region's other tenants (fair-share.ts); 0 mostly. */
    heldForOthers: z.number().int().min(0),
    rateLimit: rateLimitStateSchema.optional(),
    /** The candidates with the soonest estimated first token (the chosen one always among them), for the decision log. */
    considered: z.array(consideredSchema).max(MAX_CONSIDERED + 1),
    /** Its priority class, as the region applied it (absent: placed without the region's object). */
    priority: priorityClassSchema.optional(),
    /** Its time-to-first-token objective (ms), as the region applied it (0: admission off; absent: placed without the object). */
    objectiveMs: z.number().min(0).optional(),
    /** How long it waited in the region's queue before it was placed (ms; 0: placed on arrival). */
    queuedMs: z.number().min(0).optional(),
    /** Its class was lowered because its tenant floods (`share`: over its share of the demand) or is past its commitment (`commitment`): tenant-demand.ts. */
    demoted: demotionSchema.optional(),
  }),
  z.object({
    ok: z.literal(false),
    /** `over-share`: the tenant is over its fair share of a contended region (fair-share.ts); another region may take it, else 429. */
    /** `rate-limited`: the tenant spent its requests or tokens per minute (rate-budget.ts): 429 at once, no other region. */
    /** `over-budget`: the tenant spent its budget over every region (src/core/usage/spend.ts): 429 `insufficient_quota` at once, no other region. */
    /** `shed`: no node can give it its first token within its objective, even after the region's queue (docs/ADMISSION.md): another region may, else 429. */
    /** `unknown-response`: it continues a stored response (`previousResponseId`) this region holds for no such tenant and id: never sent to a node (docs/API.md). */
    reason: z.enum(["no-node", "saturated", "over-share", "rate-limited", "over-budget", "shed", "unknown-response"]),
    /** With `shed`: at arrival it could not be met (`objective`), its deadline passed while queued (`deadline`), or the queue was full (`queue-full`). */
    shed: shedReasonSchema.optional(),
    /** With `shed`: its class and objective, and how long it was queued (ms), for the decision log. */
    priority: priorityClassSchema.optional(),
    objectiveMs: z.number().min(0).optional(),
    queuedMs: z.number().min(0).optional(),
    /** With `shed` at arrival (`objective`): the soonest first token the region predicted for it, after its queue (ms from its arrival here), past what its objective had left (`objectiveMs` less the time spent before, e.g. in a region it failed over from). */
    estimatedTtftMs: z.number().min(0).optional(),
    /** With `shed`: why its class had been lowered, if it had (its tenant floods, or is past its commitment); with `over-share`: `commitment` when the tenant is past its commitment rather than over its share. */
    demoted: demotionSchema.optional(),
    message: z.string(),
    retryAfterSeconds: z.number().min(0),
    /** `saturated`: the shortest modelled wait of the region's nodes (s), for the next region to beat. */
    waitSeconds: z.number().min(0).optional(),
    rateLimit: rateLimitStateSchema.optional(),
  }),
]);

export type RouteResult = z.infer<typeof routeResultSchema>;

/** Why a node failed a request before its first byte (what made the worker try another). */
export const failureReasonSchema = z.enum(["timeout", "connection", "http-429", "http-5xx", "empty-body", "redirect"]);

export type FailureReason = z.infer<typeof failureReasonSchema>;

/** How a node's stream failed after its first byte (src/proxy/relay.ts). */
export const streamFailureSchema = z.enum(["connection", "idle-timeout", "truncated", "error-event", "malformed", "deadline"]);
export type StreamFailureKind = z.infer<typeof streamFailureSchema>;

/**
 * What became of a stream that failed after its first byte (src/region/continue.ts): `continued`
 * on another node; `finished` (the node had sent its finish reason: only the terminator was
 * missing); not continued because the request or the stream could not be continued exactly
 * (`not-continuable`), the request's continuations were spent (`limit`) or its deadline near
 * (`deadline`), no node could take it (`no-node`), or every node tried failed (`failed`).
 */
export const continuationOutcomeSchema = z.enum(["continued", "finished", "not-continuable", "limit", "deadline", "no-node", "failed"]);
export type ContinuationOutcome = z.infer<typeof continuationOutcomeSchema>;

/** The longest a request lives (a day): no first byte is reported further back than that. */
const MAX_FIRST_BYTE_AGO_MS = 86_400_000;

/** What the worker learned about a request's outcome. */
export const completionOutcomeSchema = z.object({
  /**
   * `ok`: answered; `refused`: the node answered with a client error (4xx, e.g. a context-length
   * error), so it computed nothing; `failed`: the node failed before the first byte;
   * `stream-error`: failed after it; `cancelled`: the client went away.
   */
  status: z.enum(["ok", "refused", "failed", "stream-error", "cancelled"]),
  /** With `failed`: why. */
  reason: failureReasonSchema.optional(),
  /** From the answer's `usage`, when present. */
  usage: usageSchema.optional(),
  /**
   * A non-streamed answer's first byte, reported with its completion instead of by a call of its
   * own: how long before the completion it arrived (ms, on the worker's clock). Its whole body
   * follows the first byte at once, so a separate call would only cost the object a request.
   */
  firstByteMsAgo: z.number().int().min(0).max(MAX_FIRST_BYTE_AGO_MS).optional(),
  /** With `stream-error`: how the stream failed, and whether another node continued it. */
  continuation: z.object({ reason: streamFailureSchema, outcome: continuationOutcomeSchema }).optional(),
  /** The request's usage for the ledger, on the completion of the node that answered it last (src/region/bill.ts). */
  bill: billSchema.optional(),
});

export type CompletionOutcome = z.infer<typeof completionOutcomeSchema>;

/** Whether the node computed the request (it neither refused it nor failed before its first byte): only then was a prediction used. */
export function nodeComputed(outcome: CompletionOutcome): boolean {
  return outcome.status !== "failed" && outcome.status !== "refused";
}
