/**
 * Counters per node: what operators read (in the snapshot) to see where recomputation happens,
 * kept apart from the routing state so that counting never influences a decision.
 */
import { failureReasonSchema, type CompletionOutcome, type FailureReason } from "../../contracts/routing.ts";
import { DECISIONS, type Decision } from "../policies/types.ts";

export interface NodeMetrics {
  routed: number;
  decisions: Record<Decision, number>;
  completed: number;
  failed: number;
  /** Failures before the first byte, by why (each made the worker try another node). */
  failures: Record<FailureReason, number>;
  /** Cool-downs started (one per failure; each doubles while failures continue). */
  cooldowns: number;
  /** Answered with a client error (4xx): nothing computed, nothing learned, not predicted. */
  refused: number;
  streamErrors: number;
  cancelled: number;
  /** Estimated prompt tokens routed, and how many the router predicted cached. */
  promptTokens: number;
  predictedCachedTokens: number;
  /** From the nodes' own `usage` (prompt_tokens_details.cached_tokens). */
  measuredRequests: number;
  measuredPromptTokens: number;
  measuredCachedTokens: number;
  completionTokens: number;
  /**
   * Measured answers whose cached share the router had predicted to within one block (agreed),
   * of those compared: how far the index's belief matches the node's real cache.
   */
  compared: number;
  agreed: number;
  /** Times the node's answers showed evictions the index had not made, and base blocks forgotten for them. */
  corrections: number;
  correctedBlocks: number;
  /** Times the node was found to have lost its whole cache without a new boot id. */
  silentRestarts: number;
  /** Sum of dispatch-to-first-byte times, for a mean. */
  firstByteMsSum: number;
  firstByteCount: number;
  /** Histograms (counts per bucket of the bounds below, the last bucket unbounded). */
  firstByteHistogram: number[];
  durationHistogram: number[];
  durationMsSum: number;
  matchedBlocksHistogram: number[];
  matchedBlocksSum: number;
}

/** Upper bounds (ms) of the time-to-first-byte and duration histograms: 10 ms to 10 minutes. */
export const LATENCY_BUCKETS_MS = [10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 120_000, 600_000];
/** Upper bounds of the matched-prefix histogram, in blocks. */
export const MATCHED_BLOCKS_BUCKETS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1_024, 2_048];

function observe(histogram: number[], bounds: readonly number[], value: number): void {
  let i = 0;
  while (i < bounds.length && value > bounds[i]!) i++;
  histogram[i]!++;
}

export function emptyMetrics(): NodeMetrics {
  return {
    routed: 0,
    decisions: Object.fromEntries(DECISIONS.map((d) => [d, 0])) as Record<Decision, number>,
    completed: 0,
    failed: 0,
    failures: Object.fromEntries(failureReasonSchema.options.map((r) => [r, 0])) as Record<FailureReason, number>,
    cooldowns: 0,
    refused: 0,
    streamErrors: 0,
    cancelled: 0,
    promptTokens: 0,
    predictedCachedTokens: 0,
    measuredRequests: 0,
    measuredPromptTokens: 0,
    measuredCachedTokens: 0,
    completionTokens: 0,
    compared: 0,
    agreed: 0,
    corrections: 0,
    correctedBlocks: 0,
    silentRestarts: 0,
    firstByteMsSum: 0,
    firstByteCount: 0,
    firstByteHistogram: new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0),
    durationHistogram: new Array<number>(LATENCY_BUCKETS_MS.length + 1).fill(0),
    durationMsSum: 0,
    matchedBlocksHistogram: new Array<number>(MATCHED_BLOCKS_BUCKETS.length + 1).fill(0),
    matchedBlocksSum: 0,
  };
}

export function countRouted(m: NodeMetrics, decision: Decision, matchBlocks: number): void {
  observe(m.matchedBlocksHistogram, MATCHED_BLOCKS_BUCKETS, matchBlocks);
  m.matchedBlocksSum += matchBlocks;
  m.routed++;
  m.decisions[decision]++;
}

export function countFirstByte(m: NodeMetrics, waitMs: number): void {
  observe(m.firstByteHistogram, LATENCY_BUCKETS_MS, waitMs);
  m.firstByteMsSum += waitMs;
  m.firstByteCount++;
}

export function countOutcome(m: NodeMetrics, outcome: CompletionOutcome): void {
  if (outcome.status === "failed") {
    m.failed++;
    if (outcome.reason) m.failures[outcome.reason]++;
  } else if (outcome.status === "refused") m.refused++;
  else if (outcome.status === "ok") m.completed++;
  else if (outcome.status === "stream-error") m.streamErrors++;
  else m.cancelled++;
  if (outcome.usage) {
    m.completionTokens += outcome.usage.completionTokens;
    if (outcome.usage.cachedTokens !== undefined) {
      m.measuredRequests++;
      m.measuredPromptTokens += outcome.usage.promptTokens;
      m.measuredCachedTokens += outcome.usage.cachedTokens;
    }
  }
}

/**
 * A request the node computed (its completion says so): its prompt and the part of it predicted
 * cached are counted now, not when it was routed. A request the node refused or failed before
 * computing never used its prediction; counted at routing, it had to be taken back out, and the
 * exported counters (`warmpath_prompt_tokens_total`) went down, which Prometheus reads as a reset.
 */
export function countComputed(m: NodeMetrics, promptTokens: number, predictedCachedTokens: number): void {
  m.promptTokens += promptTokens;
  m.predictedCachedTokens += predictedCachedTokens;
}

/** One comparison of the router's predicted cached share of a prompt with the node's measured one. */
export function countAgreement(m: NodeMetrics, agreed: boolean): void {
  m.compared++;
  if (agreed) m.agreed++;
}

/** A request's time from dispatch to its completion (answered, failed or cancelled). */
export function countDuration(m: NodeMetrics, durationMs: number): void {
  observe(m.durationHistogram, LATENCY_BUCKETS_MS, durationMs);
  m.durationMsSum += durationMs;
}
