import { describe, expect, it } from "vitest";
import { DEFAULT_REGION_SETTINGS, RegionRouter, type RegionSettings } from "../../src/core/region/index.ts";
import { addCounters, mergeHistories, mergeSnapshots } from "../../src/core/region/merge.ts";

const settings: RegionSettings = { ...DEFAULT_REGION_SETTINGS, name: "r", blockTokens: 128, shards: 2 };
const spec = (id: string) => ({ id, url: `http://${id}`, models: ["m"], kvCapacityTokens: 100_000, static: false, lastSeen: 0 });
const hashes = (p: string) => Array.from({ length: 10 }, (_, i) => `${p}${i}`.padEnd(16, "0"));

/** Two shards of one region, each deciding its own prompts. */
function shards(): RegionRouter[] {
  return [0, 1].map((k) => {
    const r = new RegionRouter(settings, String(k));
    r.upsertNode(spec("a"), 0);
    r.upsertNode(spec("b"), 0);
    return r;
  });
}

describe("addCounters", () => {
  it("adds numbers through objects and histograms and keeps other values", () => {
    expect(addCounters({ n: 1, s: "x", h: [1, 2], r: { a: 1 } }, { n: 2, s: "y", h: [3, 4], r: { a: 2, b: 5 } })).toEqual({
      n: 3,
      s: "x",
      h: [4, 6],
      r: { a: 3, b: 5 },
    });
  });
});

describe("mergeSnapshots", () => {
  it("shows a sharded region as one: counters and requests in flight add up, each node listed once", () => {
    const [s0, s1] = shards();
    const t0 = s0!.route({ requestId: "1", model: "m", hashes: hashes("p"), promptTokens: 1_280, tenant: "acme" }, 0);
    const t1 = s1!.route({ requestId: "2", model: "m", hashes: hashes("q"), promptTokens: 1_280, tenant: "acme" }, 0);
    const t2 = s1!.route({ requestId: "3", model: "m", hashes: hashes("r"), promptTokens: 1_280, tenant: "beta" }, 0);
    if (!t0.ok || !t1.ok || !t2.ok) throw new Error("not placed");
    const merged = mergeSnapshots([s0!.snapshot(1), s1!.snapshot(1)]);
    expect(merged.shards).toBe(2);
    expect(merged.inflight).toBe(3);
    expect(merged.nodes.map((n) => n.id)).toEqual(["a", "b"]);
    expect(merged.nodes.reduce((a, n) => a + n.load.inflight, 0)).toBe(3);
    expect(merged.nodes.reduce((a, n) => a + n.metrics.routed, 0)).toBe(3);
    expect(merged.tenants.acme!.requests).toBe(2);
    expect(merged.tenants.beta!.requests).toBe(1);
    expect(merged.index.entries).toBe(30);
    expect(merged.at).toBe(1);
  });

  it("shows a node's longest wait for a place among the shards, and the mean of their measured holds", () => {
    const [s0, s1] = shards();
    const a = s0!.snapshot(1);
    const b = s1!.snapshot(1);
    Object.assign(a.nodes[0]!.load, { slotWaitMs: 0, decodeMsMean: 1_000 });
    Object.assign(b.nodes[0]!.load, { slotWaitMs: 250, decodeMsMean: 3_000 });
    Object.assign(b.nodes[1]!.load, { slotWaitMs: 0, decodeMsMean: 500 });
    const merged = mergeSnapshots([a, b]);
    expect(merged.nodes[0]!.load).toMatchObject({ slotWaitMs: 250, decodeMsMean: 2_000 });
    expect(merged.nodes[1]!.load).toMatchObject({ slotWaitMs: 0, decodeMsMean: 500 });
    // A third shard: the mean of the three, not of the last two.
    const c = structuredClone(b);
    Object.assign(c.nodes[0]!.load, { slotWaitMs: 100, decodeMsMean: 5_000 });
    expect(mergeSnapshots([a, b, c]).nodes[0]!.load).toMatchObject({ slotWaitMs: 250, decodeMsMean: 3_000 });
  });

  it("is the object's own snapshot for an unsharded region", () => {
    const [s0] = shards();
    const snap = s0!.snapshot(5);
    expect(mergeSnapshots([snap])).toEqual({ ...snap, shards: 1 });
  });
});

describe("mergeHistories", () => {
  it("adds buckets by their start (never adding the starts) and interleaves the decisions newest first", () => {
    const [s0, s1] = shards();
    s0!.route({ requestId: "old", model: "m", hashes: hashes("p"), promptTokens: 1_280 }, 1_000);
    s1!.route({ requestId: "new", model: "m", hashes: hashes("q"), promptTokens: 1_280 }, 2_000);
    const h = mergeHistories([s0!.historyView(3_000), s1!.historyView(3_000)]);
    const single = s0!.historyView(3_000);
    expect(h.buckets.map((b) => b.start)).toEqual(single.buckets.map((b) => b.start));
    expect(h.buckets.reduce((a, b) => a + b.routed, 0)).toBe(2);
    expect(h.decisions.map((d) => d.requestId)).toEqual(["new", "old"]);
  });
});
