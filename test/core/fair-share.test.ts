/** Per-tenant fair share of a region's prefill (src/core/region/fair-share.ts), through the RegionRouter. */
import { describe, expect, it } from "vitest";
import { DEFAULT_REGION_SETTINGS, RegionRouter, type RegionSettings } from "../../src/core/region/index.ts";
import { ACTIVE_WINDOW_MS, FairShare, SHARE_TOLERANCE } from "../../src/core/region/fair-share.ts";
import { seededRandom } from "../../src/core/random.ts";
import { decay } from "../../src/core/stats.ts";

const settings = (over: Partial<RegionSettings> = {}): RegionSettings => ({
  ...DEFAULT_REGION_SETTINGS,
  name: "r",
  blockTokens: 128,
  ...over,
});
let seq = 0;
/** A request of `tokens` uncached prompt tokens (distinct every time) from `tenant`. */
const req = (tenant: string, tokens: number, weight?: number) => {
  const p = `${tenant}-${++seq}`;
  const blocks = Math.ceil(tokens / 128);
  return {
    requestId: p,
    tenant,
    tenantWeight: weight,
    model: "m",
    hashes: Array.from({ length: blocks }, (_, i) => `${p}:${i}`.padEnd(16, "0").slice(0, 16)),
    promptTokens: tokens,
  };
};
function region() {
  // One node at the assumed 10,000 prefill tokens/s; contended past 0.25 s of queue.
  const r = new RegionRouter(settings({ fairShareWaitSeconds: 0.25 }));
  r.upsertNode({ id: "a", url: "http://a", models: ["m"], kvCapacityTokens: 10_000_000, static: true, lastSeen: 0 }, 0);
  return r;
}

