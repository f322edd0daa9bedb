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
import type { Demotion, PriorityClass, RouteRequest } from "../../contracts/routing.ts";
import type { Candidate } from "../policies/types.ts";
import { classRank } from "./admission-queue.ts";
import { estimateMs } from "./considered.ts";
import type { NodeEntry } from "./node-table.ts";

/** What a request's admission carries through the steps of a placement (and into its decision line). */
export interface Admitted {
  priority: PriorityClass;
  /** Its rank in the region's order (admission-queue.ts): its class's, or EXCESS_RANK. */
  rank: number;
  objectiveMs: number;
  queuedMs: number;
  /** Its class was lowered: its tenant floods, or is past its commitment (tenant-demand.ts). */
  demoted?: Demotion | undefined;
}

/** Admission off (or a retry, a continuation): what a placement says of its class and objective. */
export function notAdmitted(req: RouteRequest): Admitted {
  return { priority: req.priority ?? "standard", rank: classRank(req.priority), objectiveMs: 0, queuedMs: 0 };
}

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

/** {@link waitMs} without the wait for a place (node-load.ts slotWaitMs): the part that drains with time. */
export function prefillWaitMs(n: NodeEntry, now: number): number {
  return (n.load.prefillWorkAhead(now) * 1000) / n.load.prefillRate;
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
 * from now). Each node can take work from the region's queue once its own queue has drained to the
 * dispatch bound (`waitMs - boundMs` from now); from then on it drains the region's queue at its
 * rate. The work ahead is poured into the nodes in the order they free (water-filling), which
 * gives the time the request is released; it then waits at most the bound at its node and pays its
 * own prefill. Per node, not pooled: one node's long prefill delays only that node (pooling it
 * with the others shed short requests at half load that an idle node would have served in time).
 */
export function fluidTtftMs(
  nodes: ReadonlyArray<{ waitMs: number; prefillRate: number }>,
  aheadTokens: number,
  boundMs: number,
  ownMs: number,
): number {
  if (nodes.length === 0) return Infinity;
  const frees = nodes.map((n) => ({ at: Math.max(0, n.waitMs - boundMs), rate: n.prefillRate / 1000 })).sort((a, b) => a.at - b.at);
  // Release time T: the least T with sum over freed nodes of rate x (T - at) >= aheadTokens.
  let left = aheadTokens;
  let rate = 0;
  let t = frees[0]!.at;
  for (let i = 0; i < frees.length; i++) {
    rate += frees[i]!.rate;
    const next = i + 1 < frees.length ? frees[i + 1]!.at : Infinity;
    const span = rate > 0 ? left / rate : Infinity;
    if (t + span <= next) {
      t += span;
      left = 0;
      break;
    }
    left -= rate * (next - t);
    t = next;
  }
  const minWait = nodes.reduce((m, n) => Math.min(m, n.waitMs), Infinity);
  return t + Math.min(boundMs, minWait) + ownMs;
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
