/**
 * Admission by prediction (docs/ADMISSION.md): which nodes can give a request its first token
 * within its objective, which of them may take it now, and when a request that none can take
 * should be shed at once rather than wait.
 *
 * The load model (node-load.ts) predicts a request's time to first token on a node as the
 * prefill queued ahead of it plus its own uncached prefill, at the node's learned rate. A request
 * is placed only on a node where that prediction meets its deadline, and only where the node's
 * queue is short (`dispatchWaitMs`): the prefill queued at a node is latency every later request
 * there pays and cannot be reordered, so past that the request waits in the region's queue
 * (admission-queue.ts), where a tighter deadline, a higher class or a lighter tenant can still go
 * first. A node whose queue is within that bound always takes the best queued request it can
 * serve in time, so a node is never left idle while the region holds work it could do.
 */
import type { Candidate } from "../policies/types.ts";
import { estimateMs } from "./considered.ts";
import type { NodeEntry } from "./node-table.ts";

/** A class below one that is active keeps off any node with prefill queued (a wait above this, ms: float noise of an empty queue). */
const IDLE_WAIT_MS = 1;

/**
 * How long a higher class counts as active after its last request: while it does, the classes
 * below it take only idle nodes (a steady interactive tenant stays active between its requests;
 * the same window as the fair share's, fair-share.ts ACTIVE_WINDOW_MS).
 */
export const CLASS_ACTIVE_MS = 10_000;

/** A node's modelled wait, ms: the prefill queued ahead of a request arriving now, at its rate. */
export function waitMs(n: NodeEntry, now: number): number {
  return (n.load.workAhead(now) * 1000) / n.load.prefillRate;
}

/**
 * The longest wait a node may have and still be given a request of this rank: the region's
 * dispatch bound, or, while a higher class is active, none (only an idle node), so that batch
 * never puts its long prefills ahead of an interactive request that arrives next.
 */
export function dispatchBoundMs(dispatchWaitMs: number, higherActive: boolean): number {
  return higherActive ? IDLE_WAIT_MS : dispatchWaitMs;
}

/** The indices of the candidates whose predicted first token meets `deadlineAt`. */
export function meetingDeadline(candidates: readonly Candidate[], now: number, deadlineAt: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < candidates.length; i++) if (now + estimateMs(candidates[i]!) <= deadlineAt) out.push(i);
  return out;
}

/** Its least own prefill (ms) and work (tokens) among the candidates: where most of it is believed cached, at the fastest rate. */
export function leastOwnCost(candidates: readonly Candidate[]): { ownMs: number; work: number } {
  let work = Infinity;
  let rate = 0;
  for (const c of candidates) {
    work = Math.min(work, c.uncachedTokens);
    rate = Math.max(rate, c.prefillRate);
  }
  if (!Number.isFinite(work)) return { ownMs: 0, work: 0 };
  return { ownMs: (work * 1000) / Math.max(1e-9, rate), work };
}

/**
 * When a request that waits behind `aheadTokens` of queued prefill would get its first token (ms
 * from now), if the region served it as a fluid: the prefill past each node's dispatch bound and
 * the work queued ahead of it drain at the nodes' summed rate, then it waits at most the bound at
 * a node and pays its own prefill. What decides whether it is worth queueing at all.
 */
export function fluidTtftMs(
  nodes: ReadonlyArray<{ waitMs: number; prefillRate: number }>,
  aheadTokens: number,
  boundMs: number,
  ownMs: number,
): number {
  let rate = 0;
  let backlog = aheadTokens;
  for (const n of nodes) {
    rate += n.prefillRate;
    backlog += (Math.max(0, n.waitMs - boundMs) * n.prefillRate) / 1000;
  }
  if (rate <= 0) return Infinity;
  const minWait = nodes.reduce((m, n) => Math.min(m, n.waitMs), Infinity);
  return (backlog * 1000) / rate + Math.min(boundMs, minWait) + ownMs;
}

/** Seconds a refused client should wait before trying again: until the region's queued prefill has drained, at least 1, at most 60. */
export function retryAfterSeconds(queuedTokens: number, nodes: ReadonlyArray<{ waitMs: number; prefillRate: number }>): number {
  let rate = 0;
  let backlog = queuedTokens;
  for (const n of nodes) {
    rate += n.prefillRate;
    backlog += (n.waitMs * n.prefillRate) / 1000;
  }
  const seconds = rate > 0 ? backlog / rate : 60;
  return Math.min(60, Math.max(1, Math.ceil(seconds)));
}
