/**
 * What the decision log and the recent decisions show of a choice: the candidates with the soonest
 * estimated first token by the load model. Shared by every step of `RegionRouter.route` that
 * answers (a placement, or a refusal once candidates exist), so an operator sees the same view of
 * the nodes whether the request was placed or refused.
 */
import { MAX_CONSIDERED, type Considered } from "../../contracts/routing.ts";
import { ttftSeconds } from "../node-load.ts";
import type { Candidate, PolicyChoice } from "../policies/types.ts";
import type { NodeEntry } from "./node-table.ts";

/** The load model's time to first token on a candidate, ms, from the candidate's own figures. */
export function estimateMs(c: Candidate): number {
  return ttftSeconds(c.workAheadTokens, c.uncachedTokens, c.prefillRate) * 1000;
}

/**
 * The candidates with the soonest estimated first token by the load model (work ahead plus this
 * request's uncached tokens, at the node's rate), at most MAX_CONSIDERED, and the chosen one (none
 * for a rejection: -1): what the decision log and the recent decisions show of the choice.
 */
export function considered(candidates: readonly Candidate[], eligible: readonly NodeEntry[], chosen: number, now: number): Considered[] {
  const all = candidates.map((c, i) => ({ i, ms: estimateMs(c) }));
  all.sort((a, b) => a.ms - b.ms || a.i - b.i);
  const shown = all.slice(0, MAX_CONSIDERED);
  if (chosen >= 0 && !shown.some((x) => x.i === chosen)) shown.push(all.find((x) => x.i === chosen)!);
  return shown.map(({ i, ms }) => {
    const c = candidates[i]!;
    const report = eligible[i]!.load.lastReport;
    // As it stood when the request was decided (the candidate's), not after its own dispatch.
    const slotWaitMs = Math.round(c.slotWaitMs ?? 0);
    return {
      node: c.id,
      matchBlocks: c.matchBlocks,
      workAheadTokens: Math.round(c.workAheadTokens),
      estimatedTtftMs: Math.round(ms),
      inflight: c.inflight,
      reportAgeMs: report ? Math.max(0, now - report.at) : null,
      ...(slotWaitMs > 0 ? { slotWaitMs } : {}),
    };
  });
}

/** The load model's wait on a candidate before this request's own prefill starts, ms. */
export function estimateWaitMs(c: Candidate): number {
  return (c.workAheadTokens * 1000) / c.prefillRate;
}

/**
 * A choice among the nodes that meet a request's deadline, as the log explains it: a node holding
 * less of the prompt than one left out for its queue is a `hot-spill`, as the policy would have
 * called it had it seen that node.
 */
export function spilledPast(choice: PolicyChoice, meeting: readonly Candidate[], all: readonly Candidate[]): PolicyChoice {
  if (choice.decision !== "cold-spread" && choice.decision !== "prefix-hit") return choice;
  let deepest = 0;
  for (const c of all) deepest = Math.max(deepest, c.matchBlocks);
  return meeting[choice.index]!.matchBlocks < deepest ? { ...choice, decision: "hot-spill" } : choice;
}
