/** Per-tenant fair share of a region's prefill (src/core/region/fair-share.ts), through the RegionRouter. */
import { describe, expect, it } from "vitest";
import { DEFAULT_REGION_SETTINGS, RegionRouter, type RegionSettings } from "../../src/core/region/index.ts";
import { ACTIVE_WINDOW_MS, SHARE_TOLERANCE } from "../../src/core/region/fair-share.ts";

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
});
