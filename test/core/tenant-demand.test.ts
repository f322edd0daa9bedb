/** TenantDemand: which tenants are flooding, and over whose share (src/core/region/tenant-demand.ts). */
import { describe, expect, it } from "vitest";
import { COMMITMENT_TAU_MS, TenantDemand, type Flooding } from "../../src/core/region/tenant-demand.ts";
import { DEMAND_TAU_MS } from "../../src/core/region/class-reserve.ts";
import { demotedRank, EXCESS_RANK, RANKS, rankClass } from "../../src/core/region/admission-queue.ts";

describe("TenantDemand", () => {
  it("finds a tenant over 1.5x its weighted share of the active tenants' recent prefill, and only then", () => {
    const d = new TenantDemand();
    d.arrived("alone", 1, 1_000_000, 0, 1);
    expect(d.overShare("alone", 0)).toBeUndefined(); // one tenant has no one to starve
    d.arrived("light", 1, 100_000, 0, 1);
    expect(d.overShare("alone", 0)).toBe("everyone"); // 91% against a 50% share
    expect(d.overShare("light", 0)).toBeUndefined();
    // Alike tenants never demote each other: 60% of two is under 1.5 x 50%.
    const e = new TenantDemand();
    e.arrived("a", 1, 60_000, 0, 1);
    e.arrived("b", 1, 40_000, 0, 1);
    expect(e.overShare("a", 0)).toBeUndefined();
    // Weights: a tenant of weight 3 may send three times as much.
    const w = new TenantDemand();
    w.arrived("big", 3, 700_000, 0, 1);
    w.arrived("small", 1, 300_000, 0, 1);
    expect(w.overShare("big", 0)).toBeUndefined();
    // Once the other tenant has been quiet for the demand window, it no longer counts.
    d.arrived("alone", 1, 1, DEMAND_TAU_MS + 1, 1);
    expect(d.overShare("alone", DEMAND_TAU_MS + 1)).toBeUndefined();
  });

  it("counts a tenant exactly at its limit within it, whichever way its demand's sum rounds", () => {
    // A of weight 2 asks all the demand, B of weight 1 only cached prompts: A's share is 2/3, and 1.5 x 2/3 of the demand is all of it.
    for (let k = 0; k < 50; k++) {
      const d = new TenantDemand();
      let now = 1_700_000_000_000 + k * 7_919;
      d.arrived("B", 1, 0, now, 1);
      for (let i = 0; i < 3; i++) d.arrived("A", 2, 1_000 + 13 * k, (now += 137 + k), 1);
      expect(d.overShare("A", now + 53)).toBeUndefined();
    }
  });

  it("takes a clock that steps back as standing still", () => {
    const run = (cAt: number) => {
      const d = new TenantDemand();
      d.arrived("A", 1, 1_200, 5_000, 1);
      d.arrived("B", 1, 1_000, 10_000, 1);
      d.arrived("C", 1, 100, cAt, 1);
      return ["A", "B", "C"].map((t) => d.overShare(t, cAt));
    };
    // C's arrival stamped 5 s before B's is judged as if it came with B.
    expect(run(5_000)).toEqual(run(10_000));
  });

  it("finds a tenant over its share of its own class and those above, hidden by a lower class's demand", () => {
    const d = new TenantDemand();
    // Ranks: 0 interactive, 1 standard, 2 batch. The batch tenant asks most of the region's prefill.
    d.arrived("batch", 1, 1_000_000, 0, 2);
    d.arrived("chat", 1, 100_000, 0, 0);
    d.arrived("rag-b", 1, 100_000, 0, 1);
    d.arrived("rag-a", 1, 400_000, 0, 1);
    // rag-a: 25% of everyone's demand, under 1.5 x 25%; but 67% of its peers' (chat, rag-b, rag-a), over 1.5 x 33%.
    expect(d.overShare("rag-a", 0)).toBe("peers");
    expect(d.overShare("rag-b", 0)).toBeUndefined();
    expect(d.overShare("chat", 0)).toBeUndefined(); // its peers are itself alone: judged against everyone only
    // The batch tenant's peers are everyone: 62.5% of the demand is over 1.5 x 25%, but it is batch already.
    expect(d.overShare("batch", 0)).toBe("everyone");
  });

  it("finds the tenants over everyone's share as overShare finds them, and again after an arrival at the same instant", () => {
    const d = new TenantDemand();
    const tenants = ["batch", "chat", "rag-a"];
    d.arrived("batch", 1, 1_000_000, 0, 2);
    d.arrived("chat", 1, 100_000, 0, 0);
    d.arrived("rag-a", 1, 400_000, 0, 1);
    expect(tenants.filter(d.floodsEveryone(0))).toEqual(["batch"]); // 66.7% against 1.5 x a third; rag-a's 26.7% is within
    d.arrived("rag-a", 1, 1_500_000, 0, 1); // now 1,900,000 of 3,000,000: over, and batch within
    expect(tenants.filter(d.floodsEveryone(0))).toEqual(["rag-a"]);
    for (const t of tenants) expect(d.floodsEveryone(0)(t)).toBe(d.overShare(t, 0) === "everyone");
    expect(tenants.filter(d.floodsEveryone(DEMAND_TAU_MS * 2))).toEqual([]); // everyone quiet: no one to starve
  });

  it("demotes as far as the flood reaches: over its peers' share to batch, over everyone's below batch; batch stays batch", () => {
    // Ranks: 0 interactive, 1 standard, 2 batch.
    expect(demotedRank(0, undefined)).toBe(0);
    expect(demotedRank(0, "peers")).toBe(2);
    expect(demotedRank(1, "peers")).toBe(2);
    expect(demotedRank(0, "everyone")).toBe(EXCESS_RANK);
    expect(demotedRank(1, "everyone")).toBe(EXCESS_RANK);
    expect(demotedRank(2, "everyone")).toBe(2);
    expect(EXCESS_RANK).toBeGreaterThan(2);
  });

  it("ranks a tenant past its commitment after every class, in its class's order; a batch one with the share's excess, last", () => {
    const ranks = [0, 1, 2].map((asked) => demotedRank(asked, "commitment"));
    expect(ranks).toEqual([3, 4, 5]);
    expect(ranks.at(-1)).toBe(EXCESS_RANK);
    expect(RANKS).toBe(6);
    // Reported as batch: it ranks after every class.
    expect(ranks.map(rankClass)).toEqual(["batch", "batch", "batch"]);
  });
});