describe("fair share", () => {
  it("lets a lone tenant use the whole region (work-conserving)", () => {
    const r = region();
    for (let i = 0; i < 20; i++) expect(r.route(req("flood", 5_000), 0).ok).toBe(true); // 10 s queued, under the 30 s bound
  });

  it("refuses a flooding tenant over its share once the wait passes the bound, while a light tenant is admitted", () => {
    const r = region();
    expect(r.route(req("light", 100), 0).ok).toBe(true); // light is active
    expect(r.route(req("flood", 5_000), 1).ok).toBe(true); // the wait was short: admitted (0.5 s queued now)
    const refused = r.route(req("flood", 5_000), 2);
    expect(refused).toMatchObject({ ok: false, reason: "over-share" });
    if (refused.ok) throw new Error();
    expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(r.route(req("light", 100), 3).ok).toBe(true); // under its share: admitted behind ~0.5 s, not behind a flood
    expect(r.snapshot(3).rejected.overShare).toBe(1);
    expect(r.historyView(3).decisions.some((d) => d.decision === "over-share" && d.tenant === "flood")).toBe(true);
  });

  it("admits the flood again as its queued work drains (first bytes), and once the others go quiet", () => {
    const r = region();
    const light = r.route(req("light", 100), 0);
    if (!light.ok) throw new Error(light.message);
    const first = r.route(req("flood", 5_000), 1);
    if (!first.ok) throw new Error(first.message);
    expect(r.route(req("flood", 5_000), 2).ok).toBe(false);
    r.firstByte(light.ticket, 20);
    r.firstByte(first.ticket, 600);
    expect(r.route(req("flood", 5_000), 700).ok).toBe(true);
    // The light tenant gone quiet (and nothing of it queued): the flood has the region again.
    const later = 700 + ACTIVE_WINDOW_MS + 1;
    for (let i = 0; i < 4; i++) expect(r.route(req("flood", 5_000), later).ok).toBe(true);
  });

  it("judges each of many active tenants by its own recent prefill: the one past 1.5x its share is heavy with little queued", () => {
    const fair = new FairShare();
    const nodes = [
      { id: "a", waitSeconds: 0, prefillRate: 10_000 },
      { id: "b", waitSeconds: 0, prefillRate: 10_000 },
    ];
    // Forty tenants dispatched 1,000 tokens each (all drained); `big` 10,000, ten of them still
    // queued on node a: far under its share of the 0.5 s bound (10,000 tokens / 41), far over 1.5x
    // its share of the recent prefill (50,000 / 41).
    for (let i = 0; i < 40; i++) {
      fair.admit(`t${i}`, 1, 0, nodes, 0.5);
      fair.queued(`t${i}`, "a", 1_000, 0);
      fair.drained(`t${i}`, "a", 1_000);
    }
    fair.admit("big", 1, 0, nodes, 0.5);
    fair.queued("big", "a", 10_000, 0);
    fair.drained("big", "a", 9_990);
    const big = fair.admit("big", 1, 1, nodes, 0.5);
    expect(big).toMatchObject({ ok: true });
    if (!big.ok) throw new Error();
    expect([...(big.reserved ?? [])]).toEqual(["b"]); // the node without its work is held for the others
    const light = fair.admit("t7", 1, 1, nodes, 0.5);
    expect(light).toMatchObject({ ok: true, reserved: undefined });
    if (!light.ok) throw new Error();
    expect([...(light.preferred ?? [])]).toEqual(["b"]);
  });

  it("counts as active what a pass over every tenant counts: seen within the window or with prefill queued, through churn", () => {
    const fair = new FairShare();
    const nodes = [
      { id: "a", waitSeconds: 0, prefillRate: 10_000 },
      { id: "b", waitSeconds: 0, prefillRate: 10_000 },
    ];
    // What a pass over every tenant would weigh: its last arrival, weight, queued and recent prefill (half-life 5 s).
    const shadow = new Map<string, { seen: number; weight: number; queued: number; recent: number; at: number }>();
    const inFlight: { tenant: string; node: string; tokens: number }[] = [];
    const random = seededRandom(5);
    let now = 1_700_000_000_000;
    const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(1, b);
    for (let step = 0; step < 5_000; step++) {
      now += Math.floor(random() * 1_500);
      const roll = random();
      if (roll < 0.5) {
        const tenant = `t${Math.floor(random() * 40)}`;
        const weight = random() < 0.7 ? 1 : 3;
        const floods = random() < 0.1 ? tenant : undefined;
        fair.admit(tenant, weight, now, nodes, 0.5, (t) => t === floods);
        const s = shadow.get(tenant) ?? { seen: now, weight, queued: 0, recent: 0, at: now };
        shadow.set(tenant, { ...s, seen: now, weight });
        if (random() < 0.8) {
          const node = random() < 0.5 ? "a" : "b";
          const tokens = Math.floor(random() * 20_000);
          fair.queued(tenant, node, tokens, now);
          const t = shadow.get(tenant)!;
          t.recent = decay(t.recent, t.at, now, 5_000 / Math.LN2) + tokens;
          t.at = now;
          t.queued += tokens;
          inFlight.push({ tenant, node, tokens });
        }
      } else if (inFlight.length > 0) {
        const [done] = inFlight.splice(Math.floor(random() * inFlight.length), 1);
        fair.drained(done!.tenant, done!.node, done!.tokens);
        const t = shadow.get(done!.tenant)!;
        t.queued = Math.max(0, t.queued - done!.tokens);
      }
      const active = [...shadow.values()].filter((t) => t.queued > 0 || now - t.seen <= ACTIVE_WINDOW_MS);
      const got = fair.activeTenants(now);
      const recent = active.reduce((sum, t) => sum + decay(t.recent, t.at, now, 5_000 / Math.LN2), 0);
      const weight = active.reduce((sum, t) => sum + t.weight, 0);
      if (got.count !== active.length || !close(got.weight, weight) || !close(got.recentPrefill, recent))
        throw new Error(`step ${step}: ${JSON.stringify(got)} against ${active.length}, ${weight}, ${recent}`);
    }
    expect(fair.activeTenants(now + 10 * ACTIVE_WINDOW_MS).count).toBe(
      new Set(inFlight.filter((f) => f.tokens > 0).map((f) => f.tenant)).size,
    );
  });

  it("counts a tenant exactly at 1.5x its share of the recent prefill light, whichever way the sum rounds", () => {
    const nodes = [
      { id: "a", waitSeconds: 0, prefillRate: 1e6 },
      { id: "b", waitSeconds: 0, prefillRate: 1e6 },
    ];
    // A (weight 2) sends all the uncached prefill, B (weight 1) only cached prompts: 1.5 x 2/3 of it is all of it.
    for (let k = 0; k < 50; k++) {
      const fair = new FairShare();
      let now = 1_700_000_000_000 + k * 7_919;
      fair.admit("B", 1, now, nodes, 0.5);
      fair.queued("B", "a", 0, now);
      for (let i = 0; i < 3; i++) {
        fair.admit("A", 2, (now += 137 + k), nodes, 0.5);
        fair.queued("A", "a", 1_000 + 13 * k, now);
      }
      // Not heavy: no node is held from it, none kept for B.
      expect(fair.admit("B", 1, now + 53, nodes, 0.5)).toEqual({ ok: true, reserved: undefined });
    }
  });

  it("shares a contended region by weight: a tenant of weight 1 against 3 keeps at most 1.5x its quarter", () => {
    const split = (wa: number, wb: number) => {
      const r = region();
      let a = 0;
      let b = 0;
      for (let i = 0; i < 80; i++) {
        if (r.route(req("a", 1_000, wa), 1).ok) a++;
        if (r.route(req("b", 1_000, wb), 1).ok) b++;
      }
      return b / (a + b);
    };
    expect(split(1, 1)).toBeCloseTo(0.5, 1); // equal tenants never refuse each other
    const weighted = split(3, 1);
    expect(weighted).toBeLessThanOrEqual(0.25 * (1 + SHARE_TOLERANCE) + 0.02);
    expect(weighted).toBeGreaterThan(0.25);
  });

  describe("the reserve", () => {
    /** Three nodes at 10,000 tokens/s; the bound 0.5 s (15,000 tokens of region queue). */
    function three() {
      const r = new RegionRouter(settings({ fairShareWaitSeconds: 0.5 }));
      for (const id of ["a", "b", "c"])
        r.upsertNode({ id, url: `http://${id}`, models: ["m"], kvCapacityTokens: 10_000_000, static: true, lastSeen: 0 }, 0);
      return r;
    }
    const placed = (r: RegionRouter, tenant: string, tokens: number, now: number) => {
      const out = r.route(req(tenant, tokens), now);
      return out.ok ? out : undefined;
    };

    it("keeps a flood off the last node without flood work while a light tenant is active, and the light tenant lands there", () => {
      const r = three();
      expect(placed(r, "light", 100, 0)).toBeDefined();
      const floodNodes = new Set<string>();
      let refused = 0;
      for (let i = 0; i < 30; i++) {
        const f = placed(r, "flood", 5_000, 1);
        if (f) floodNodes.add(f.nodeId);
        else refused++;
      }
      expect(floodNodes.size).toBe(2); // one node of three held for the light tenant
      expect(refused).toBeGreaterThan(0); // past 0.5 s on its two nodes the flood goes elsewhere
      const light = placed(r, "light", 100, 2)!;
      expect(floodNodes.has(light.nodeId)).toBe(false);
      expect(light.workAheadTokens).toBeLessThan(200); // only light work ahead, no flood
    });

    it("says in the placement how many nodes were held, and the refusal names the reserve", () => {
      const r = three();
      placed(r, "light", 100, 0);
      let held = 0;
      let message = "";
      for (let i = 0; i < 30; i++) {
        const f = r.route(req("flood", 5_000), 1);
        if (f.ok) held = Math.max(held, f.heldForOthers);
        else message = f.message;
      }
      expect(held).toBe(1);
      expect(message).toMatch(/1 of its nodes held for the other tenants/);
    });

    it("holds nothing back from a lone tenant, nor between two tenants that both build queues", () => {
      const lone = three();
      const nodes = new Set<string>();
      for (let i = 0; i < 9; i++) nodes.add(placed(lone, "flood", 5_000, 1)!.nodeId);
      expect(nodes.size).toBe(3);

      const two = three();
      const byTenant = { x: new Set<string>(), y: new Set<string>() };
      for (let i = 0; i < 9; i++)
        for (const t of ["x", "y"] as const) {
          const p = placed(two, t, 5_000, 1);
          if (p) byTenant[t].add(p.nodeId);
          expect(p?.heldForOthers ?? 0).toBe(0);
        }
      expect(byTenant.x.size + byTenant.y.size).toBeGreaterThanOrEqual(5);
    });

    it("grows with the light tenants' demand, and never holds the whole region", () => {
      const r = three();
      // Light tenants whose recent demand is about 1.4 nodes' worth, each under its share of the short queue.
      // (Each ended at once, so none of them holds a queue, and no prefill rate is learned from it.)
      for (let t = 0; t < 20; t++) r.complete(placed(r, `light-${t}`, 1_000, 0)!.ticket, { status: "ok" }, 1);
      // demand: 20,000 tokens decayed over a 5 s half-life = about 2,800 tokens/s, 0.28 of a node: one node held
      let held = 0;
      for (let i = 0; i < 6; i++) held = Math.max(held, placed(r, "flood", 5_000, 2)?.heldForOthers ?? held);
      expect(held).toBe(1);
      const busy = three();
      // 120,000 tokens recently: about 16,600 tokens/s, 1.7 nodes' worth
      for (let t = 0; t < 20; t++) busy.complete(placed(busy, `light-${t}`, 6_000, 0)!.ticket, { status: "ok" }, 1);
      held = 0;
      for (let i = 0; i < 6; i++) held = Math.max(held, placed(busy, "flood", 5_000, 2)?.heldForOthers ?? held);
      expect(held).toBe(2); // two of three, never three
    });

    it("keeps holding the same node while it qualifies, rather than hopping to whichever node drained last", () => {
      const r = three();
      // Three light tenants (each still queued: whichever node holds one is not idle), so the flood's
      // share of the short queue is a quarter, and it stays heavy with one request queued.
      for (const t of ["l1", "l2", "l3"]) placed(r, t, 100, 0);
      const flood: Array<{ ticket: string; nodeId: string }> = [];
      for (let i = 0; i < 6; i++) {
        const f = placed(r, "flood", 5_000, 1);
        if (f) flood.push(f);
      }
      const floodNodes = new Set(flood.map((f) => f.nodeId));
      expect(floodNodes.size).toBe(2);
      const held = ["a", "b", "c"].find((n) => !floodNodes.has(n))!;
      // The held node gets more light work, then one flood node drains completely: it is now as
      // clear of the flood as the held one, and emptier.
      expect(placed(r, "l1", 1_000, 500)!.nodeId).toBe(held);
      const drained = flood[0]!.nodeId;
      for (const f of flood) if (f.nodeId === drained) r.firstByte(f.ticket, 501); // 5,000 tokens at 10,000/s
      const next = placed(r, "flood", 5_000, 502)!;
      expect(next.nodeId).not.toBe(held);
    });

    it("sends a light tenant to the held nodes while one is within the short wait, whatever the others look like", () => {
      const fair = new FairShare();
      const nodes = (waitC: number) => [
        { id: "a", waitSeconds: 0, prefillRate: 10_000 }, // the model believes a is empty: an estimate
        { id: "b", waitSeconds: 0.4, prefillRate: 10_000 },
        { id: "c", waitSeconds: waitC, prefillRate: 10_000 },
      ];
      fair.admit("light", 1, 0, nodes(0), 0.5);
      fair.admit("flood", 1, 0, nodes(0), 0.5);
      fair.queued("flood", "a", 10_000, 0);
      fair.queued("flood", "b", 10_000, 0);
      const light = fair.admit("light", 1, 1, nodes(0.1), 0.5);
      expect(light).toMatchObject({ ok: true, reserved: undefined });
      if (!light.ok) throw new Error();
      expect([...(light.preferred ?? [])]).toEqual(["c"]);
      // Once the held node is past the short wait itself, the light tenant may go anywhere.
      const busy = fair.admit("light", 1, 2, nodes(0.6), 0.5);
      expect(busy.ok && busy.preferred).toBeFalsy();
    });

    it("lets a heavy tenant onto a held node that holds most of its prompt (its cache), and nowhere else held", () => {
      const r = three();
      placed(r, "light", 100, 0);
      const floodNodes = new Set<string>();
      for (let i = 0; i < 8; i++) {
        const f = placed(r, "flood", 5_000, 1);
        if (f) floodNodes.add(f.nodeId);
      }
      const held = ["a", "b", "c"].find((n) => !floodNodes.has(n))!;
      // A document both tenants send: the light tenant's copy goes to the held node and is cached there.
      const doc = (tenant: string) => ({ ...req(tenant, 4_000), hashes: Array.from({ length: 32 }, (_, i) => `doc:${i}`.padEnd(16, "0")) });
      const first = r.route(doc("light"), 2);
      expect(first).toMatchObject({ ok: true, nodeId: held });
      const again = r.route(doc("flood"), 3);
      expect(again).toMatchObject({ ok: true, nodeId: held, decision: "prefix-hit" });
      // Its uncached work still keeps off the held node.
      expect(placed(r, "flood", 5_000, 3)?.nodeId).not.toBe(held);
    });

    it("gives the held node back once the light tenant goes quiet", () => {
      const r = three();
      r.complete(placed(r, "light", 100, 0)!.ticket, { status: "ok" }, 1);
      const before = new Set<string>();
      for (let i = 0; i < 4; i++) before.add(placed(r, "flood", 5_000, 1)!.nodeId);
      expect(before.size).toBe(2);
      const later = 1 + ACTIVE_WINDOW_MS + 1;
      const after = new Set<string>();
      for (let i = 0; i < 6; i++) after.add(placed(r, "flood", 5_000, later)!.nodeId);
      expect([...after].some((n) => !before.has(n))).toBe(true);
    });
  });
});
