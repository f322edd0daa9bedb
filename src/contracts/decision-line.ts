/**
 * The decision log's lines (docs/OBSERVABILITY.md, "Decision log"): one `request` line per request,
 * written by the region worker (src/proxy/decision-log.ts, built in src/region/respond.ts), and one
 * `stream_continued` line per continuation (src/region/continue.ts). The writer types its lines with
 * the types derived here; the readers (scripts/faults/, scripts/llama/midstream.ts, bench/e2e/run.ts,
 * bench/goodput-live/run.ts) parse the router's output with {@link parseLogLine}, so a field renamed
 * on one side fails the other's type check or parse instead of reading as absent.
 *
 * The writer does not parse its own lines (one per request on the hot path): the types keep it to
 * the contract. Objects are not strict, so a reader of an older contract still reads a newer line.
 */
import { z } from "zod";
import {
  MAX_CONSIDERED,
  consideredSchema,
  continuationOutcomeSchema,
  decisionSchema,
  demotionSchema,
  priorityClassSchema,
  streamFailureSchema,
  usageSchema,
} from "./routing.ts";

/**
 * The longest router output line a reader parses (characters): a decision line with its
 * {@link MAX_CONSIDERED} candidates and a few attempts and continuations is ~1-3 KB, so 64 KiB is far
 * past any real one and bounds what a reader holds for a line it then refuses.
 */
export const MAX_LOG_LINE_CHARS = 65_536;

/** Why a node's usage was not billed (src/proxy/usage-check.ts; the line's `usage_rejected.reason`). */
const usageRejectionSchema = z.enum([
  "not-counts",
  "cached-over-prompt",
  "over-max-tokens",
  "over-relayed",
  "under-relayed",
  "prompt-over-estimate",
  "prompt-under-estimate",
]);
export type UsageRejection = z.infer<typeof usageRejectionSchema>;

/** One continuation (src/region/continue.ts): the failed node, how it failed, tokens carried over, what became of it. */
const continuationLogSchema = z.object({
  /** The node that failed. */
  node: z.string(),
  reason: streamFailureSchema,
  /** Completion tokens the client already had (measured or estimated), carried into the new prompt. */
  tokens_carried: z.number(),
  outcome: continuationOutcomeSchema,
  /** Why not, when the request or its stream could not be continued. */
  detail: z.string().optional(),
  /** The node that carried on, and how long after the failure its first byte came (ms). */
  to_node: z.string().optional(),
  first_byte_ms: z.number().optional(),
});
export type ContinuationLog = z.infer<typeof continuationLogSchema>;

/** Why the region was not the nearest: a long prompt sent to one that holds its prefix (src/core/warm-region.ts). */
const regionChoiceSchema = z.object({
  reason: z.literal("warm-prefix"),
  nearest: z.string(),
  held_tokens: z.number(),
  nearest_held_tokens: z.number(),
  saved_ms: z.number(),
  extra_round_trip_ms: z.number(),
});

