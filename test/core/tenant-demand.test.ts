/** TenantDemand: which tenants are flooding, and over whose share (src/core/region/tenant-demand.ts). */
import { describe, expect, it } from "vitest";
import { TenantDemand } from "../../src/core/region/tenant-demand.ts";
import { DEMAND_TAU_MS } from "../../src/core/region/class-reserve.ts";
import { demotedRank, EXCESS_RANK } from "../../src/core/region/admission-queue.ts";

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

  it("lists the tenants over everyone's share as overShare finds them, and again after an arrival at the same instant", () => {
    const d = new TenantDemand();
    d.arrived("batch", 1, 1_000_000, 0, 2);
    d.arrived("chat", 1, 100_000, 0, 0);
    d.arrived("rag-a", 1, 400_000, 0, 1);
    expect([...d.overEveryone(0)]).toEqual(["batch"]); // 66.7% against 1.5 x a third; rag-a's 26.7% is within
    d.arrived("rag-a", 1, 1_500_000, 0, 1); // now 1,900,000 of 3,000,000: over, and batch within
    expect([...d.overEveryone(0)]).toEqual(["rag-a"]);
    for (const t of ["batch", "chat", "rag-a"]) expect(d.overEveryone(0).has(t)).toBe(d.overShare(t, 0) === "everyone");
    expect(d.overEveryone(DEMAND_TAU_MS * 2).size).toBe(0); // everyone quiet: no one to starve
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
});
