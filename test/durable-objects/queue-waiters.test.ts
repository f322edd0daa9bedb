/**
 * The region object's waiting `route` calls (durable-objects/queue-waiters.ts): a call left by its
 * hold key is taken out of the router's queue and answered with the refusal, once; a call the
 * router already answered cannot be left; a configuration change answers every waiting call.
 */
import { describe, expect, it } from "vitest";
import { QueueWaiters } from "../../durable-objects/queue-waiters.ts";
import type { RegionRouter } from "../../src/core/region/index.ts";
import type { RouteResult } from "../../src/contracts/routing.ts";

const refusal = { ok: false, reason: "saturated", message: "gone", retryAfterSeconds: 0 } as const;

/** A router whose queue holds `queued`, and which decides what `decide` lists when served. */
function router(queued: Set<string>, decide: Array<{ queueId: string; result: RouteResult }> = []) {
  return {
    cancelQueued: (id: string) => queued.delete(id),
    drainQueue: () => decide.splice(0).filter((d) => queued.delete(d.queueId)),
    queueWakeAt: () => undefined,
  } as unknown as RegionRouter;
}

describe("QueueWaiters", () => {
  it("takes a call left by its hold key out of the router's queue and answers it with the refusal, once", async () => {
    const queued = new Set(["q1", "q2"]);
    const waiters = new QueueWaiters();
    const first = waiters.wait("q1", "hold-1");
    void waiters.wait("q2", "hold-2");
    expect(waiters.leave(router(queued), "hold-1", refusal)).toBe(true);
    expect(await first).toEqual(refusal);
    expect([...queued]).toEqual(["q2"]);
    expect(waiters.size).toBe(1);
    expect(waiters.leave(router(queued), "hold-1", refusal)).toBe(false);
    expect(waiters.leave(router(queued), "no-such-hold", refusal)).toBe(false);
  });

  it("cannot leave a call the router already answered", async () => {
    const queued = new Set(["q1"]);
    const placed = { queueId: "q1", result: { ok: true } as unknown as RouteResult };
    const r = router(queued, [placed]);
    const waiters = new QueueWaiters();
    const answer = waiters.wait("q1", "hold-1");
    waiters.serve(r, 0);
    expect(await answer).toBe(placed.result);
    expect(waiters.leave(r, "hold-1", refusal)).toBe(false);
  });

  it("answers every waiting call when the router is gone, and forgets their hold keys", async () => {
    const waiters = new QueueWaiters();
    const a = waiters.wait("q1", "hold-1");
    const b = waiters.wait("q2");
    waiters.abandon(refusal);
    expect(await Promise.all([a, b])).toEqual([refusal, refusal]);
    expect(waiters.leave(router(new Set(["q1"])), "hold-1", refusal)).toBe(false);
  });
});
