/**
 * The decision log: one structured line per request (Workers Logs), and optionally the same
 * figures as a Workers Analytics Engine data point, so operators can query hit rate and wasted
 * prefill by tenant and region over time (docs/OBSERVABILITY.md, "Decision log" and "Analytics Engine").
 *
 * What goes in is ids and figures: the request id, the tenant's id (never its key), the model, the
 * region and node, the decision and the candidates weighed, tokens and timings. Never a prompt, a
 * key, a header or a node's answer: the line is built from routing results and usage counts only.
 *
 * The line's shape is a contract (src/contracts/decision-line.ts): its type is derived from the zod
 * schema the readers (scripts/faults/, scripts/llama/, bench/) parse it with.
 *
 * What a client can cause is bounded (docs/OBSERVABILITY.md, "Decision log"): a line of an answer
 * with a success status (the node computed it and the tenant is billed for it, so each line costs
 * its client tokens) is never dropped; a line of a node's own error (a 400 context-length error, a
 * bad parameter, a node's 5xx: the node computed nothing and nothing is billed, so a client can
 * cause as many as it sends) goes through the per-isolate limiter of log-limit.ts: at most
 * {@link ERROR_LINES_PER_SECOND} a second for each status, the rest counted in one
 * `decisions_suppressed` line a second.
 */
import type { DecisionLine } from "../contracts/decision-line.ts";
import { LogLimiter } from "./log-limit.ts";

/**
 * Decision lines a second per isolate for one error status (a node's own errors); the rest are
 * counted in a `decisions_suppressed` line. 20, as for refusal lines (~1-3 KB each: at most ~60 KB
 * a second per status, however fast a client sends requests that nodes reject).
 */
export const ERROR_LINES_PER_SECOND = 20;

/** The status from which a decision line is a node's own error, bounded; below it, never dropped. */
const ERROR_STATUS = 400;

/**
 * Whether the line is written: every request that did not end cleanly (an error status, a broken
 * or cancelled stream, a stream another node had to continue, a node's usage refused, no capacity) always; clean answers at the configured rate.
 */
export function shouldLog(line: DecisionLine, sampleRate: number, random: () => number): boolean {
  const clean =
    line.status < 400 &&
    (line.end === undefined || line.end === "ok") &&
    line.continuations === undefined &&
    line.usage_rejected === undefined;
  return !clean || random() < sampleRate;
}

/**
 * The Analytics Engine data point of a line. Sampling index: the tenant (Analytics Engine samples
 * per index value, so a quiet tenant keeps its points beside a loud one). Blob and double positions
 * are the schema the SQL in docs/OBSERVABILITY.md relies on; append, never reorder.
 */
export function dataPoint(line: DecisionLine): AnalyticsEngineDataPoint {
  const measured = line.measured_cached_tokens !== null && line.usage !== undefined;
  return {
    indexes: [line.tenant],
    blobs: [
      line.tenant, // blob1
      line.region ?? "", // blob2
      line.node ?? "", // blob3
      line.model, // blob4
      line.decision ?? "none", // blob5
      line.end ?? "none", // blob6
      line.policy ?? "", // blob7
      line.usage_rejected?.reason ?? "", // blob8: why the node's usage was refused (src/proxy/usage-check.ts), or empty
    ],
    doubles: [
      line.status, // double1
      line.prompt_tokens_estimated, // double2
      line.predicted_cached_tokens ?? 0, // double3
      measured ? 1 : 0, // double4: whether the node reported cached tokens
      measured ? line.usage!.promptTokens : 0, // double5
      measured ? line.measured_cached_tokens! : 0, // double6
      line.usage?.completionTokens ?? 0, // double7
      line.first_byte_ms ?? -1, // double8
      line.duration_ms, // double9
      line.prefix_match_blocks ?? 0, // double10
      line.prefix_total_blocks ?? 0, // double11
      line.attempts.length, // double12
    ],
  };
}

/** The dataset binding, when the deployment declares one (wrangler.toml `analytics_engine_datasets`). */
export interface DecisionSinks {
  dataset: AnalyticsEngineDataset | undefined;
  sampleRate: number;
  random: () => number;
  /** The request's trace: its id goes in the line, and `onLine` ends the worker's spans with the line's figures. */
  trace?: { traceId: string; onLine?: (line: DecisionLine) => void } | undefined;
}

/**
 * Whether a line that is to be written may be, under the bound on a node's own errors (module
 * comment): always for a success status; for an error status, within `limiter`'s lines a second
 * per status (this isolate's, {@link ERROR_LINES_PER_SECOND}, by default; a test passes its own).
 */
export function errorLineBound(
  limiter: LogLimiter = new LogLimiter("decisions_suppressed", ERROR_LINES_PER_SECOND),
): (line: Pick<DecisionLine, "status">, now: number) => boolean {
  return (line, now) => line.status < ERROR_STATUS || limiter.allow(String(line.status), now);
}

const withinLogBound = errorLineBound();

/**
 * Writes the line to the log (sampled, a node's own errors bounded) and the dataset (every request:
 * Analytics Engine samples itself).
 */
export function recordDecision(given: DecisionLine, sinks: DecisionSinks): void {
  // The trace id right after the request id, where a reader looks for ids.
  const { event, request_id, ...rest } = given;
  const line: DecisionLine = sinks.trace ? { event, request_id, trace_id: sinks.trace.traceId, ...rest } : given;
  if (shouldLog(line, sinks.sampleRate, sinks.random) && withinLogBound(line, Date.now())) console.log(JSON.stringify(line));
  try {
    sinks.dataset?.writeDataPoint(dataPoint(line));
  } catch (e) {
    // Analytics are best effort: a full or missing dataset must never fail a request.
    console.error(JSON.stringify({ event: "analytics_error", request_id: line.request_id, message: String(e) }));
  }
  sinks.trace?.onLine?.(line);
}
