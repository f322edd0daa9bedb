/** The budget check and the spend a region object reports to the budget ledger (src/core/usage/spend.ts). */
import { describe, expect, it } from "vitest";
import type { Bill } from "../../../src/contracts/usage.ts";
import { overBudgetMessage, SpendView } from "../../../src/core/usage/spend.ts";

const AT = Date.UTC(2026, 11, 4, 12, 0, 0);
const bill = (tokens: number, usd = 0, tenant = "t"): Bill => ({
  tenant,
  model: "m",
  estimated: false,
  promptTokens: tokens - 10,
  cachedTokens: 0,
  completionTokens: 10,
  costUsd: usd,
  budgeted: true,
});

describe("SpendView", () => {
  it("refuses once the tenant's own spend reaches a budget, saying which and when it resets", () => {
    const v = new SpendView();
    v.record(bill(600), AT);
    expect(v.check("t", { tokensPerDay: 1000 }, AT)).toBeUndefined();
    v.record(bill(400), AT);
    expect(v.check("t", { tokensPerDay: 1000 }, AT)).toEqual({
      limit: "tokens_per_day",
      budget: 1000,
      spent: 1000,
      resetsAt: Date.UTC(2026, 11, 5),
    });
    // Another tenant, and tomorrow, are untouched.
    expect(v.check("u", { tokensPerDay: 1000 }, AT)).toBeUndefined();
    expect(v.check("t", { tokensPerDay: 1000 }, AT + 86_400_000)).toBeUndefined();
    // The month counts both days.
    v.record(bill(500), AT + 86_400_000);
    expect(v.check("t", { tokensPerMonth: 1500 }, AT + 86_400_000)?.limit).toBe("tokens_per_month");
    expect(v.check("t", { tokensPerMonth: 1500 }, AT + 86_400_000)?.resetsAt).toBe(Date.UTC(2027, 0, 1));
  });

  it("counts USD budgets from the bills' cost, and ignores unbudgeted tenants' bills", () => {
    const v = new SpendView();
    v.record(bill(10, 0.75), AT);
    expect(v.check("t", { usdPerDay: 1 }, AT)).toBeUndefined();
    v.record(bill(10, 0.25), AT);
    expect(v.check("t", { usdPerDay: 1 }, AT)?.limit).toBe("usd_per_day");
    v.record({ ...bill(5000, 0, "free"), budgeted: false }, AT);
    expect(v.pending).toBe(true);
    expect(v.takeBatch().spends.filter((s) => s.tenant === "free")).toEqual([]);
  });

  it("counts the other regions' spend from the ledger's totals, and a batch once whether acknowledged or not", () => {
    const v = new SpendView();
    v.record(bill(300), AT);
    const batch = v.takeBatch();
    expect(batch.spends).toEqual(
      expect.arrayContaining([
        { tenant: "t", period: "2026-12-04", tokens: 300, usd: 0 },
        { tenant: "t", period: "2026-12", tokens: 300, usd: 0 },
      ]),
    );
    // Not acknowledged yet: still counted, and resent as it was.
    expect(v.spent("t", "2026-12-04").tokens).toBe(300);
    v.record(bill(100), AT);
    expect(v.takeBatch()).toBe(batch);
    expect(v.spent("t", "2026-12-04").tokens).toBe(400);
    // The ledger's totals include this batch and 700 spent elsewhere.
    v.acknowledge(batch.seq, [{ tenant: "t", period: "2026-12-04", tokens: 1000, usd: 0 }], AT);
    expect(v.spent("t", "2026-12-04").tokens).toBe(1100);
    expect(v.check("t", { tokensPerDay: 1100 }, AT)?.spent).toBe(1100);
    const next = v.takeBatch();
    expect(next.seq).toBe(batch.seq + 1);
    expect(next.spends.find((s) => s.period === "2026-12-04")?.tokens).toBe(100);
  });

  it("a remembered spent budget holds after a restart until it resets or the budget changes", () => {
    const v = new SpendView();
    const over = { limit: "tokens_per_day" as const, budget: 1000, spent: 1200, resetsAt: Date.UTC(2026, 11, 5) };
    v.remember("t", over);
    expect(v.check("t", { tokensPerDay: 1000 }, AT)?.spent).toBe(1200);
    expect(v.isNew("t", over)).toBe(false);
    expect(v.check("t", { tokensPerDay: 2000 }, AT)).toBeUndefined();
    expect(v.check("t", { tokensPerDay: 1000 }, Date.UTC(2026, 11, 5, 0, 0, 1))).toBeUndefined();
  });

  it("words the refusal with the budget, the spend and the reset", () => {
    const msg = overBudgetMessage("acme", { limit: "usd_per_month", budget: 50, spent: 50.4, resetsAt: Date.UTC(2027, 0, 1) });
    expect(msg).toBe(
      "Tenant acme has spent its budget of USD 50.00 a month (UTC) (USD 50.40 spent over every region); it resets at 2027-01-01T00:00:00Z",
    );
  });
});