describe("TenantDemand.judge: the peer floor", () => {
  // Ranks: 0 interactive, 1 standard, 2 batch. A batch tenant asks most of the region's prefill,
  // two standard tenants the rest; "big" asks twice what its sibling does.
  const region = () => {
    const d = new TenantDemand();
    d.arrived("batch", 1, 100_000, 0, 2);
    d.arrived("small", 1, 30_000, 0, 1);
    return d;
  };

  it("keeps a large tenant in its class until it has been given what its largest peer within its share asks, then demotes the rest", () => {
    const d = region();
    // 200,000 at once: over everyone's share (1.5 x a third of 330,000), and nothing given yet.
    d.arrived("big", 1, 200_000, 0, 1);
    expect(d.judge("big", 0)).toBe("everyone");
    // The floor is small's 30,000: six requests of 5,000 keep their class, the rest are demoted.
    const verdicts: Array<string | undefined> = [];
    for (let i = 0; i < 10; i++) {
      d.arrived("big", 1, 5_000, 0, 1);
      verdicts.push(d.judge("big", 0));
    }
    expect(verdicts).toEqual([...Array<undefined>(6).fill(undefined), "everyone", "everyone", "everyone", "everyone"]);
    // The query itself gives nothing: overShare still says it floods.
    expect(d.overShare("big", 0)).toBe("everyone");
    // A tenant within its share keeps its class, floor or not.
    d.arrived("small", 1, 5_000, 0, 1);
    expect(d.judge("small", 0)).toBeUndefined();
  });

  it("counts what a demoted tenant was given below its class: served there, it keeps no more of its class", () => {
    const d = region();
    d.arrived("big", 1, 200_000, 0, 1);
    expect(d.judge("big", 0)).toBe("everyone");
    // The spare capacity dispatched 30,000 of its demoted requests: the floor is met.
    d.dispatchedDemoted("big", 30_000, 0);
    d.arrived("big", 1, 5_000, 0, 1);
    expect(d.judge("big", 0)).toBe("everyone");
    // Once that has decayed (the demand window), the floor opens again.
    const later = 3 * DEMAND_TAU_MS;
    d.arrived("batch", 1, 100_000, later, 2);
    d.arrived("small", 1, 30_000, later, 1);
    d.arrived("big", 1, 200_000, later, 1);
    expect(d.judge("big", later)).toBe("everyone");
    d.arrived("big", 1, 5_000, later, 1);
    expect(d.judge("big", later)).toBeUndefined();
  });

  it("gives no floor without a peer of the same class within its share, nor to a tenant past its commitment", () => {
    // Its only peer floods too: no floor.
    const d = new TenantDemand();
    d.arrived("batch", 1, 10_000, 0, 2);
    d.arrived("a", 1, 400_000, 0, 1);
    d.arrived("b", 1, 400_000, 0, 1);
    d.arrived("quiet", 1, 1_000, 0, 0);
    expect(d.overShare("b", 0)).toBe("everyone");
    expect(d.judge("b", 0)).toBe("everyone");
    // A peer of another class is no floor: the interactive tenant within its share does not count for a standard one.
    const e = new TenantDemand();
    e.arrived("chat", 1, 50_000, 0, 0);
    e.arrived("rag", 1, 500_000, 0, 1);
    expect(e.judge("rag", 0)).toBe("everyone");
    // Past its commitment: judged by the commitment alone.
    const c = new TenantDemand();
    c.arrived("small", 1, 30_000, 0, 1);
    c.arrived("big", 1, 1_000, 0, 1, { perMinute: 1_000, promptTokens: 1_000 });
    c.arrived("big", 1, 1_000, 0, 1, { perMinute: 1_000, promptTokens: 10_000 });
    expect(c.judge("big", 0)).toBe("commitment");
  });
});

