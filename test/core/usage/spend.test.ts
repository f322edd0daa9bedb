/** The budget check and the spend a region object reports to the budget ledger (src/core/usage/spend.ts). */
import { describe, expect, it } from "vitest";
import type { Bill } from "../../../src/contracts/usage.ts";
import { overBudgetMessage, overBudgetRetryAfter, SpendView } from "../../../src/core/usage/spend.ts";

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

describe("SpendView with holds (reserve, then settle)", () => {
  const TIMEOUT = 600_000;
  const own = (tokens: number, usd = 0) => ({ tokens, usd });

  it("counts what requests in flight hold: forty at once against 20,000 tokens admit only what fits", () => {
    const v = new SpendView();
    const budget = { tokensPerDay: 20_000 };
    let admitted = 0;
    for (let i = 0; i < 40; i++) {
      const over = v.check("t", budget, AT, own(2_000));
      if (over) {
        expect(over.reserved).toBeGreaterThan(0);
        expect(over.spent).toBe(0);
        continue;
      }
      v.reservations.reserve(`r${i}`, "t", own(2_000), AT, AT + TIMEOUT);
      admitted++;
    }
    expect(admitted).toBe(10);
    // They settle at what they really used (less than held): the room they leave admits more.
    for (let i = 0; i < 10; i++) {
      v.record(bill(1_500), AT);
      v.reservations.release(`r${i}`);
    }
    expect(v.spent("t", "2026-12-04").tokens).toBe(15_000);
    expect(v.check("t", budget, AT, own(2_000))).toBeUndefined();
    v.reservations.reserve("late-1", "t", own(2_000), AT, AT + TIMEOUT);
    v.reservations.reserve("late-2", "t", own(2_000), AT, AT + TIMEOUT);
    expect(v.check("t", budget, AT, own(2_000))?.reserved).toBe(4_000);
  });

  it("with nothing in flight, a request that does not fit whole goes on with what is left, and is then the only one", () => {
    const v = new SpendView();
    const budget = { tokensPerDay: 3_000 };
    v.record(bill(2_500), AT);
    expect(v.check("t", budget, AT, own(4_300))).toBeUndefined();
    v.reservations.reserve("last", "t", own(4_300), AT, AT + TIMEOUT);
    expect(v.check("t", budget, AT, own(10))?.reserved).toBe(4_300);
    v.record(bill(600), AT);
    v.reservations.release("last");
    // Spent now: refused until the day ends, and that refusal (unlike a hold's) is remembered.
    const spent = v.check("t", budget, AT, own(10));
    expect(spent).toEqual({ limit: "tokens_per_day", budget: 3_000, spent: 3_100, resetsAt: Date.UTC(2026, 11, 5) });
    expect(v.isNew("t", spent!)).toBe(true);
  });

  it("holds USD at the tenant's price against a USD budget; a refusal for holds is not remembered and retries in a second", () => {
    const v = new SpendView();
    v.reservations.reserve("a", "t", own(100, 0.8), AT, AT + TIMEOUT);
    const over = v.check("t", { usdPerDay: 1 }, AT, own(100, 0.3));
    expect(over).toMatchObject({ limit: "usd_per_day", reserved: 0.8, spent: 0 });
    expect(v.isNew("t", over!)).toBe(false);
    expect(overBudgetRetryAfter(over!, AT)).toBe(1);
    expect(overBudgetMessage("t", over!)).toBe(
      "Tenant t's budget of USD 1.00 a day (UTC) is spent or held by its requests in flight (USD 0.00 spent over every region, USD 0.80 held by requests in flight here); retry when they finish",
    );
    expect(v.check("t", { usdPerDay: 1 }, AT, own(100, 0.2))).toBeUndefined();
    expect(overBudgetRetryAfter({ limit: "usd_per_day", budget: 1, spent: 1, resetsAt: AT + 3_600_500 }, AT)).toBe(3_601);
  });
});
