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

  it("takes a non-streamed answer's first byte from its completion, when it came, once", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const placed = r.route(req("p"), 0);
    if (!placed.ok) throw new Error(placed.message);
    expect(r.complete(placed.ticket, { status: "ok", firstByteMsAgo: 30 }, 130)).toBe(true);
    const m = r.snapshot(200).nodes[0]!.metrics;
    expect(m.firstByteCount).toBe(1);
    expect(m.firstByteMsSum).toBe(100);
    // A first byte already reported by its own call is not counted again.
    const streamed = r.route(req("q"), 200);
    if (!streamed.ok) throw new Error(streamed.message);
    r.firstByte(streamed.ticket, 250);
    r.complete(streamed.ticket, { status: "ok", firstByteMsAgo: 0 }, 400);
    const after = r.snapshot(400).nodes[0]!.metrics;
    expect(after.firstByteCount).toBe(2);
    expect(after.firstByteMsSum).toBe(150);
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
    expect(late).toMatchObject({ waitSeconds: expect.closeTo(5, 1) }); // for the next region to beat
  });

  it("as a failover from a saturated region, serves only if it can start the request sooner", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    expect(r.route(req("big", { promptTokens: 20_000 }), 0).ok).toBe(true); // 2 s queued here
    const slower = r.route(req("f1", { failoverFrom: "near", waitToBeatSeconds: 1.5 }), 0);
    expect(slower).toMatchObject({ ok: false, reason: "saturated", waitSeconds: expect.closeTo(2, 1) });
    if (slower.ok) throw new Error();
    expect(slower.message).toMatch(/cannot start it sooner than near/);
    expect(r.route(req("f2", { failoverFrom: "near", waitToBeatSeconds: 2.5 }), 0)).toMatchObject({ ok: true, decision: "failover" });
  });

  it("expires silent reporting nodes but not static ones, and abandoned tickets", () => {
    const r = new RegionRouter(settings({ nodeSilenceMs: 1_000, requestTimeoutMs: 5_000 }));
    r.upsertNode(spec("reporting"), 0);
    r.upsertNode({ ...spec("static"), static: true }, 0);
    // On the static node, so the ticket outlives the reporting node's expiry.
    expect(r.route(req("z", { exclude: ["reporting"] }), 0)).toMatchObject({ ok: true, nodeId: "static" });
    expect(r.expire(500)).toEqual({ expired: [], nextAt: 1_000 });
    // Asked before expiring, without expiring: the static node never, the reporting one at its silence.
    expect(r.hasSilentNodes(999)).toBe(false);
    expect(r.hasSilentNodes(1_000)).toBe(true);
    expect(r.nodeSpecs()).toHaveLength(2);
    const { expired } = r.expire(1_000);
    expect(expired).toEqual(["reporting"]);
    expect(r.nodeSpecs().map((n) => n.id)).toEqual(["static"]);
    expect(r.snapshot(1_000).inflight).toBe(1);
    expect(r.hasSilentNodes(10_000)).toBe(false);
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

describe("RegionRouter: learning from what the nodes report", () => {
  /** One node, so every request goes to it. */
  const oneNode = (over: Partial<RegionSettings> = {}) => {
    const r = new RegionRouter(settings(over));
    r.upsertNode(spec("a"), 0);
    return r;
  };
  const routeOk = (r: RegionRouter, p: string, now: number) => {
    const res = r.route(req(p), now);
    if (!res.ok) throw new Error(res.message);
    return res;
  };
  const usage = (cachedTokens: number | undefined) => ({ promptTokens: 2_560, completionTokens: 5, cachedTokens });
  const metrics = (r: RegionRouter) => r.snapshot(0).nodes[0]!.metrics;

  it("a node's places are what its latest report says, else its configuration's: a report that stops saying them drops an earlier report's figure", () => {
    const r = new RegionRouter(settings());
    const report = (id: string, places?: number) => ({
      node_id: id,
      region: "r",
      url: `http://${id}`,
      models: ["m"],
      kv_capacity_tokens: 100_000,
      running: 0,
      waiting: 0,
      kv_usage: 0,
      ...(places === undefined ? {} : { max_running_requests: places }),
    });
    const places = (id: string) => r.nodeSpec(id)?.maxRunning;
    r.configureNode({ ...spec("configured"), maxRunning: 8 }, 0);
    r.report(report("configured", 16), 1);
    expect(places("configured")).toBe(16);
    r.report(report("configured"), 2);
    expect(places("configured")).toBe(8);
    r.report(report("reported", 32), 3);
    expect(places("reported")).toBe(32);
    r.report(report("reported"), 4);
    expect(places("reported")).toBeUndefined();
    // A stored spec (a restart's node table) that carries a reported figure is not configuration.
    r.upsertNode({ ...spec("stored"), static: true, maxRunning: 4 }, 4);
    expect(places("stored")).toBe(4);
    r.report(report("stored"), 5);
    expect(places("stored")).toBeUndefined();
    // Configuration that stops saying them: the node is no longer told either.
    r.configureNode(spec("configured"), 5);
    r.report(report("configured"), 6);
    expect(places("configured")).toBeUndefined();
  });

  it("a request the node refused (4xx) is neither predicted nor left in the index", () => {
    const r = oneNode();
    const ok = routeOk(r, "p", 0);
    r.complete(ok.ticket, { status: "ok", usage: usage(0) }, 10);
    // Same prefix again: predicted 20 blocks, then refused.
    const refused = routeOk(r, "p", 20);
    expect(refused.matchBlocks).toBe(20);
    const before = { prompt: metrics(r).promptTokens, predicted: metrics(r).predictedCachedTokens };
    r.complete(refused.ticket, { status: "refused" }, 30);
    expect(metrics(r).refused).toBe(1);
    // Its prediction was never used, so it never counts; and the counters never go down (Prometheus
    // reads a counter that does as a reset).
    expect(metrics(r).predictedCachedTokens).toBe(before.predicted);
    expect(metrics(r).promptTokens).toBe(before.prompt);
    const computed = routeOk(r, "p", 35);
    r.complete(computed.ticket, { status: "ok", usage: usage(0) }, 36);
    expect(metrics(r).predictedCachedTokens).toBe(before.predicted + computed.predictedCachedTokens);
    expect(metrics(r).promptTokens).toBeGreaterThan(before.prompt);
    // The prefix held before the refused request is still believed; a new one is not recorded.
    const other = routeOk(r, "new", 40);
    r.complete(other.ticket, { status: "refused" }, 50);
    expect(routeOk(r, "new", 60).matchBlocks).toBe(0);
    expect(routeOk(r, "p", 70).matchBlocks).toBe(20);
  });

  it("a request that failed before its first byte is rolled back too", () => {
    const r = oneNode();
    const failed = routeOk(r, "f", 0);
    r.complete(failed.ticket, { status: "failed" }, 10);
    expect(routeOk(r, "f", 5_000).matchBlocks).toBe(0);
    expect(metrics(r).predictedCachedTokens).toBe(0);
  });

  it("counts agreement between the predicted and the measured cached share", () => {
    const r = oneNode();
    const a = routeOk(r, "p", 0);
    r.complete(a.ticket, { status: "ok", usage: usage(0) }, 10); // predicted 0, measured 0: agreed
    const b = routeOk(r, "p", 20);
    r.complete(b.ticket, { status: "ok", usage: usage(2_500) }, 30); // predicted all, measured ~all: agreed
    const c = routeOk(r, "p", 40);
    r.complete(c.ticket, { status: "ok", usage: usage(1_000) }, 50); // predicted all, measured 39%: not
    expect(metrics(r)).toMatchObject({ compared: 3, agreed: 2 });
    // An engine that does not report cached tokens is not compared, and not counted as measured.
    const d = routeOk(r, "p", 60);
    r.complete(d.ticket, { status: "ok", usage: usage(undefined) }, 70);
    expect(metrics(r)).toMatchObject({ compared: 3, measuredRequests: 3 });
  });

  it("a node that evicted a predicted prefix makes the index forget everything older, as its LRU did", () => {
    const r = oneNode();
    for (const [i, p] of ["old", "target", "newer"].entries()) {
      const x = routeOk(r, p, i * 10);
      r.complete(x.ticket, { status: "ok", usage: usage(0) }, i * 10 + 5);
    }
    // The node had lost "target" (measured 0 of a predicted 20 blocks): "old", touched before it,
    // must be gone too; "newer", touched after it, may well be there.
    const t = routeOk(r, "target", 100);
    expect(t.matchBlocks).toBe(20);
    r.complete(t.ticket, { status: "ok", usage: usage(0) }, 110);
    expect(metrics(r).corrections).toBe(1);
    expect(routeOk(r, "old", 120).matchBlocks).toBe(0);
    expect(routeOk(r, "newer", 130).matchBlocks).toBe(20);
    // "target" itself was just computed again by that request: it is held now.
    expect(routeOk(r, "target", 140).matchBlocks).toBe(20);
  });

  it("detects a node that lost its whole cache without a new boot id within three answers", () => {
    const r = oneNode();
    for (const p of ["a", "b", "c", "d"]) {
      const x = routeOk(r, p, 0);
      r.complete(x.ticket, { status: "ok", usage: usage(0) }, 1);
    }
    expect(r.snapshot(2).nodes[0]!.indexBlocks).toBeGreaterThan(60);
    // The node restarted. Its answers for the three oldest prefixes come back with nothing cached
    // but the chat template's first engine block, which the first of them cached again (as the
    // simulated fleet's nodes do after a reset, with 16 tokens); each such answer alone only says
    // that prefix (and anything older) was evicted, so "d", the newest, would still be believed.
    // Three in a row say the whole cache is gone.
    for (const [i, p] of ["a", "b", "c"].entries()) {
      const x = routeOk(r, p, 10 + i);
      expect(x.matchBlocks).toBeGreaterThan(0);
      r.complete(x.ticket, { status: "ok", usage: usage(i === 0 ? 0 : 16) }, 20 + i);
    }
    expect(metrics(r).silentRestarts).toBe(1);
    // All it is believed to hold is the prompt it just computed, the third.
    const held = r.snapshot(30).nodes[0]!.indexBlocks;
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(20); // (this file's hashes repeat "c1" and "c10")
    expect(routeOk(r, "d", 40).matchBlocks).toBe(0);
    expect(routeOk(r, "c", 41).matchBlocks).toBe(20);
  });

  it("misses on prefixes an LRU would long have evicted are evictions, not a lost cache", () => {
    const r = oneNode();
    for (const p of ["a", "b", "c", ...Array.from({ length: 25 }, (_, i) => `new${i}-`)]) {
      const x = routeOk(r, p, 0);
      r.complete(x.ticket, { status: "ok", usage: usage(0) }, 1);
    }
    // 25 newer prompts (~475 blocks, over half the node's 781) came in after a, b and c:
    // an LRU could have evicted those three, so three misses on them say nothing of the rest.
    for (const [i, p] of ["a", "b", "c"].entries()) {
      const x = routeOk(r, p, 10 + i);
      expect(x.matchBlocks).toBeGreaterThan(0);
      r.complete(x.ticket, { status: "ok", usage: usage(0) }, 20 + i);
    }
    expect(metrics(r).silentRestarts).toBe(0);
    expect(routeOk(r, "new24-", 40).matchBlocks).toBe(20);
  });

  it("an answer with nothing cached forgets every prefix touched before that one", () => {
    const r = oneNode();
    for (const p of ["a", "b", "c"]) {
      const x = routeOk(r, p, 0);
      r.complete(x.ticket, { status: "ok", usage: usage(0) }, 1);
    }
    const c = routeOk(r, "c", 10);
    r.complete(c.ticket, { status: "ok", usage: usage(0) }, 20);
    expect(metrics(r).silentRestarts).toBe(0);
    expect(routeOk(r, "a", 30).matchBlocks).toBe(0);
  });

  it("with learning off (the benchmark's comparison), agreement is still counted but nothing is corrected", () => {
    const r = oneNode({ learnFromUsage: false });
    for (const p of ["old", "target"]) {
      const x = routeOk(r, p, 0);
      r.complete(x.ticket, { status: "ok", usage: usage(0) }, 1);
    }
    const t = routeOk(r, "target", 10);
    r.complete(t.ticket, { status: "ok", usage: usage(0) }, 20);
    expect(metrics(r)).toMatchObject({ compared: 3, agreed: 2, corrections: 0 });
    expect(routeOk(r, "old", 30).matchBlocks).toBe(20);
  });
});

describe("RegionRouter: one shard of a sharded region", () => {
  it("publishes only its own dispatches and weighs the others' shared load when it chooses", () => {
    const r = new RegionRouter(settings({ shards: 2 }));
    r.upsertNode(spec("a"), 0);
    r.upsertNode(spec("b"), 0);
    expect(r.ownLoad(0)).toEqual({});
    // The other shard has 60 s of prefill queued on a: a cold prompt goes to b.
    r.shareForeignLoad({ a: { queued: 600_000, recent: 600_000 } }, 0);
    const placed = r.route(req("p"), 0);
    if (!placed.ok) throw new Error(placed.message);
    expect(placed.nodeId).toBe("b");
    expect(r.ownLoad(0)).toEqual({ b: { queued: 2_560, recent: 2_560 } });
  });

  it("counts a node named `constructor` as any other: the load shared for it, its history (every object inherits that name)", () => {
    const r = new RegionRouter(settings({ shards: 2 }));
    r.upsertNode(spec("constructor"), 0);
    r.upsertNode(spec("b"), 0);
    // Nothing shared for it: no load, not the inherited Object function read as one.
    r.shareForeignLoad({ b: { queued: 600_000, recent: 600_000 } }, 0);
    const first = r.route(req("p"), 0);
    if (!first.ok) throw new Error(first.message);
    expect(first.nodeId).toBe("constructor");
    expect(Number.isFinite(first.estimatedTtftMs)).toBe(true);
    // Its own shared load counts: 60 s queued there sends a cold prompt to b.
    r.shareForeignLoad({ constructor: { queued: 600_000, recent: 600_000 } }, 10);
    const second = r.route(req("q"), 10);
    if (!second.ok) throw new Error(second.message);
    expect(second.nodeId).toBe("b");
    const nodes = r.historyView(20).buckets.flatMap((b) => Object.entries(b.nodes));
    expect(nodes.filter(([id]) => id === "constructor").map(([, n]) => n.routed)).toEqual([1]);
  });

  describe("its part of a node's cache", () => {
    const filled = (over: Partial<RegionSettings> = {}) => {
      const r = new RegionRouter(settings({ shards: 2, ...over }));
      r.upsertNode(spec("a"), 0);
      // Ten cold prompts (19 index entries each): 190 of the node's 781 blocks, 25,600 tokens of own prefill.
      for (let i = 0; i < 10; i++) {
        const placed = r.route(req(`p${i}`), i);
        if (!placed.ok) throw new Error(placed.message);
        r.complete(placed.ticket, { status: "ok" }, i);
      }
      return r;
    };
    const matched = (r: RegionRouter, p: string, now: number) => {
      const placed = r.route(req(p), now);
      if (!placed.ok) throw new Error(placed.message);
      return placed.matchBlocks;
    };

    it("believes the whole cache its own while no other shard sends the node anything", () => {
      const r = filled();
      r.shareForeignLoad({}, 100);
      expect(matched(r, "p9", 101)).toBe(20);
      expect(matched(r, "p0", 102)).toBe(20);
    });

    it("keeps its share of the node's recent prefill: the others' prompts evict its oldest", () => {
      const r = filled();
      // The other shards sent four times as much lately: this one holds a fifth (156 blocks, 8 prompts).
      r.shareForeignLoad({ a: { queued: 0, recent: 4 * 25_600 } }, 100);
      expect(matched(r, "p9", 101)).toBe(20);
      expect(matched(r, "p0", 102)).toBe(0);
      // A report re-registering the node keeps the smaller index (it does not restore the forgotten).
      r.upsertNode(spec("a", 103), 103);
      expect(matched(r, "p1", 104)).toBe(0);
    });

    it("never believes less than its floor, however little it sent", () => {
      const wide = filled();
      wide.shareForeignLoad({ a: { queued: 0, recent: 1e9 } }, 100);
      const narrow = filled({ minCacheShare: 0.05 });
      narrow.shareForeignLoad({ a: { queued: 0, recent: 1e9 } }, 100);
      // The default floor, a tenth (78 blocks): the newest 4 prompts; a 0.05 floor (39 blocks): the newest 2.
      expect(matched(wide, "p6", 101)).toBe(20);
      expect(matched(narrow, "p6", 101)).toBe(0);
      expect(matched(narrow, "p9", 102)).toBe(20);
    });
  });

  it("remembers a stored response another shard served, for a known node only", () => {
    const r = new RegionRouter(settings({ shards: 2 }));
    r.upsertNode(spec("a"), 0);
    r.upsertNode(spec("b"), 0);
    r.rememberResponse("t:resp_1", "b");
    r.rememberResponse("t:resp_2", "gone");
    const follow = r.route(req("z", { tenant: "t", previousResponseId: "t:resp_1" }), 0);
    if (!follow.ok) throw new Error(follow.message);
    expect(follow.nodeId).toBe("b");
    // A gone node's response is not remembered: its follow-up is refused, never placed.
    const gone = r.route(req("z", { tenant: "t", previousResponseId: "t:resp_2" }), 0);
    expect(gone).toMatchObject({ ok: false, reason: "unknown-response" });
    // An id scoped by no tenant is not remembered for any.
    r.rememberResponse("resp_3", "b");
    expect(r.route(req("z", { tenant: "t", previousResponseId: "resp_3" }), 0)).toMatchObject({ ok: false, reason: "unknown-response" });
  });
});

describe("RegionRouter: stored responses stay with their tenant (issue 31)", () => {
  /** Tenant `a` stores a response on the node its prompt goes to; returns that node. */
  const stored = (r: RegionRouter, now = 0) => {
    const first = r.route(req("conv", { tenant: "a" }), now);
    if (!first.ok) throw new Error(first.message);
    r.firstByte(first.ticket, now + 10, "a:resp_1");
    r.complete(first.ticket, { status: "ok" }, now + 20);
    return first.nodeId;
  };
  const inflight = (r: RegionRouter, now: number) => r.snapshot(now).nodes.reduce((s, n) => s + n.load.inflight, 0);

  it("refuses another tenant's follow-up, 4 times of 4, whatever the id says, and never places it; its owner continues", () => {
    const r = new RegionRouter(settings());
    for (const id of ["n1", "n2", "n3"]) r.upsertNode(spec(id), 0);
    const holder = stored(r);
    for (let i = 0; i < 4; i++) {
      // The same prompt as the owner's (affinity alone would pick the holder), with the id scoped as
      // the edge scopes it (`b:resp_1`), or naming the owner (`a:resp_1`) as a forged message might.
      for (const previousResponseId of ["b:resp_1", "a:resp_1"]) {
        const other = r.route(req("conv", { tenant: "b", previousResponseId }), 100 + i);
        expect(other).toMatchObject({ ok: false, reason: "unknown-response" });
      }
    }
    expect(inflight(r, 200)).toBe(0);
    const mine = r.route(req("other prompt", { tenant: "a", previousResponseId: "a:resp_1" }), 200);
    if (!mine.ok) throw new Error(mine.message);
    expect(mine.nodeId).toBe(holder);
    expect(mine.decision).toBe("pinned");
  });

  it("refuses an id it never saw, with admission on as off, before any other check", () => {
    for (const enabled of [false, true]) {
      const r = new RegionRouter(settings({ admission: { ...DEFAULT_REGION_SETTINGS.admission, enabled } }));
      // No node serves the model: an unknown id is still answered as unknown (the edge then asks the next region).
      expect(r.admit(req("p", { tenant: "a", previousResponseId: "a:resp_x" }), 0)).toMatchObject({
        ok: false,
        reason: "unknown-response",
      });
      r.upsertNode(spec("n1"), 0);
      expect(r.admit(req("p", { tenant: "a", previousResponseId: "a:resp_x" }), 0)).toMatchObject({
        ok: false,
        reason: "unknown-response",
      });
      expect(inflight(r, 0)).toBe(0);
      // Without a previous response, the same request is placed.
      expect(r.admit(req("p", { tenant: "a" }), 0)).toMatchObject({ ok: true, nodeId: "n1" });
    }
  });

  it("records a response only under the tenant whose request stored it", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("n1"), 0);
    const placed = r.route(req("p", { tenant: "a" }), 0);
    if (!placed.ok) throw new Error(placed.message);
    // The id the region worker names for tenant a's request is a's; one naming b is not recorded.
    r.firstByte(placed.ticket, 10, "b:resp_2");
    expect(r.route(req("q", { tenant: "b", previousResponseId: "b:resp_2" }), 20)).toMatchObject({ ok: false, reason: "unknown-response" });
  });

  it("forgets a restarted node's responses: their follow-ups are refused, not placed elsewhere", () => {
    const r = new RegionRouter(settings());
    for (const id of ["n1", "n2"]) r.upsertNode({ ...spec(id), bootId: "boot-1" }, 0);
    const holder = stored(r);
    r.upsertNode({ ...spec(holder, 50), bootId: "boot-2" }, 50);
    expect(r.route(req("conv", { tenant: "a", previousResponseId: "a:resp_1" }), 60)).toMatchObject({
      ok: false,
      reason: "unknown-response",
    });
  });
});

