/** TenantGrowth: which tenants send faster than they usually do, out of step with the region (src/core/region/tenant-growth.ts). */
import { describe, expect, it } from "vitest";
import { GROWTH_MIN_HISTORY_MS, IDLE_RESET_MS, TenantGrowth, USUAL_TAU_MS } from "../../src/core/region/tenant-growth.ts";

/**
 * Drives `g` from `from` to `to` (ms): every second each tenant of `rates` sends its rate (prompt
 * tokens a second) in one request. Returns, per tenant, the share of its tokens judged growing.
 */
function drive(g: TenantGrowth, rates: Record<string, number>, from: number, to: number, committed: string[] = []) {
  const sent: Record<string, number> = {};
  const growing: Record<string, number> = {};
  for (let now = from; now < to; now += 1_000)
    for (const [t, r] of Object.entries(rates)) {
      sent[t] = (sent[t] ?? 0) + r;
      if (g.arrived(t, r, now, !committed.includes(t)) === "growing") growing[t] = (growing[t] ?? 0) + r;
    }
  return Object.fromEntries(Object.keys(rates).map((t) => [t, (growing[t] ?? 0) / sent[t]!]));
}

describe("TenantGrowth", () => {
  it("never judges a tenant that sends what it usually does", () => {
    const g = new TenantGrowth();
    expect(drive(g, { a: 1_000, b: 3_000 }, 0, 20 * 60_000)).toEqual({ a: 0, b: 0 });
  });

  it("judges a tenant that grows fivefold past 1.5x its usual rate, and only what it sends past that", () => {
    const g = new TenantGrowth();
    drive(g, { a: 1_000, b: 3_000 }, 0, 5 * 60_000);
    // a at five times its rate for two minutes: its last minute fills to 1.5x its usual; then it
    // keeps its usual alone (raised by what it sent within its allowance: five minutes of history
    // are its usual's mean), so nearly three quarters is growth.
    const out = drive(g, { a: 5_000, b: 3_000 }, 5 * 60_000, 7 * 60_000);
    expect(out.b).toBe(0);
    expect(out.a).toBeGreaterThan(0.6);
    expect(out.a).toBeLessThan(0.85);
  });

  it("lets a burst within 1.5x its usual rate pass", () => {
    const g = new TenantGrowth();
    drive(g, { a: 1_000, b: 3_000 }, 0, 5 * 60_000);
    expect(drive(g, { a: 1_400, b: 3_000 }, 5 * 60_000, 6 * 60_000)).toEqual({ a: 0, b: 0 });
  });

  it("keeps in its class, while its last minute is past its allowance, only its usual rate: the tolerance is for bursts, not a flood's foothold", () => {
    const g = new TenantGrowth();
    drive(g, { a: 1_000, b: 3_000 }, 0, 5 * 60_000);
    drive(g, { a: 5_000, b: 3_000 }, 5 * 60_000, 7 * 60_000);
    // Two minutes into its flood: each second, what a keeps is reported `over`, the rest `growing`.
    let kept = 0;
    let over = 0;
    for (let now = 7 * 60_000; now < 10 * 60_000; now += 1_000) {
      const v = g.arrived("a", 5_000, now);
      g.arrived("b", 3_000, now);
      if (v !== "growing") kept += 5_000;
      if (v === "over") over += 5_000;
    }
    // Its usual rate: 1,000 tokens a second, raised by a quarter by what it sent within its allowance
    // as its flood began (five minutes of history); not 1.5x that, which its tolerance would keep.
    const perSecond = kept / 180;
    expect(perSecond).toBeGreaterThan(1_000);
    expect(perSecond).toBeLessThan(1_300);
    expect(over).toBe(kept);
  });

  it("judges no one when every tenant grows together: the region grew, not one tenant", () => {
    const g = new TenantGrowth();
    drive(g, { a: 1_000, b: 3_000, c: 2_000 }, 0, 5 * 60_000);
    expect(drive(g, { a: 2_500, b: 7_500, c: 5_000 }, 5 * 60_000, 8 * 60_000)).toEqual({ a: 0, b: 0, c: 0 });
  });

  it("never judges a tenant alone in the region: its growth could take from no one", () => {
    const g = new TenantGrowth();
    drive(g, { a: 1_000 }, 0, 5 * 60_000);
    expect(drive(g, { a: 5_000 }, 5 * 60_000, 7 * 60_000).a).toBe(0);
  });

  it("has no verdict before a tenant has GROWTH_MIN_HISTORY_MS of history", () => {
    const g = new TenantGrowth();
    drive(g, { b: 3_000 }, 0, 5 * 60_000);
    // a new tenant that starts large is not judged by history (the shares judge it: tenant-demand.ts)...
    expect(drive(g, { a: 1_000 }, 5 * 60_000, 5 * 60_000 + 30_000).a).toBe(0);
    expect(drive(g, { a: 10_000 }, 5 * 60_000 + 30_000, 5 * 60_000 + GROWTH_MIN_HISTORY_MS - 1_000).a).toBe(0);
    // ...until it has some: its usual is then what it sent, and it keeps it.
    expect(drive(g, { a: 10_000, b: 3_000 }, 7 * 60_000, 9 * 60_000)).toEqual({ a: 0, b: 0 });
  });

  it("learns a lasting growth as its usual within a few windows, growing by at most 1.5x at a time", () => {
    const g = new TenantGrowth();
    drive(g, { a: 1_000, b: 3_000 }, 0, 5 * 60_000);
    const first = drive(g, { a: 3_000, b: 3_000 }, 5 * 60_000, 10 * 60_000).a!;
    expect(first).toBeGreaterThan(0.05);
    // What it kept raised its usual: later windows judge less of the same rate, then none.
    const later = drive(g, { a: 3_000, b: 3_000 }, 10 * 60_000, 10 * 60_000 + 3 * USUAL_TAU_MS).a!;
    expect(later).toBeLessThan(first);
    expect(drive(g, { a: 3_000, b: 3_000 }, 10 * 60_000 + 3 * USUAL_TAU_MS, 10 * 60_000 + 3 * USUAL_TAU_MS + 5 * 60_000).a).toBe(0);
  });

  it("never judges a tenant judged otherwise (a commitment), and counts its growth in the region's", () => {
    const g = new TenantGrowth();
    drive(g, { a: 1_000, c: 1_000, b: 1_000 }, 0, 5 * 60_000, ["c"]);
    // c (committed) and a double: the region beside a grew as much as a did, so a is in step; c is never judged.
    expect(drive(g, { a: 2_000, c: 4_000, b: 1_000 }, 5 * 60_000, 7 * 60_000, ["c"])).toEqual({ a: 0, c: 0, b: 0 });
  });

  it("forgets the longest idle tenants when it tracks its bound, and judges the newcomer by nothing until it has history", () => {
    const g = new TenantGrowth();
    for (let i = 0; i < 1_024; i++) g.arrived(`t${i}`, 100, 0);
    // Full: a newcomer finds no idle tenant to forget and is not tracked (no verdict), ...
    expect(g.arrived("late", 1_000_000, 1_000)).toBeUndefined();
    // ... and once the others have been idle long enough, it takes a place and is judged once it has history.
    const later = 20 * 60_000;
    drive(g, { late: 1_000, other: 1_000 }, later, later + 5 * 60_000);
    expect(drive(g, { late: 5_000, other: 1_000 }, later + 5 * 60_000, later + 6 * 60_000).late).toBeGreaterThan(0.3);
  });

  it("no longer counts a forgotten tenant in the region's growth: two tenants growing together stay in step", () => {
    const g = new TenantGrowth();
    // A full table of tenants with a usual rate each (two requests a second apart: 6,000 tokens a minute).
    for (let i = 0; i < 1_024; i++) {
      g.arrived(`t${i}`, 100, 0);
      g.arrived(`t${i}`, 100, 1_000);
    }
    // Idle for ten windows and more: forgotten when the newcomers need their places.
    const later = 20 * 60_000;
    drive(g, { late: 1_000, other: 1_000 }, later, later + 5 * 60_000);
    // Both triple: the region beside `late` grew as much as it did. Still counted, the forgotten
    // tenants' 6.1M tokens a minute of usual rate would hide `other`'s growth, and judge `late`.
    expect(drive(g, { late: 3_000, other: 3_000 }, later + 5 * 60_000, later + 7 * 60_000)).toEqual({ late: 0, other: 0 });
  });
  it("judges neither of two alike tenants after a quiet night: a tenant idle ten windows starts anew", () => {
    const g = new TenantGrowth();
    drive(g, { a: 1_000, b: 1_000 }, 0, 10 * 60_000);
    // Two hours of quiet, then both send as before. Its usual decayed to nothing, the first back
    // was judged growing on every request for hours (a usual learns only within its allowance).
    const back = 10 * 60_000 + 2 * 3_600_000;
    expect(drive(g, { a: 1_000, b: 1_000 }, back, back + 60 * 60_000)).toEqual({ a: 0, b: 0 });
  });

  it("judges a tenant back from a pause against what it sent since, once it has history again", () => {
    const g = new TenantGrowth();
    drive(g, { a: 1_000, b: 1_000 }, 0, 5 * 60_000);
    drive(g, { b: 1_000 }, 5 * 60_000, 5 * 60_000 + IDLE_RESET_MS + 1_000); // a pauses past IDLE_RESET_MS
    const back = 5 * 60_000 + IDLE_RESET_MS + 1_000;
    // As a newcomer: no verdict before it has GROWTH_MIN_HISTORY_MS of history, whatever it sends.
    expect(drive(g, { a: 1_000, b: 1_000 }, back, back + GROWTH_MIN_HISTORY_MS).a).toBe(0);
    drive(g, { a: 1_000, b: 1_000 }, back + GROWTH_MIN_HISTORY_MS, back + 5 * 60_000);
    // Then five times what it sent since: growth.
    expect(drive(g, { a: 5_000, b: 1_000 }, back + 5 * 60_000, back + 7 * 60_000).a).toBeGreaterThan(0.5);
  });
});
