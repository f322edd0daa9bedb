/**
 * The region object's side of its admission queue (src/core/region/admission-queue.ts, docs/ADMISSION.md):
 * each queued request's `route` call waits here for its answer, which the router decides when it
 * serves its queue. The queue is served on the events the object already receives (a first byte,
 * a completion, a node report, a new or removed node) and at the router's wake time by a timer:
 * a `route` call waiting keeps the object in memory, so a timer is enough while anything is
 * queued, and costs no billed request (an alarm would). The object's alarm serves the queue too,
 * as a backstop.
 */
import type { RouteResult } from "../src/contracts/routing.ts";
import type { RegionRouter } from "../src/core/region/index.ts";

/** A queued request's `route` call, waiting: its answer's resolver, and the dispatch's hold key it can be left by. */
interface Waiter {
  resolve: (result: RouteResult) => void;
  holdKey: string | undefined;
}

export class QueueWaiters {
  private readonly waiting = new Map<string, Waiter>();
  /** Waiting requests' queue ids by their dispatch's hold key (routing.ts `holdKey`, unique to a dispatch). */
  private readonly byHoldKey = new Map<string, string>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;

  /** Requests waiting for their answer. */
  get size(): number {
    return this.waiting.size;
  }

  /** The answer of a queued request, once the router decides it (or its caller leaves: {@link leave}). */
  wait(queueId: string, holdKey?: string): Promise<RouteResult> {
    if (holdKey !== undefined) this.byHoldKey.set(holdKey, queueId);
    return new Promise((resolve) => this.waiting.set(queueId, { resolve, holdKey }));
  }

  /**
   * The caller of the request waiting under `holdKey` went (its client left, src/region/place.ts):
   * the request leaves the router's queue, counted nowhere, and its call is answered `refusal`.
   * Returns whether it was waiting (false: it was placed or refused meanwhile, or never queued).
   */
  leave(router: RegionRouter, holdKey: string, refusal: Extract<RouteResult, { ok: false }>): boolean {
    const queueId = this.byHoldKey.get(holdKey);
    if (queueId === undefined) return false;
    const waiter = this.take(queueId);
    // Still queued in the router: a waiter is taken only by `serve`, in the same turn as the router
    // decided its entry, or here (so an entry the router decided is never cancelled and left unsettled).
    router.cancelQueued(queueId);
    waiter?.resolve(refusal);
    return waiter !== undefined;
  }

  /** The waiter of `queueId`, out of both maps. */
  private take(queueId: string): Waiter | undefined {
    const waiter = this.waiting.get(queueId);
    if (!waiter) return undefined;
    this.waiting.delete(queueId);
    if (waiter.holdKey !== undefined && this.byHoldKey.get(waiter.holdKey) === queueId) this.byHoldKey.delete(waiter.holdKey);
    return waiter;
  }

  /**
   * Serves the router's queue now: every request it places or refuses gets its answer. Then the
   * timer is set for the router's next wake time. Returns that time (undefined: nothing queued).
   */
  serve(router: RegionRouter, now: number): number | undefined {
    for (const { queueId, result } of router.drainQueue(now)) {
      this.take(queueId)?.resolve(result);
    }
    const at = router.queueWakeAt(now);
    if (at === undefined) {
      this.clearTimer();
      return undefined;
    }
    if (at < this.timerAt) {
      this.clearTimer();
      this.timerAt = at;
      this.timer = setTimeout(
        () => {
          this.timer = undefined;
          this.timerAt = Infinity;
          this.serve(router, Date.now());
        },
        Math.max(0, at - now),
      );
    }
    return at;
  }

  /** The router is gone (a new configuration): every waiting request is answered `refusal`, and the timer stops. */
  abandon(refusal: Extract<RouteResult, { ok: false }>): void {
    this.clearTimer();
    for (const { resolve } of this.waiting.values()) resolve(refusal);
    this.waiting.clear();
    this.byHoldKey.clear();
  }

  private clearTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }
}
