/** Admission by objective and the region's queue, driven in simulated time through RegionRouter.admit (docs/ADMISSION.md). */
import { describe, expect, it } from "vitest";
import { DEFAULT_REGION_SETTINGS, RegionRouter, type RegionSettings } from "../../src/core/region/index.ts";
import type { RouteRequest, RouteResult } from "../../src/contracts/routing.ts";
import type { RouteStep } from "../../src/core/region/router.ts";
import { objectiveMs } from "../../src/core/region/objective.ts";
import { DEFAULT_ADMISSION } from "../../src/core/region/admission-settings.ts";

const BLOCK = 128;
const settings = (admission: Partial<RegionSettings["admission"]> = {}, over: Partial<RegionSettings> = {}): RegionSettings => ({
  ...DEFAULT_REGION_SETTINGS,
  name: "r",
  blockTokens: BLOCK,
  // 10,000 tokens/s: 1,000 tokens are 100 ms of prefill.
  prefillTokensPerSecond: 10_000,
  ...over,
  admission: { ...DEFAULT_REGION_SETTINGS.admission, ...admission },
});
const spec = (id: string, now = 0) => ({
  id,
  url: `http://${id}`,
  models: ["m"],
  kvCapacityTokens: 1_000_000,
  static: false,
  lastSeen: now,
});
let seq = 0;
/** A cold prompt of `tokens` (its own hashes), for `tenant`. */
const req = (tokens: number, over: Partial<RouteRequest> = {}): RouteRequest => {
  const id = `p${++seq}`;
  const blocks = Math.max(1, Math.ceil(tokens / BLOCK));
  return {
    requestId: id,
    model: "m",
    hashes: Array.from({ length: blocks }, (_, i) => `${id}-${i}`.padEnd(16, "0").slice(0, 16)),
    promptTokens: tokens,
    ...over,
  };
};
function placed(step: RouteStep | RouteResult | undefined): Extract<RouteResult, { ok: true }> {
  if (!step || step.ok !== true) throw new Error(`not placed: ${JSON.stringify(step)}`);
  return step;
}
function queued(step: RouteStep): string {
  if (step.ok !== "queued") throw new Error(`not queued: ${JSON.stringify(step)}`);
  return step.queueId;
}
/**
 * The queued requests' names (`whose`, by queue id) in the order the region releases them from one
 * node: each placed one's first byte a second after the last, from the head's (`ticket`).
 */
function releaseOrder(
  r: RegionRouter,
  ticket: string,
  whose: ReadonlyMap<string, string>,
  demoted?: Map<string, string | undefined>,
): string[] {
  const order: string[] = [];
  for (let t = 1_000; order.length < whose.size && t < 60_000; t += 1_000) {
    r.firstByte(ticket, t);
    for (const o of r.drainQueue(t)) {
      order.push(whose.get(o.queueId)!);
      const p = placed(o.result);
      demoted?.set(whose.get(o.queueId)!, p.demoted);
      ticket = p.ticket;
    }
  }
  return order;
}
const inflight = (r: RegionRouter) => r.snapshot(0).nodes.reduce((s, n) => s + n.load.inflight, 0);

describe("objective", () => {
  it("is max(1 s, 5 x the cold prefill) by default, the tenant's when configured, and a request may only tighten it", () => {
    const a = DEFAULT_ADMISSION;
    expect(objectiveMs({ promptTokens: 1_000 }, 10_000, a)).toBe(1_000); // 100 ms cold: the 1 s floor
    expect(objectiveMs({ promptTokens: 20_000 }, 10_000, a)).toBe(10_000); // 2 s cold x 5
    expect(objectiveMs({ promptTokens: 20_000 }, 20_000, a)).toBe(5_000); // the learned rate prices it
    expect(objectiveMs({ promptTokens: 1_000, objectiveMs: 60_000 }, 10_000, a)).toBe(60_000);
    expect(objectiveMs({ promptTokens: 1_000, objectiveMs: 60_000, requestObjectiveMs: 2_000 }, 10_000, a)).toBe(2_000);
    expect(objectiveMs({ promptTokens: 1_000, requestObjectiveMs: 90_000 }, 10_000, a)).toBe(1_000); // never looser than the tenant's
  });
});

