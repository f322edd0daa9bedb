/**
 * Counters per node: what operators read (in the snapshot) to see where recomputation happens,
 * kept apart from the routing state so that counting never influences a decision.
 */
import type { CompletionOutcome } from "../../contracts/routing.ts";
import { DECISIONS, type Decision } from "../policies/types.ts";

export interface NodeMetrics {
  routed: number;
  decisions: Record<Decision, number>;
  completed: number;
  failed: number;
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
  /** Sum of dispatch-to-first-byte times, for a mean. */
  firstByteMsSum: number;
  firstByteCount: number;
}

export function emptyMetrics(): NodeMetrics {
  return {
    routed: 0,
    decisions: Object.fromEntries(DECISIONS.map((d) => [d, 0])) as Record<Decision, number>,
    completed: 0,
    failed: 0,
    streamErrors: 0,
    cancelled: 0,
    promptTokens: 0,
    predictedCachedTokens: 0,
    measuredRequests: 0,
    measuredPromptTokens: 0,
    measuredCachedTokens: 0,
    completionTokens: 0,
    firstByteMsSum: 0,
    firstByteCount: 0,
  };
}

export function countRouted(m: NodeMetrics, decision: Decision, promptTokens: number, predictedCachedTokens: number): void {
  m.routed++;
  m.decisions[decision]++;
  m.promptTokens += promptTokens;
  m.predictedCachedTokens += predictedCachedTokens;
}

export function countFirstByte(m: NodeMetrics, waitMs: number): void {
  m.firstByteMsSum += waitMs;
  m.firstByteCount++;
}

export function countOutcome(m: NodeMetrics, outcome: CompletionOutcome): void {
  if (outcome.status === "failed") m.failed++;
  else if (outcome.status === "ok") m.completed++;
  else if (outcome.status === "stream-error") m.streamErrors++;
  else m.cancelled++;
  if (outcome.usage) {
    m.measuredRequests++;
    m.measuredPromptTokens += outcome.usage.promptTokens;
    m.measuredCachedTokens += outcome.usage.cachedTokens;
    m.completionTokens += outcome.usage.completionTokens;
  }
}