describe("TenantDemand with commitments", () => {
  const PER_MINUTE = 60_000;
  const commit = (promptTokens: number) => ({ perMinute: PER_MINUTE, promptTokens });

  it("counts a peer within its commitment in the floor however much it asks, and not once it is past it", () => {
    const d = new TenantDemand();
    d.arrived("light", 1, 10_000, 0, 0);
    d.arrived("batch", 1, 10_000, 0, 2);
    d.arrived("committed", 1, 900_000, 0, 1, commit(50_000)); // within its commitment, over every share
    d.arrived("big", 1, 600_000, 0, 1); // over everyone's share: 1.5 x a quarter of 1,520,000 is 570,000
    expect(d.overShare("committed", 0)).toBeUndefined();
    expect(d.overShare("big", 0)).toBe("everyone");
    // Its floor is its committed peer's 900,000: it keeps its class.
    expect(d.judge("big", 0)).toBeUndefined();
    // Past its commitment the peer is no floor: big's next request is demoted.
    d.arrived("committed", 1, 1_000, 0, 1, commit(100_000));
    expect(d.overShare("committed", 0)).toBe("commitment");
    d.arrived("big", 1, 5_000, 0, 1);
    expect(d.judge("big", 0)).toBe("everyone");
  });

  it("tracks a newcomer once a full table has idle tenants to forget", () => {
    const d = new TenantDemand();
    for (let i = 0; i < 1_024; i++) d.arrived(`t${i}`, 1, 1_000, 0, 1);
    // Full, every tenant active: the newcomer is not tracked, and judged by nothing.
    d.arrived("late", 1, 1_000_000, 1_000, 1);
    expect(d.overShare("late", 1_000)).toBeUndefined();
    // Once they are idle, it takes a place, and its flood beside a light tenant is seen.
    const later = 3 * DEMAND_TAU_MS;
    d.arrived("light", 1, 1_000, later, 1);
    d.arrived("late", 1, 1_000_000, later, 1);
    expect(d.overShare("late", later)).toBe("everyone");
  });

  it("keeps a tenant within its commitment in its class although it is over every share of the demand", () => {
    const d = new TenantDemand();
    d.arrived("light", 1, 1_000, 0, 1);
    d.arrived("big", 1, 900_000, 0, 1, commit(50_000));
    expect(d.overShare("big", 0)).toBeUndefined();
    expect(d.floodsEveryone(0)("big")).toBe(false);
    // The same demand without a commitment floods.
    const e = new TenantDemand();
    e.arrived("light", 1, 1_000, 0, 1);
    e.arrived("big", 1, 900_000, 0, 1);
    expect(e.overShare("big", 0)).toBe("everyone");
  });

  it("past its commitment, demotes only the part beyond it: the committed part keeps its class", () => {
    const d = new TenantDemand();
    d.arrived("other", 1, 1_000_000, 0, 1);
    const verdicts: Array<string | undefined> = [];
    // Ten requests of 10,000 prompt tokens at one instant, against a 60,000-a-minute commitment,
    // while it asks little of the uncached demand (within its share): 6 fit, the band to 1.5x
    // is judged by its share (within: 3 more), the last is past 1.5x.
    for (let i = 0; i < 10; i++) {
      d.arrived("committed", 1, 1_000, 0, 1, commit(10_000));
      verdicts.push(d.overShare("committed", 0));
    }
    expect(verdicts.filter((v) => v === undefined)).toHaveLength(9);
    expect(verdicts.slice(9)).toEqual(["commitment"]);
    // A request that lost its class is not counted as kept: the next minute frees the commitment.
    d.arrived("other", 1, 1_000_000, COMMITMENT_TAU_MS * 5, 1);
    d.arrived("committed", 1, 1_000, COMMITMENT_TAU_MS * 5, 1, commit(10_000));
    expect(d.overShare("committed", COMMITMENT_TAU_MS * 5)).toBeUndefined();
  });

  it("in the band between its commitment and 1.5x it, keeps its class only while within its share of the demand", () => {
    const d = new TenantDemand();
    d.arrived("other", 1, 10_000, 0, 1);
    // Its uncached demand dwarfs the other's: over everyone's share.
    d.arrived("committed", 1, 1_000_000, 0, 1, commit(60_000)); // exactly its commitment: kept
    expect(d.overShare("committed", 0)).toBeUndefined();
    d.arrived("committed", 1, 1_000_000, 0, 1, commit(10_000)); // in the band, over its share
    expect(d.overShare("committed", 0)).toBe("commitment");
    expect(d.floodsEveryone(0)("committed")).toBe(true);
  });

  it("judges a tenant by shares again once its configuration has no commitment", () => {
    const d = new TenantDemand();
    d.arrived("light", 1, 1_000, 0, 1);
    d.arrived("big", 1, 900_000, 0, 1, commit(1_000));
    d.arrived("big", 1, 1_000, 0, 1);
    expect(d.overShare("big", 0)).toBe("everyone");
  });

  it("while a tenant sends past its usual rate, ranks what it keeps over its peers' share with its excess, not level with batch", () => {
    const d = new TenantDemand();
    // A batch tenant asks most of the prefill, so the standard tenants are judged by their peers' share.
    const second = (now: number, aRequests: number) => {
      const verdicts: Array<string | undefined> = [];
      d.arrived("z", 1, 20_000, now, 2, { promptTokens: 20_000 });
      d.arrived("b", 1, 1_000, now + 100, 1, { promptTokens: 1_000 });
      expect(d.judge("b", now + 100)).toBeUndefined();
      for (let i = 0; i < aRequests; i++) {
        d.arrived("a", 1, 1_000, now + 200 + i, 1, { promptTokens: 1_000 });
        verdicts.push(d.judge("a", now + 200 + i));
      }
      return verdicts;
    };
    for (let now = 0; now < 5 * 60_000; now += 1_000) expect(second(now, 1)).toEqual([undefined]);
    // a at five times its rate: 83% of its peers' demand (a and b), over 1.5x half. Within its usual
    // it keeps its class up to the peer floor (b's demand); over the floor, and past its usual, it
    // is its growth's excess: never the batch class (`peers`), where it would take the batch tenant's turn.
    const verdicts: Array<string | undefined> = [];
    for (let now = 5 * 60_000; now < 7 * 60_000; now += 1_000) verdicts.push(...second(now, 5));
    const late = verdicts.slice(5 * 60);
    expect(late.every((v) => v === undefined || v === "growth")).toBe(true);
    expect(late.filter((v) => v === undefined).length).toBeGreaterThan(0);
    expect(late.filter((v) => v === "growth").length).toBeGreaterThan(late.length / 2);
    expect(demotedRank(1, "growth")).toBeGreaterThan(demotedRank(1, "peers"));
  });

  it("keeps a batch tenant past its usual rate batch for its usual rate, over its share as it is: batch is its class", () => {
    const d = new TenantDemand();
    const second = (now: number, zRequests: number) => {
      const verdicts: Flooding[] = [];
      d.arrived("a", 1, 1_000, now, 1, { promptTokens: 1_000 });
      d.arrived("b", 1, 1_000, now + 100, 1, { promptTokens: 1_000 });
      for (let i = 0; i < zRequests; i++) {
        d.arrived("z", 1, 20_000, now + 200 + i, 2, { promptTokens: 20_000 });
        verdicts.push(d.judge("z", now + 200 + i));
      }
      return verdicts;
    };
    // z asks 91% of the prefill (over 1.5x a third): by shares it is over everyone's, and batch already.
    for (let now = 0; now < 5 * 60_000; now += 1_000) for (const v of second(now, 1)) expect(demotedRank(2, v)).toBe(2);
    expect(d.overShare("z", 5 * 60_000)).toBe("everyone");
    const late: Flooding[] = [];
    for (let now = 5 * 60_000; now < 7 * 60_000; now += 1_000) late.push(...second(now, 5));
    const last = late.slice(5 * 60);
    // At five times its rate, its usual keeps its class (the share's verdict, undefined or batch's own), the rest is growth.
    expect(last.filter((v) => v !== "growth").length).toBeGreaterThan(last.length / 10);
    expect(last.filter((v) => v === "growth").length).toBeGreaterThan(last.length / 2);
    for (const v of last) if (v !== "growth") expect(demotedRank(2, v)).toBe(2);
  });
});