describe("admission", () => {
  it("places at once below saturation, with its class, objective and no time queued", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const p = placed(r.admit(req(2_000, { priority: "interactive" }), 0));
    expect(p).toMatchObject({ priority: "interactive", objectiveMs: 1_000, queuedMs: 0 });
    expect(r.queueDepth()).toEqual([0, 0, 0]);
  });

  it("sheds at once what cannot meet its objective even after the queue, with a Retry-After from the queue", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    placed(r.admit(req(50_000), 0)); // 5 s of prefill on the only node
    const shed = r.admit(req(1_000), 10); // its objective is 1 s
    expect(shed).toMatchObject({ ok: false, reason: "shed", shed: "objective", objectiveMs: 1_000 });
    if (shed.ok !== false) throw new Error("unreachable");
    expect(shed.retryAfterSeconds).toBeGreaterThanOrEqual(4);
    expect(shed.retryAfterSeconds).toBeLessThanOrEqual(6);
    // Why, for its refusal line: its first token predicted behind the 5 s of prefill (less the 10 ms gone).
    expect(shed.estimatedTtftMs).toBeGreaterThan(4_900);
    expect(shed.estimatedTtftMs).toBeLessThan(5_200);
    expect(shed.message).toContain(`first token predicted in ${Math.round(shed.estimatedTtftMs!)} ms`);
    expect(inflight(r)).toBe(1); // it never reached the node
    expect(r.snapshot(10).rejected.shed).toBe(1);
  });

  it("says why a shed request's class had been lowered: its tenant past its commitment", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    placed(r.admit(req(50_000, { tenant: "other" }), 0)); // 5 s of prefill on the only node
    const shed = r.admit(req(1_000, { tenant: "committed", committedTokensPerMinute: 1 }), 10);
    expect(shed).toMatchObject({ ok: false, reason: "shed", shed: "objective", priority: "batch", demoted: "commitment" });
    expect((shed as { message: string }).message).toContain("past its committed prompt tokens a minute");
    // The same request of a tenant without a commitment is shed as its own class, with nothing lowered.
    const plain = r.admit(req(1_000, { tenant: "plain" }), 20);
    expect(plain).toMatchObject({ ok: false, reason: "shed", priority: "standard" });
    expect((plain as { demoted?: string }).demoted).toBeUndefined();
  });

  it("says why a request ranks below its class when its tenant sends five times its usual rate, cached as it is: growth", () => {
    const r = new RegionRouter(settings());
    r.upsertNode({ ...spec("a"), static: true }, 0); // configured: never silent over the minutes below
    const answered = (q: RouteRequest, t: number) => {
      const p = placed(r.admit(q, t));
      r.firstByte(p.ticket, t);
      r.complete(p.ticket, { status: "ok" }, t);
      return p;
    };
    // rag asks the same 1,000-token document every time (cached after the first: no share of the
    // uncached demand to flood by); chat and news send 1,000 new tokens, each of weight 2 (rag counts
    // in the shares' weights, and two alike tenants must stay within 1.5x theirs). Each a request a second.
    const doc = req(1_000, { tenant: "rag" });
    let n = 0;
    const rag = (over: Partial<RouteRequest> = {}) => ({ ...doc, requestId: `rag${++n}`, ...over });
    let t = 0;
    for (; t < 180_000; t += 1_000) {
      answered(rag(), t);
      answered(req(1_000, { tenant: "chat", tenantWeight: 2 }), t + 300);
      answered(req(1_000, { tenant: "news", tenantWeight: 2 }), t + 600);
    }
    // rag at five times its rate for a minute, chat and news as before: rag's first requests fit in
    // 1.5x its usual 60,000 tokens a minute (its last minute's 60,000 decaying as it goes); then,
    // its last minute past that, at most its usual a minute keeps its class, and the rest is past it.
    const verdicts: Array<string | undefined> = [];
    for (let i = 0; i < 300; i++) {
      verdicts.push(answered(rag(), t + i * 200).demoted);
      if (i % 5 === 2) expect(answered(req(1_000, { tenant: "chat", tenantWeight: 2 }), t + i * 200 + 50).demoted).toBeUndefined();
      if (i % 5 === 4) expect(answered(req(1_000, { tenant: "news", tenantWeight: 2 }), t + i * 200 + 50).demoted).toBeUndefined();
    }
    t += 60_000;
    expect(verdicts.slice(0, 25).every((d) => d === undefined)).toBe(true);
    const grown = verdicts.slice(150).filter((d) => d === "growth").length;
    // Of 150, nearly all (133 here): its usual is a fifth of its rate, and what it kept in its first
    // seconds still fills its last minute (kept at 1.5x its usual, half of them would keep their class).
    expect(grown).toBeGreaterThan(110);
    expect(verdicts.every((d) => d === undefined || d === "growth")).toBe(true);
    // Shed past its usual, the answer says so; chat, steady, keeps its class.
    // 5 s of prefill on the only node, from a tenant new to the region (no history: not in the region's growth).
    placed(r.admit(req(50_000, { tenant: "other" }), t));
    // (Within its usual, one of them may still keep its class.)
    const sheds = [0, 1, 2, 3].map((i) => r.admit(rag({ objectiveMs: 1_000 }), t + 10 + i));
    for (const x of sheds) expect(x).toMatchObject({ ok: false, reason: "shed", shed: "objective" });
    const shed = sheds.find((x) => (x as { demoted?: string }).demoted !== undefined);
    expect(shed).toMatchObject({ demoted: "growth" });
    expect((shed as { message: string }).message).toContain("sending faster than it usually does");
    const steady = r.admit(req(1_000, { tenant: "news", tenantWeight: 2, objectiveMs: 1_000 }), t + 20);
    expect(steady).toMatchObject({ ok: false, reason: "shed" });
    expect((steady as { demoted?: string }).demoted).toBeUndefined();
  });

  it("holds what can still be served in time, and releases it when the node's first byte comes", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const big = placed(r.admit(req(10_000), 0)); // 1 s of prefill
    const id = queued(r.admit(req(5_000), 0)); // objective 2.5 s: it fits after the first
    expect(inflight(r)).toBe(1);
    expect(r.drainQueue(500)).toEqual([]); // the node is still busy: nothing decided
    r.firstByte(big.ticket, 1_000);
    const out = r.drainQueue(1_000);
    expect(out).toHaveLength(1);
    expect(out[0]!.queueId).toBe(id);
    expect(placed(out[0]!.result)).toMatchObject({ nodeId: "a", queuedMs: 1_000 });
    expect(inflight(r)).toBe(2);
  });

  it("drains the queue at once when the fleet speeds up: a node joins", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    placed(r.admit(req(20_000), 0));
    const ids = [queued(r.admit(req(8_000), 0)), queued(r.admit(req(8_000), 0))];
    r.upsertNode(spec("b"), 100);
    const out = r.drainQueue(100);
    // Only one fits within the new node's dispatch bound at once; the other follows its first byte.
    expect(out.map((o) => o.queueId)).toEqual([ids[0]]);
    expect(placed(out[0]!.result).nodeId).toBe("b");
    expect(r.queueDepth()).toEqual([0, 1, 0]);
  });

  it("drains when a prefill ends sooner than predicted", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const first = placed(r.admit(req(30_000), 0)); // 3 s predicted at the configured rate
    const id = queued(r.admit(req(6_000, { objectiveMs: 3_700 }), 0)); // in time after the first, as predicted
    // The node is faster than configured: its first byte comes after 300 ms.
    r.firstByte(first.ticket, 300);
    const out = r.drainQueue(300);
    expect(out.map((o) => o.queueId)).toEqual([id]);
    expect(out[0]!.result.ok).toBe(true);
  });

  it("a node running its most requests at once (max_running_requests) takes no more until one ends: shed, or held and released when a place frees", () => {
    /** Node a, 2 places, both taken by answers decoding; its requests have held their place 8 s after their first byte. */
    const full = (maxRunning: number | undefined) => {
      const r = new RegionRouter(settings());
      r.upsertNode({ ...spec("a"), maxRunning }, 0);
      const learn = placed(r.admit(req(1_000), 0));
      r.firstByte(learn.ticket, 100);
      r.complete(learn.ticket, { status: "ok" }, 8_100);
      const running = [placed(r.admit(req(1_000), 8_100)), placed(r.admit(req(1_000), 8_100))];
      for (const p of running) r.firstByte(p.ticket, 8_200);
      return { r, running };
    };
    // Places unknown: the prefill queue is empty, so it goes at once (and would wait in the engine's queue).
    expect(placed(full(undefined).r.admit(req(1_000), 8_300)).nodeId).toBe("a");
    // Known: a place frees every 8 s / 2 on average, past a 1 s objective: shed before it costs the node anything.
    const { r, running } = full(2);
    expect(r.snapshot(8_300).nodes[0]!.load).toMatchObject({ inflight: 2, slotWaitMs: 4_000, decodeMsMean: 8_000 });
    expect(r.admit(req(1_000), 8_300)).toMatchObject({ ok: false, reason: "shed", shed: "objective" });
    expect(inflight(r)).toBe(2);
    // With a looser objective it waits in the region's queue, and goes when an answer ends.
    const id = queued(r.admit(req(1_000, { objectiveMs: 10_000 }), 8_300));
    expect(r.drainQueue(9_000)).toEqual([]);
    r.complete(running[0]!.ticket, { status: "ok" }, 9_500);
    const out = r.drainQueue(9_500);
    expect(out.map((o) => o.queueId)).toEqual([id]);
    expect(placed(out[0]!.result)).toMatchObject({ nodeId: "a", queuedMs: 1_200 });
  });

  it("learns a place's hold only from answers streamed to their end: not a non-streamed answer's, a failure's or an abandoned one's", () => {
    const r = new RegionRouter(settings({ enabled: false }, { requestTimeoutMs: 60_000 }));
    r.configureNode({ ...spec("a", 0), maxRunning: 4 }, 0);
    const mean = () => r.snapshot(0).nodes[0]!.load.decodeMsMean;
    const one = (firstByteAt?: number) => {
      const p = placed(r.admit(req(1_000), 0));
      if (firstByteAt !== undefined) r.firstByte(p.ticket, firstByteAt);
      return p.ticket;
    };
    r.complete(one(), { status: "ok", firstByteMsAgo: 0 }, 5_000); // non-streamed: its first byte came with its end
    one(100); // never completed: abandoned when its ticket expires
    r.expire(70_000);
    expect(mean()).toBeUndefined();
    r.complete(one(70_100), { status: "ok" }, 78_100);
    expect(mean()).toBe(8_000);
    r.complete(one(80_000), { status: "stream-error" }, 180_000); // failed mid-stream: its end is not a decode's
    expect(mean()).toBe(8_000);
  });

  it("a node that restarted counts only its new boot's requests: those from before leave its counts alone when they end", () => {
    const r = new RegionRouter(settings({ enabled: false }));
    r.upsertNode({ ...spec("a"), bootId: "boot-1", maxRunning: 4 }, 0);
    const old = [placed(r.admit(req(1_000), 0)), placed(r.admit(req(1_000), 0))];
    r.firstByte(old[0]!.ticket, 100);
    r.upsertNode({ ...spec("a", 200), bootId: "boot-2", maxRunning: 4 }, 200); // restarted: its requests are gone
    const fresh = placed(r.admit(req(1_000), 300));
    for (const p of old) r.complete(p.ticket, { status: "ok" }, 400);
    expect(r.snapshot(400).nodes[0]!.load).toMatchObject({ inflight: 1, prefilling: 1 });
    expect(r.snapshot(400).nodes[0]!.load.decodeMsMean).toBeUndefined(); // nor is the old boot's answer a sample
    r.complete(fresh.ticket, { status: "ok" }, 500);
    expect(r.snapshot(500).nodes[0]!.load).toMatchObject({ inflight: 0, prefilling: 0 });
  });

  it("tells a sharded region's other objects its requests in flight on a node only where the node's places are known", () => {
    const loadsWith = (maxRunning: number | undefined) => {
      const r = new RegionRouter(settings({ enabled: false }));
      r.upsertNode({ ...spec("a"), maxRunning }, 0);
      placed(r.admit(req(1_000), 0));
      placed(r.admit(req(1_000), 0));
      return r.ownLoad(0).a;
    };
    expect(loadsWith(8)).toMatchObject({ inflight: 2 });
    expect(loadsWith(undefined)).not.toHaveProperty("inflight");
    expect(loadsWith(undefined)!.queued).toBeGreaterThan(0);
  });

  it("the queue's timer does not wait on a place: only a request's end frees one", () => {
    const r = new RegionRouter(settings());
    r.upsertNode({ ...spec("a"), maxRunning: 1 }, 0);
    const learn = placed(r.admit(req(1_000), 0));
    r.firstByte(learn.ticket, 100);
    r.complete(learn.ticket, { status: "ok" }, 6_100);
    const busy = placed(r.admit(req(1_000), 6_100));
    r.firstByte(busy.ticket, 6_200);
    queued(r.admit(req(1_000, { objectiveMs: 10_000 }), 6_300)); // a place in 6 s: in time, held in the region
    // Woken for its deadline (less its own prefill), not while the place it waits for is still taken.
    expect(r.queueWakeAt(6_300)).toBe(6_300 + 10_000 - 100);
  });

  it("the decision explains a wait for a place: the candidate's slotWaitMs, part of its estimated first token", () => {
    // Admission off: placed at once all the same, the wait shown.
    const r = new RegionRouter(settings({ enabled: false }));
    r.upsertNode({ ...spec("a"), maxRunning: 1 }, 0);
    const learn = placed(r.admit(req(1_000), 0));
    r.firstByte(learn.ticket, 100);
    r.complete(learn.ticket, { status: "ok" }, 6_100); // held its place 6 s after its first byte
    const busy = placed(r.admit(req(1_000), 6_100));
    r.firstByte(busy.ticket, 6_200);
    const next = placed(r.admit(req(1_000), 6_300));
    expect(next.considered).toEqual([expect.objectContaining({ node: "a", slotWaitMs: 6_000, estimatedTtftMs: 6_100 })]);
    expect(busy.considered?.[0]).not.toHaveProperty("slotWaitMs");
  });

  it("refuses a request whose deadline passes while queued, before it reaches a node", () => {
    // Placed only on an idle node, so nothing leaves the queue until the node's first byte.
    const r = new RegionRouter(settings({ dispatchWaitMs: 0 }));
    r.upsertNode(spec("a"), 0);
    placed(r.admit(req(20_000), 0)); // 2 s on the node
    const id = queued(r.admit(req(4_000, { objectiveMs: 2_400 }), 0)); // in time if the first ends as predicted
    const wake = r.queueWakeAt(0)!;
    expect(wake).toBeGreaterThan(0);
    expect(wake).toBeLessThanOrEqual(2_000);
    // Nothing happens on the node (its first byte is late): at 2 s its own 400 ms can no longer fit.
    const out = [...r.drainQueue(1_999), ...r.drainQueue(2_001)];
    expect(out).toHaveLength(1);
    expect(out[0]).toMatchObject({ queueId: id, result: { ok: false, reason: "shed", shed: "deadline" } });
    expect(inflight(r)).toBe(1);
  });

  it("releases by class: interactive before standard before batch", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const head = placed(r.admit(req(10_000, { priority: "interactive" }), 0));
    const long = { objectiveMs: 60_000 };
    const batch = queued(r.admit(req(2_000, { priority: "batch", ...long }), 1));
    const std = queued(r.admit(req(2_000, { priority: "standard", ...long }), 2));
    const inter = queued(r.admit(req(2_000, { priority: "interactive", ...long }), 3));
    const order: string[] = [];
    let ticket = head.ticket;
    for (let t = 1_000; order.length < 3; t += 1_000) {
      r.firstByte(ticket, t);
      for (const o of r.drainQueue(t)) {
        order.push(o.queueId);
        ticket = placed(o.result).ticket;
      }
    }
    expect(order).toEqual([inter, std, batch]);
  });

  it("shares releases between tenants by weight, whatever their arrival order", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    let ticket = placed(r.admit(req(10_000), 0)).ticket;
    const tenantOf = new Map<string, string>();
    // The heavy tenant (weight 3) queues 30 first, then the light one (weight 1) 30.
    for (const [tenant, weight] of [
      ["heavy", 3],
      ["light", 1],
    ] as const)
      for (let i = 0; i < 30; i++)
        tenantOf.set(queued(r.admit(req(1_000, { tenant, tenantWeight: weight, objectiveMs: 600_000 }), 1)), tenant);
    const released: string[] = [];
    for (let t = 1_000; released.length < 40; t += 200) {
      r.firstByte(ticket, t);
      const out = r.drainQueue(t);
      for (const o of out) {
        released.push(tenantOf.get(o.queueId)!);
        ticket = placed(o.result).ticket;
      }
    }
    const heavy = released.filter((t) => t === "heavy").length;
    expect(heavy).toBeGreaterThanOrEqual(28);
    expect(heavy).toBeLessThanOrEqual(32); // 3:1 of 40
  });

  it("refuses a tenant for its share only while it floods: a tenant ahead by class alone waits its turn", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const loose = { objectiveMs: 60_000 };
    // "fast" is interactive and placed; "slow" is batch and waits behind it: every prefill at the
    // node is fast's, so the fair share (which judges dispatched prefill) finds it over its share.
    placed(r.admit(req(30_000, { tenant: "fast", priority: "interactive", ...loose }), 0));
    queued(r.admit(req(30_000, { tenant: "slow", priority: "batch", ...loose }), 1));
    // Its demand is even with slow's: it is not flooding, so its next request queues, not refused.
    queued(r.admit(req(1_000, { tenant: "fast", priority: "interactive", ...loose }), 2));
    // Sending five times slow's demand, it floods: refused as over its share (another region, else 429).
    r.admit(req(60_000, { tenant: "fast", priority: "interactive", ...loose }), 3);
    r.admit(req(60_000, { tenant: "fast", priority: "interactive", ...loose }), 4);
    const flood = r.admit(req(1_000, { tenant: "fast", priority: "interactive", ...loose }), 5);
    expect(flood).toMatchObject({ ok: false, reason: "over-share" });
    expect((flood as { demoted?: string }).demoted).toBeUndefined();
    expect((flood as { message: string }).message).toContain("over its fair share");
  });

  it("refuses a tenant past its commitment as over its share when its nodes' queues are long, saying why", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const fast = { tenant: "fast", priority: "interactive" as const, objectiveMs: 60_000, committedTokensPerMinute: 1 };
    placed(r.admit(req(30_000, fast), 0));
    queued(r.admit(req(30_000, { tenant: "slow", priority: "batch", objectiveMs: 60_000 }), 1));
    r.admit(req(60_000, fast), 3);
    r.admit(req(60_000, fast), 4);
    const refused = r.admit(req(1_000, fast), 5);
    // The refusal names the commitment, so the edge's 429 says it instead of "over its fair share".
    expect(refused).toMatchObject({ ok: false, reason: "over-share", demoted: "commitment" });
    expect((refused as { message: string }).message).toContain("past its committed prompt tokens a minute");
  });

  it("releases a flooding tenant's requests after every class, the batch tenants' included", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const loose = { objectiveMs: 60_000 };
    const whose = new Map<string, string>();
    const ticket = placed(r.admit(req(10_000, { tenant: "other", priority: "standard", ...loose }), 0)).ticket;
    whose.set(queued(r.admit(req(2_000, { tenant: "bulk", priority: "batch", ...loose }), 1)), "bulk1");
    // "hog" asks for interactive: its first two are within its share of the demand (5,000 of
    // 17,000, 10,000 of 22,000); from its third (15,000 of 27,000: over 1.5x a third) it floods.
    for (let i = 1; i <= 5; i++)
      whose.set(queued(r.admit(req(5_000, { tenant: "hog", priority: "interactive", ...loose }), 1 + i)), `hog${i}`);
    // The batch tenant asks for batch within its share: even arriving after the flood, it goes first.
    whose.set(queued(r.admit(req(2_000, { tenant: "bulk", priority: "batch", ...loose }), 7)), "bulk2");
    const demoted = new Map<string, string | undefined>();
    expect(releaseOrder(r, ticket, whose, demoted)).toEqual(["hog1", "hog2", "bulk1", "bulk2", "hog3", "hog4", "hog5"]);
    // The decision says why: the flood's requests were demoted for its share, the others not.
    expect(Object.fromEntries(demoted)).toEqual({
      hog1: undefined,
      hog2: undefined,
      bulk1: undefined,
      bulk2: undefined,
      hog3: "share",
      hog4: "share",
      hog5: "share",
    });
  });

  it("keeps a flooding tenant's requests in their class up to what a peer of its class within its share asks (the peer floor)", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const loose = { objectiveMs: 600_000 };
    const std = (tenant: string) => ({ tenant, priority: "standard" as const, ...loose });
    const whose = new Map<string, string>();
    const ticket = placed(r.admit(req(10_000, std("other")), 0)).ticket;
    whose.set(queued(r.admit(req(2_000, { tenant: "bulk", priority: "batch", ...loose }), 1)), "bulk");
    whose.set(queued(r.admit(req(5_000, std("small")), 2)), "small1");
    whose.set(queued(r.admit(req(5_000, std("small")), 3)), "small2");
    // 40,000 at once: over everyone's share (1.5 x a quarter of 62,000), given nothing yet, more than
    // the floor (other's and small's 10,000): below batch. Then 4,000 and 4,000 fit in the floor; the
    // next is past it.
    whose.set(queued(r.admit(req(40_000, std("big")), 4)), "bigL");
    for (let i = 1; i <= 3; i++) whose.set(queued(r.admit(req(4_000, std("big")), 4 + i)), `big${i}`);
    const demoted = new Map<string, string | undefined>();
    const order = releaseOrder(r, ticket, whose, demoted);
    // Its two requests within the floor share the standard class with small's, by weight, ahead of batch.
    // (Batch and the demoted ones follow once the standard class is idle: not within this helper's minute.)
    expect(new Set(order.slice(0, 4))).toEqual(new Set(["small1", "small2", "big1", "big2"]));
    expect(order).not.toContain("bigL");
    expect(order).not.toContain("big3");
    for (const name of ["small1", "small2", "big1", "big2"]) expect(demoted.get(name)).toBeUndefined();
  });

  it("with commitments, releases a tenant's requests past its commitment after every tenant's committed ones, though it is within every share", () => {
    const run = (committed: boolean) => {
      const r = new RegionRouter(settings());
      r.upsertNode(spec("a"), 0);
      const loose = { objectiveMs: 60_000 };
      // bulk asks for batch and is sold 100,000 prompt tokens a minute; rag, standard, 10,000.
      const bulk = { tenant: "bulk", priority: "batch" as const, ...loose, ...(committed ? { committedTokensPerMinute: 100_000 } : {}) };
      const rag = { tenant: "rag", priority: "standard" as const, ...loose, ...(committed ? { committedTokensPerMinute: 10_000 } : {}) };
      const whose = new Map<string, string>();
      const ticket = placed(r.admit(req(10_000, { tenant: "other", priority: "standard", ...loose }), 0)).ticket;
      whose.set(queued(r.admit(req(20_000, bulk), 1)), "bulk1");
      // rag's uncached demand stays within its share of everyone's and of its peers' (at its third,
      // 15,000 of 45,000 and of 25,000): by shares it never floods. Against its commitment, its
      // first two fit, its third is within 1.5x it (and within its share), its fourth is past it.
      for (let i = 1; i <= 5; i++) whose.set(queued(r.admit(req(5_000, rag), 1 + i)), `rag${i}`);
      whose.set(queued(r.admit(req(20_000, bulk), 7)), "bulk2");
      const demoted = new Map<string, string | undefined>();
      const order = releaseOrder(r, ticket, whose, demoted);
      return { order, demoted: [...demoted].filter(([, d]) => d !== undefined) };
    };
    expect(run(false)).toEqual({ order: ["rag1", "rag2", "rag3", "rag4", "rag5", "bulk1", "bulk2"], demoted: [] });
    expect(run(true)).toEqual({
      order: ["rag1", "rag2", "rag3", "bulk1", "bulk2", "rag4", "rag5"],
      demoted: [
        ["rag4", "commitment"],
        ["rag5", "commitment"],
      ],
    });
  });

  it("keeps a tenant over its share of everyone's demand off the nodes held for the others while it has prefill on them, and holds nothing idle", () => {
    const held = (hogTokens: number, inFlight: boolean) => {
      const r = new RegionRouter(settings({}, { fairShareWaitSeconds: 0.5 }));
      for (const id of ["a", "b", "c"]) r.upsertNode(spec(id), 0);
      const done = (p: Extract<RouteResult, { ok: true }>, t: number) => {
        r.firstByte(p.ticket, t);
        r.complete(p.ticket, { status: "ok" }, t);
      };
      done(placed(r.admit(req(1_000, { tenant: "light", priority: "standard" }), 0)), 1);
      // Each of hog's requests ends before the next, but (with inFlight) the last: a short queue, within the bound.
      for (let t = 2; t < 12; t++) {
        const p = placed(r.admit(req(hogTokens, { tenant: "hog", priority: "standard" }), t));
        if (!inFlight || t < 11) done(p, t);
      }
      return placed(r.admit(req(hogTokens, { tenant: "hog", priority: "standard" }), 20)).heldForOthers;
    };
    // 11,000 of 12,000 tokens asked, one request on a node: over 1.5x half the demand, a node is held for "light".
    expect(held(1_000, true)).toBe(1);
    // The same demand with nothing on the nodes: holding a node from it would hold an idle node.
    expect(held(1_000, false)).toBe(0);
    // 110 of 1,110 tokens: within its share, nothing is held against it.
    expect(held(10, true)).toBe(0);
  });

  it("keeps a lower class off busy nodes while a higher class is active", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    placed(r.admit(req(2_000, { priority: "interactive" }), 0)); // 200 ms queued: within the dispatch bound
    // Standard would be placed behind 200 ms; with interactive active it waits for an idle node.
    queued(r.admit(req(2_000, { priority: "standard", objectiveMs: 60_000 }), 1));
    const alone = new RegionRouter(settings());
    alone.upsertNode(spec("a"), 0);
    placed(alone.admit(req(2_000, { priority: "standard" }), 0));
    placed(alone.admit(req(2_000, { priority: "standard", objectiveMs: 60_000 }), 1));
  });

  it("bounds the queue: a flood keeps to its share, batch makes room for interactive, and the last in rank is shed", () => {
    const r = new RegionRouter(settings({ maxQueued: 8 }));
    r.upsertNode(spec("a"), 0);
    placed(r.admit(req(10_000), 0));
    const long = { objectiveMs: 600_000 };
    const flood: string[] = [];
    for (let i = 0; i < 8; i++) flood.push(queued(r.admit(req(1_000, { tenant: "flood", ...long }), 1)));
    // Full of the flood's: one more of its own is shed; another tenant's takes the flood's last place.
    expect(r.admit(req(1_000, { tenant: "flood", ...long }), 2)).toMatchObject({ ok: false, reason: "shed", shed: "queue-full" });
    queued(r.admit(req(1_000, { tenant: "other", ...long }), 3));
    expect(r.drainQueue(3)).toEqual([{ queueId: flood[7], result: expect.objectContaining({ ok: false, shed: "queue-full" }) }]);
    // Batch is shed for interactive; batch itself cannot push anything out.
    const b = new RegionRouter(settings({ maxQueued: 2 }));
    b.upsertNode(spec("a"), 0);
    placed(b.admit(req(10_000), 0));
    const batch = [
      queued(b.admit(req(1_000, { priority: "batch", ...long }), 1)),
      queued(b.admit(req(1_000, { priority: "batch", ...long }), 1)),
    ];
    expect(b.admit(req(1_000, { priority: "batch", ...long }), 2)).toMatchObject({ ok: false, shed: "queue-full" });
    queued(b.admit(req(1_000, { priority: "interactive", ...long }), 3));
    expect(b.drainQueue(3).map((o) => o.queueId)).toEqual([batch[1]]);
    // Memory: a prompt of more blocks than the queue holds is shed, never queued.
    const m = new RegionRouter(settings({ maxQueuedBlocks: 10 }));
    m.upsertNode(spec("a"), 0);
    placed(m.admit(req(10_000), 0));
    expect(m.admit(req(20 * BLOCK, long), 1)).toMatchObject({ ok: false, shed: "queue-full" });
  });

  it("never holds what a node can take in time: a burst below capacity is all placed at once", () => {
    const r = new RegionRouter(settings());
    for (const id of ["a", "b", "c", "d"]) r.upsertNode(spec(id), 0);
    for (let i = 0; i < 4; i++) placed(r.admit(req(3_000), i));
    expect(r.queueDepth()).toEqual([0, 0, 0]);
  });

  it("with admission off, places everything at once as before", () => {
    const r = new RegionRouter(settings({ enabled: false }));
    r.upsertNode(spec("a"), 0);
    placed(r.admit(req(50_000), 0));
    expect(placed(r.admit(req(1_000), 0))).toMatchObject({ objectiveMs: 0, queuedMs: 0 });
  });

  it("refuses every queued request of a model whose last node left, each once, and leaves the queue empty", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    r.upsertNode({ ...spec("b"), models: ["other"] }, 0);
    placed(r.admit(req(100_000, { objectiveMs: 60_000 }), 0));
    const ids = [10, 20, 30].map((t) => queued(r.admit(req(1_000, { objectiveMs: 60_000 }), t)));
    r.removeNode("a");
    const out = r.drainQueue(50);
    // Each refused once (taking one out twice took the next of its lane with it, which then waited forever).
    expect(out.map((o) => o.queueId).sort()).toEqual([...ids].sort());
    expect(out.every((o) => !o.result.ok && o.result.reason === "no-node")).toBe(true);
    expect(r.queueDepth()).toEqual([0, 0, 0]);
    expect(r.snapshot(50).queue).toMatchObject({ blocks: 0 });
    expect(r.queueWakeAt(70_000)).toBeUndefined();
  });

  it("forgets a cancelled request", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const head = placed(r.admit(req(10_000), 0));
    const id = queued(r.admit(req(5_000), 0));
    expect(r.cancelQueued(id)).toBe(true);
    expect(r.cancelQueued(id)).toBe(false);
    r.firstByte(head.ticket, 1_000);
    expect(r.drainQueue(1_000)).toEqual([]);
    expect(r.queueWakeAt(1_000)).toBeUndefined();
  });

  it("counts answers within their objective, late and shed, by class and tenant, and the time queued", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const a = placed(r.admit(req(10_000, { tenant: "t", priority: "interactive" }), 0)); // objective 5 s
    const id = queued(r.admit(req(5_000, { tenant: "t" }), 0)); // objective 2.5 s
    r.admit(req(1_000, { tenant: "u", priority: "batch" }), 0); // shed: 1 s is out of reach
    r.firstByte(a.ticket, 900); // within
    const b = placed(r.drainQueue(900).find((o) => o.queueId === id)?.result);
    r.firstByte(b.ticket, 3_000); // late: 3 s from its arrival for 2.5 s
    const g = r.snapshot(3_000).goodput;
    expect(g.classes.interactive).toMatchObject({ placed: 1, within: 1, late: 0, queued: 0 });
    expect(g.classes.standard).toMatchObject({ placed: 1, within: 0, late: 1, queued: 1, queuedMs: 900 });
    expect(g.classes.batch.shed).toEqual({ objective: 1, deadline: 0, "queue-full": 0 });
    expect(g.tenants).toEqual({
      t: { within: 1, late: 1, shed: 0, demoted: { share: 0, commitment: 0, growth: 0 } },
      u: { within: 0, late: 0, shed: 1, demoted: { share: 0, commitment: 0, growth: 0 } },
    });
    expect(r.historyView(3_000).decisions.find((d) => d.decision === "shed")).toMatchObject({ priority: "batch", objectiveMs: 1_000 });
  });
});

describe("fluidTtftMs", () => {
  it("releases behind the work ahead as the nodes free, node by node", async () => {
    const { fluidTtftMs } = await import("../../src/core/region/admission.ts");
    const idle = { waitMs: 0, prefillRate: 10_000 };
    // One node busy for 8.5 s does not delay a request an idle node can take: 0 + own 100 ms.
    expect(fluidTtftMs([{ waitMs: 8_500, prefillRate: 10_000 }, idle], 0, 400, 100)).toBe(100);
    // Two nodes free at 1.6 s and 2.6 s (less the 400 ms bound): of 20,000 tokens ahead the first
    // takes 10,000 until 2.6 s, then both the other 10,000 at 20,000 tokens/s, 0.5 s: 3.1 s.
    const t = fluidTtftMs(
      [
        { waitMs: 2_000, prefillRate: 10_000 },
        { waitMs: 3_000, prefillRate: 10_000 },
      ],
      20_000,
      400,
      100,
    );
    expect(t).toBeCloseTo(3_100 + 400 + 100, 6);
  });
});
