/** ActiveDemand: the active tenants' demand by class, summed and ordered as it changes (src/core/region/active-demand.ts). */
import { describe, expect, it } from "vitest";
import { ActiveDemand, demandAt, type Listing, type Tracked } from "../../src/core/region/active-demand.ts";
import { DEMAND_TAU_MS } from "../../src/core/region/class-reserve.ts";
import { seededRandom } from "../../src/core/random.ts";

type T = Tracked & { listing: Listing };

describe("ActiveDemand", () => {
  it("sums and ranks what summing every tenant afresh gives, as tenants arrive, change class and go quiet", () => {
    const active = new ActiveDemand<T>();
    const tenants = new Map<string, T>();
    const random = seededRandom(11);
    let now = 1_700_000_000_000;
    const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));
    for (let step = 0; step < 4_000; step++) {
      now += Math.floor(random() * 400);
      active.advance(now);
      const name = `t${Math.floor(random() * 80)}`;
      let d = tenants.get(name);
      if (!d) tenants.set(name, (d = { name, tokens: 0, at: now, weight: 1, rank: 0, active: false, key: 0, listing: undefined }));
      active.leave(d);
      d.tokens = demandAt(d, now) + Math.floor(10 ** (random() * 6));
      d.at = now;
      d.weight = [1, 2, 0.5][Math.floor(random() * 3)]!;
      d.rank = Math.floor(random() * 3);
      d.listing = (["shares", "shares", "within-commitment", undefined] as const)[Math.floor(random() * 4)];
      active.join(d);
      active.list(d, d.listing);

      const live = [...tenants.values()].filter((t) => now - t.at <= DEMAND_TAU_MS);
      for (const maxRank of [0, 1, 2, Infinity]) {
        const of = live.filter((t) => t.rank <= maxRank);
        const got = active.totals(now, maxRank);
        const total = of.reduce((s, t) => s + demandAt(t, now), 0);
        const weights = of.reduce((s, t) => s + t.weight, 0);
        if (got.active !== of.length || !close(got.total, total) || !close(got.weights, weights))
          throw new Error(`step ${step}, ranks to ${maxRank}: ${JSON.stringify(got)} against ${of.length}, ${total}, ${weights}`);
      }
      // The largest within, by shares up to a limit per weight, or within a commitment: as a pass over them all finds it.
      const own = live[Math.floor(random() * live.length)]!;
      const perWeight = live.map((t) => demandAt(t, now) / t.weight).sort((a, b) => a - b);
      // No limit; a tenant's own demand per weight exactly (keys round: it may sit a hair above its key); or about one.
      const roll = random();
      const at = perWeight[Math.floor(random() * perWeight.length)]!;
      const limit = roll < 0.2 ? Infinity : roll < 0.5 ? at : at * (0.5 + random());
      const within = (t: T, demand: number) => demand / t.weight <= limit;
      const expected = live
        .filter((t) => t !== own && t.rank === own.rank)
        .filter((t) => t.listing === "within-commitment" || (t.listing === "shares" && within(t, demandAt(t, now))))
        .reduce((m, t) => Math.max(m, demandAt(t, now) / t.weight), 0);
      const got = active.largestWithin(own, own.rank, now, limit, within);
      if (!close(got, expected)) throw new Error(`step ${step}: largest within ${got} against ${expected}`);
    }
    // Every tenant quiet: nothing left to count.
    active.advance(now + DEMAND_TAU_MS + 1);
    expect(active.totals(now + DEMAND_TAU_MS + 1)).toEqual({ total: 0, weights: 0, active: 0 });
  });
});