/** One request, as logged. Fields absent from a request no region could place are left out. */
const decisionLineSchema = z.object({
  event: z.literal("request"),
  request_id: z.string(),
  /** The request's W3C trace id (docs/OBSERVABILITY.md, "Traces"); set by recordDecision from its sinks. */
  trace_id: z.string().optional(),
  tenant: z.string(),
  model: z.string(),
  /** The HTTP status the client got. */
  status: z.number().int(),
  region: z.string().optional(),
  region_choice: regionChoiceSchema.optional(),
  /** The shard that decided, in a sharded region (src/core/shard.ts). */
  shard: z.number().int().optional(),
  node: z.string().optional(),
  decision: decisionSchema.optional(),
  policy: z.string().optional(),
  prefix_match_blocks: z.number().optional(),
  prefix_total_blocks: z.number().optional(),
  prompt_tokens_estimated: z.number(),
  predicted_cached_tokens: z.number().optional(),
  work_ahead_tokens: z.number().optional(),
  estimated_ttft_ms: z.number().optional(),
  /** Admission (docs/ADMISSION.md): its class, its time-to-first-token objective and the time it waited in the region's queue (ms). */
  priority: priorityClassSchema.optional(),
  objective_ms: z.number().optional(),
  queued_ms: z.number().optional(),
  /** Its class was lowered: its tenant floods (`share`) or is past its commitment (`commitment`). */
  demoted: demotionSchema.optional(),
  candidates: z.number().optional(),
  /** Nodes held for the region's other tenants that this request was kept off (fair share). */
  held_for_others: z.number().optional(),
  /** The best candidates as the region saw them: why this node and not another. */
  considered: z.array(consideredSchema).max(MAX_CONSIDERED).optional(),
  /** Every region and node tried, and how each attempt ended. */
  attempts: z.array(z.object({ region: z.string(), node: z.string().optional(), outcome: z.string() })),
  /**
   * A stream whose node failed after its first byte: each continuation. `usage` and
   * `measured_cached_tokens` are then the last node's.
   */
  continuations: z.array(continuationLogSchema).optional(),
  first_byte_ms: z.number().optional(),
  duration_ms: z.number(),
  /** How the answer's body ended (`ok`, `stream-error`, `cancelled`). */
  end: z.string().optional(),
  bytes: z.number().optional(),
  /** The node's usage, once checked (src/proxy/usage-check.ts): absent when it reported none or it was refused. */
  usage: usageSchema.optional(),
  /** A usage the node reported that was refused (and the estimate billed instead): why, the bound it broke, its figures. */
  usage_rejected: z.object({ reason: usageRejectionSchema, limit: z.number().optional(), reported: usageSchema }).optional(),
  /** The node's cached tokens, or null when it did not report them (not the same as none). */
  measured_cached_tokens: z.number().nullable(),
});
export type DecisionLine = z.infer<typeof decisionLineSchema>;

/** A continuation as it happens (src/region/continue.ts), before the request's decision line. */
const streamContinuedLineSchema = continuationLogSchema.extend({
  event: z.literal("stream_continued"),
  request_id: z.string(),
  region: z.string(),
});
export type StreamContinuedLine = z.infer<typeof streamContinuedLineSchema>;

/** A router output line read as JSON, and as the contract's line when its `event` names one. */
export interface ParsedLogLine {
  /** The line's JSON object (from its first `{`: workerd and wrangler prefix what the worker logs). */
  json: Record<string, unknown>;
  /** The line, when it is a `request` line that meets the contract. */
  decision?: DecisionLine;
  /** The line, when it is a `stream_continued` line that meets the contract. */
  continued?: StreamContinuedLine;
  /** When its `event` names one of the contract's lines but it does not meet it: the first problem. */
  invalid?: string;
}

/**
 * Reads one line of the router's output: undefined when it holds no JSON object (or is longer than
 * {@link MAX_LOG_LINE_CHARS}, or was cut short); else its JSON, parsed with the contract's schema
 * when its `event` is `request` or `stream_continued`.
 */
export function parseLogLine(text: string): ParsedLogLine | undefined {
  const at = text.indexOf("{");
  if (at < 0 || text.length - at > MAX_LOG_LINE_CHARS) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text.slice(at));
  } catch {
    return undefined;
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return undefined;
  const obj = json as Record<string, unknown>;
  const schema = obj.event === "request" ? decisionLineSchema : obj.event === "stream_continued" ? streamContinuedLineSchema : undefined;
  if (!schema) return { json: obj };
  const parsed = schema.safeParse(obj);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { json: obj, invalid: `${issue?.path.join(".") || "(line)"}: ${issue?.message ?? "invalid"}` };
  }
  return parsed.data.event === "request" ? { json: obj, decision: parsed.data } : { json: obj, continued: parsed.data };
}
