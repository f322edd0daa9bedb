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

export class QueueWaiters {
  private readonly waiting = new Map<string, (result: RouteResult) => void>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;

  /** Requests waiting for their answer. */
  get size(): number {
    return this.waiting.size;
  }

  /** The answer of a queued request, once the router decides it. */
  wait(queueId: string): Promise<RouteResult> {
    return new Promise((resolve) => this.waiting.set(queueId, resolve));
  }

  /**
   * Serves the router's queue now: every request it places or refuses gets its answer. Then the
   * timer is set for the router's next wake time. Returns that time (undefined: nothing queued).
   */
  serve(router: RegionRouter, now: number): number | undefined {
    for (const { queueId, result } of router.drainQueue(now)) {
      const resolve = this.waiting.get(queueId);
      if (!resolve) continue;
      this.waiting.delete(queueId);
      resolve(result);
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
    for (const resolve of this.waiting.values()) resolve(refusal);
    this.waiting.clear();
  }

  private clearTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }
}
