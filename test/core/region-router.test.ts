/** RegionRouter: the pure state machine the Durable Object wraps and the benchmark drives. */
import { describe, expect, it } from "vitest";
import { DEFAULT_REGION_SETTINGS, RegionRouter, type RegionSettings } from "../../src/core/region/index.ts";

const settings = (over: Partial<RegionSettings> = {}): RegionSettings => ({
  ...DEFAULT_REGION_SETTINGS,
  name: "r",
  blockTokens: 128,
  ...over,
});

const spec = (id: string, now = 0) => ({ id, url: `http://${id}`, models: ["m"], kvCapacityTokens: 100_000, static: false, lastSeen: now });
const hashes = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}${i}`.padEnd(16, "0"));
const req = (p: string, over: object = {}) => ({ requestId: "x", model: "m", hashes: hashes(p, 20), promptTokens: 2_560, ...over });

describe("RegionRouter", () => {
  it("credits a dispatch, learns the prefix, and releases on completion", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    r.upsertNode(spec("b"), 0);
    const first = r.route(req("p"), 0);
    if (!first.ok) throw new Error(first.message);
    expect(first.decision).toBe("cold-spread");
    const snap = r.snapshot(0).nodes.find((n) => n.id === first.nodeId)!;
    expect(snap.load.inflight).toBe(1);
    expect(snap.load.workAheadTokens).toBe(2_560);
    r.firstByte(first.ticket, 100);
    expect(r.complete(first.ticket, { status: "ok", usage: { promptTokens: 2_600, cachedTokens: 0, completionTokens: 10 } }, 500)).toBe(
      true,
    );
    expect(r.complete(first.ticket, { status: "ok" }, 500)).toBe(false); // released once only
    const again = r.route(req("p"), 600);
    if (!again.ok) throw new Error(again.message);
    expect(again.nodeId).toBe(first.nodeId);
    expect(again.matchBlocks).toBe(20);
    const m = r.snapshot(600).nodes.find((n) => n.id === first.nodeId)!.metrics;
    expect(m.routed).toBe(2);
    expect(m.measuredPromptTokens).toBe(2_600);
    expect(m.firstByteCount).toBe(1);
  });

  it("excludes tried nodes and labels the retry, cools down a failing node", () => {
    const r = new RegionRouter(settings({ failureCooldownMs: 1_000 }));
    r.upsertNode(spec("a"), 0);
    r.upsertNode(spec("b"), 0);
    const first = r.route(req("q"), 0);
    if (!first.ok) throw new Error();
    r.complete(first.ticket, { status: "failed" }, 10);
    const retry = r.route(req("q", { exclude: [first.nodeId] }), 10);
    if (!retry.ok) throw new Error();
    expect(retry.nodeId).not.toBe(first.nodeId);
    expect(retry.decision).toBe("retry");
    // The failed node is cooling down: even unexcluded, it is not chosen until the cool-down ends.
    const snap = r.snapshot(20).nodes.find((n) => n.id === first.nodeId)!;
    expect(snap.available).toBe(false);
    expect(r.snapshot(1_100).nodes.find((n) => n.id === first.nodeId)!.available).toBe(true);
  });

  it("is saturated when every node is at its in-flight limit or its queue is too long", () => {
    const r = new RegionRouter(settings({ maxInflightPerNode: 2, maxQueueSeconds: 1_000 }));
    r.upsertNode(spec("a"), 0);
    expect(r.route(req("1"), 0).ok).toBe(true);
    expect(r.route(req("2"), 0).ok).toBe(true);
    expect(r.route(req("3"), 0)).toMatchObject({ ok: false, reason: "saturated" });

    const q = new RegionRouter(settings({ maxQueueSeconds: 1 }));
    q.upsertNode(spec("a"), 0);
    expect(q.route(req("big", { promptTokens: 50_000 }), 0).ok).toBe(true); // 5 s of prefill queued
    const late = q.route(req("next"), 0);
    if (late.ok) throw new Error("expected a saturated region");
    expect(late.reason).toBe("saturated");
    expect(late.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(q.route({ ...req("x"), model: "other" }, 0)).toMatchObject({ ok: false, reason: "no-node" });
  });

  it("expires silent reporting nodes but not static ones, and abandoned tickets", () => {
    const r = new RegionRouter(settings({ nodeSilenceMs: 1_000, requestTimeoutMs: 5_000 }));
    r.upsertNode(spec("reporting"), 0);
    r.upsertNode({ ...spec("static"), static: true }, 0);
    // On the static node, so the ticket outlives the reporting node's expiry.
    expect(r.route(req("z", { exclude: ["reporting"] }), 0)).toMatchObject({ ok: true, nodeId: "static" });
    expect(r.expire(500)).toEqual({ expired: [], nextAt: 1_000 });
    const { expired } = r.expire(1_000);
    expect(expired).toEqual(["reporting"]);
    expect(r.nodeSpecs().map((n) => n.id)).toEqual(["static"]);
    expect(r.snapshot(1_000).inflight).toBe(1);
    expect(r.expire(4_999)).toEqual({ expired: [], nextAt: 5_000 });
    expect(r.expire(6_000)).toEqual({ expired: [], nextAt: undefined });
    expect(r.snapshot(6_000).inflight).toBe(0);
  });

  it("remembers the session's node as a hint", () => {
    const r = new RegionRouter(settings());
    for (const id of ["a", "b", "c"]) r.upsertNode(spec(id), 0);
    const first = r.route(req("s1", { sessionKey: "u1" }), 0);
    if (!first.ok) throw new Error();
    r.firstByte(first.ticket, 300);
    // A new, unrelated prompt from the same session goes to the session's node when it is free.
    const next = r.route(req("s2", { sessionKey: "u1" }), 1_000);
    if (!next.ok) throw new Error();
    expect(next.nodeId).toBe(first.nodeId);
    expect(next.decision).toBe("session");
  });
});