describe("RegionRouter: a request the node refused or failed leaves the index as it was (issue 24)", () => {
  /** Hex block hashes, as the edge sends them, distinct for each prefix number and block. */
  const chain = (p: number, n: number) => Array.from({ length: n }, (_, i) => ((p << 20) | i).toString(16).padStart(16, "0"));
  /** 900k tokens at 128 tokens a base block: 7,032 base blocks, 1,628 blocks of the edge's doubling layout. */
  const HUGE = { hashes: chain(0xbad, 1_628), promptTokens: 900_000 };
  const ask = (hashes: string[], promptTokens: number, over: object = {}) => ({
    requestId: "x",
    model: "m",
    hashes,
    promptTokens,
    ...over,
  });
  const placed = (r: RegionRouter, request: ReturnType<typeof ask>, now: number) => {
    const res = r.route(request, now);
    if (!res.ok) throw new Error(res.message);
    return res;
  };
  const blocksOn = (r: RegionRouter, id: string, now: number) => r.snapshot(now).nodes.find((n) => n.id === id)!.indexBlocks;
  /** Two nodes of 781 blocks; a 22-block warm prefix computed on one of them (returned). */
  const warm = (over: Partial<RegionSettings> = {}) => {
    const r = new RegionRouter(settings(over));
    r.upsertNode(spec("a"), 0);
    r.upsertNode(spec("b"), 0);
    const w = placed(r, ask(chain(1, 22), 2_816), 0);
    r.firstByte(w.ticket, 50);
    r.complete(w.ticket, { status: "ok" }, 100);
    expect(blocksOn(r, w.nodeId, 100)).toBe(22);
    return { r, node: w.nodeId, other: w.nodeId === "a" ? "b" : "a" };
  };

  it("a 900k-token prompt the node refused (over its context) keeps the node's 22 warm blocks, and the next request on them hits there", () => {
    const { r, node, other } = warm();
    const huge = placed(r, ask(HUGE.hashes, HUGE.promptTokens, { exclude: [other] }), 1_000);
    expect(huge.nodeId).toBe(node);
    // Dispatched, it is believed held as far as the node can hold it (of its 781 blocks, 780 base
    // blocks: its first 646 blocks), evicting the warm prefix for it, as the node would had it taken it.
    expect(blocksOn(r, node, 1_000)).toBeGreaterThanOrEqual(780);
    r.complete(huge.ticket, { status: "refused" }, 1_200);
    expect(blocksOn(r, node, 1_200)).toBe(22);
    const next = placed(r, ask(chain(1, 22), 2_816), 1_300);
    expect(next).toMatchObject({ nodeId: node, matchBlocks: 22, decision: "prefix-hit" });
    // The refused prompt is not believed anywhere.
    expect(placed(r, ask(HUGE.hashes.slice(0, 40), 5_120), 1_400).matchBlocks).toBe(0);
  });

  it("a prompt the node failed before its first byte is taken out, and what it evicted comes back", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    // The node full: 39 prompts of 20 blocks (780 of its 781), the first the least recently used.
    for (let p = 0; p < 39; p++) {
      const x = placed(r, ask(chain(p, 20), 2_560), p);
      r.complete(x.ticket, { status: "ok", firstByteMsAgo: 0 }, p);
    }
    const failed = placed(r, ask(chain(99, 20), 2_560), 100);
    expect(blocksOn(r, "a", 100)).toBe(781); // its insert evicted 19 blocks of the oldest prompt
    r.complete(failed.ticket, { status: "failed", reason: "http-5xx" }, 110);
    expect(blocksOn(r, "a", 110)).toBe(780);
    // After the breaker's cool-down: the oldest prompt is still a whole prefix hit, the failed one is not held.
    const trial = placed(r, ask(chain(0, 20), 2_560), 5_000);
    expect(trial.matchBlocks).toBe(20);
    r.complete(trial.ticket, { status: "ok", firstByteMsAgo: 0 }, 5_000);
    expect(placed(r, ask(chain(99, 20), 2_560), 5_001).matchBlocks).toBe(0);
  });

  it("with requests in flight together: another request dispatched and served meanwhile is kept, and so is the warm prefix, older", () => {
    // (A long queue allowed, so that the node takes another request behind the huge one.)
    const { r, node, other } = warm({ maxQueueSeconds: 1_000 });
    const huge = placed(r, ask(HUGE.hashes, HUGE.promptTokens, { exclude: [other] }), 1_000);
    // While the node holds the huge prompt in its queue, another request goes there and is served.
    const b = placed(r, ask(chain(2, 20), 2_560, { exclude: [other] }), 1_010);
    expect(b.nodeId).toBe(node);
    r.firstByte(b.ticket, 1_020);
    r.complete(b.ticket, { status: "ok" }, 1_030);
    r.complete(huge.ticket, { status: "refused" }, 1_200);
    // The warm prefix's last block went out for the other request (its insert, behind the huge
    // prompt's), the rest for the huge one: all of it comes back, older than the other request's.
    expect(blocksOn(r, node, 1_200)).toBe(42);
    // In LRU order: 37 more prompts of 20 blocks (782 of the node's 781) push out the warm prefix's last block first.
    for (let p = 10; p < 47; p++) {
      const x = placed(r, ask(chain(p, 20), 2_560, { exclude: [other] }), 1_200 + p);
      r.complete(x.ticket, { status: "ok", firstByteMsAgo: 0 }, 1_200 + p);
    }
    expect(blocksOn(r, node, 1_300)).toBe(781);
    expect(placed(r, ask(chain(2, 20), 2_560), 1_300)).toMatchObject({ nodeId: node, matchBlocks: 20 });
    expect(placed(r, ask(chain(1, 22), 2_816), 1_310)).toMatchObject({ nodeId: node, matchBlocks: 21 });
  });

  it("with requests in flight together: one sharing the failed request's new prefix keeps it if the node serves it", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), 0);
    const first = placed(r, ask(chain(5, 20), 2_560), 0);
    const second = placed(r, ask(chain(5, 20), 2_560), 10);
    expect(second.matchBlocks).toBe(20); // the first's speculative insert
    r.complete(first.ticket, { status: "failed", reason: "timeout" }, 20);
    // The second is still in flight: the prefix stays believed until the node answers it.
    r.firstByte(second.ticket, 30);
    r.complete(second.ticket, { status: "ok" }, 40);
    expect(placed(r, ask(chain(5, 20), 2_560), 5_000).matchBlocks).toBe(20);

    // Both refused: gone.
    const q = new RegionRouter(settings());
    q.upsertNode(spec("a"), 0);
    const x = placed(q, ask(chain(6, 20), 2_560), 0);
    const y = placed(q, ask(chain(6, 20), 2_560), 10);
    q.complete(x.ticket, { status: "refused" }, 20);
    q.complete(y.ticket, { status: "refused" }, 30);
    expect(placed(q, ask(chain(6, 20), 2_560), 40).matchBlocks).toBe(0);
    expect(blocksOn(q, "a", 40)).toBe(20); // (the last request's own speculative insert)
  });

  it("an abandoned ticket's prompt stays believed, and a restart drops the claims of the requests in flight", () => {
    const r = new RegionRouter(settings({ requestTimeoutMs: 1_000 }));
    r.upsertNode({ ...spec("a"), bootId: "1" }, 0);
    placed(r, ask(chain(7, 20), 2_560), 0);
    r.expire(2_000);
    expect(placed(r, ask(chain(7, 20), 2_560), 2_001).matchBlocks).toBe(20);

    // In flight across a restart: its failure must not touch what another request inserted after.
    const q = new RegionRouter(settings());
    q.upsertNode({ ...spec("a"), bootId: "1" }, 0);
    const lost = placed(q, ask(chain(8, 20), 2_560), 0);
    q.upsertNode({ ...spec("a"), bootId: "2" }, 10);
    const again = placed(q, ask(chain(8, 20), 2_560), 20);
    expect(again.matchBlocks).toBe(0);
    q.complete(lost.ticket, { status: "failed", reason: "connection" }, 30);
    q.firstByte(again.ticket, 40);
    expect(placed(q, ask(chain(8, 20), 2_560), 5_000).matchBlocks).toBe(20);
  });
});
