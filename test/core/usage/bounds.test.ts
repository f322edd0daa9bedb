/** The ledgers' bounds (src/core/usage/bounds.ts): an absurd bill is clamped, and no sum passes what the contracts accept. */
import { describe, expect, it } from "vitest";
import { usageRowSchema, type Bill, type UsageRow } from "../../../src/contracts/usage.ts";
import {
  addTokens,
  addUsd,
  clampBill,
  MAX_REQUEST_TOKENS,
  MAX_REQUEST_USD,
  MAX_TOKENS_SUM,
  MAX_USD_SUM,
  tokenCount,
  usdAmount,
} from "../../../src/core/usage/bounds.ts";
import { PendingUsage } from "../../../src/core/usage/pending.ts";
import { boundedRow, mergeUsageRows } from "../../../src/core/usage/rows.ts";
import { SpendView } from "../../../src/core/usage/spend.ts";
import { spendReportSchema } from "../../../src/contracts/usage.ts";

const AT = Date.UTC(2026, 11, 5, 12);
const bill = (over: Partial<Bill> = {}): Bill => ({
  tenant: "t",
  model: "m",
  estimated: false,
  promptTokens: 10,
  cachedTokens: 0,
  completionTokens: 5,
  costUsd: 0.01,
  budgeted: true,
  ...over,
});

describe("clampBill", () => {
  it("leaves a real bill as it is", () => {
    const b = bill();
    expect(clampBill(b)).toEqual({ bill: b, clamped: [] });
  });

  it("counts an absurd, negative or fractional figure at what one request can cost, naming it", () => {
    const { bill: b, clamped } = clampBill(bill({ completionTokens: 9e15, promptTokens: -100, cachedTokens: 2.5, costUsd: 3.6e9 }));
    expect(clamped).toEqual(["promptTokens", "cachedTokens", "completionTokens", "costUsd"]);
    expect(b).toMatchObject({ completionTokens: MAX_REQUEST_TOKENS, promptTokens: 0, cachedTokens: 2, costUsd: MAX_REQUEST_USD });
    expect(clampBill(bill({ costUsd: Number.NaN })).bill.costUsd).toBe(MAX_REQUEST_USD);
  });
});

describe("saturating sums", () => {
  it("never pass the contracts' bounds, nor go below 0", () => {
    expect(addTokens(MAX_TOKENS_SUM - 1, 5)).toBe(MAX_TOKENS_SUM);
    expect(addTokens(3, -10)).toBe(0);
    expect(addUsd(MAX_USD_SUM, 1)).toBe(MAX_USD_SUM);
    expect(tokenCount(2 ** 60)).toBe(MAX_TOKENS_SUM);
    expect(tokenCount(Number.POSITIVE_INFINITY)).toBe(MAX_TOKENS_SUM);
    expect(usdAmount(-1)).toBe(0);
  });

  it("two absurd bills (9e15 completion tokens each) leave a row and a spend batch the contracts accept", () => {
    const pending = new PendingUsage();
    const spend = new SpendView();
    for (let i = 0; i < 2; i++) {
      // What the region object counts: the bill clamped first (durable-objects/region.ts), and even unclamped the sums saturate.
      pending.add(bill({ completionTokens: 9e15, costUsd: 1e12 }), AT);
      spend.record(bill({ completionTokens: 9e15, costUsd: 1e12 }), AT);
    }
    const [row] = pending.take();
    expect(row!.completionTokens).toBe(MAX_TOKENS_SUM);
    expect(row!.costUsd).toBe(MAX_USD_SUM);
    const batch = spend.takeBatch();
    expect(() => spendReportSchema.parse({ source: "eu/0/x", seq: batch.seq, spends: batch.spends, periods: [] })).not.toThrow();
    expect(batch.spends.every((s) => s.tokens === MAX_TOKENS_SUM)).toBe(true);
    // The ledger's totals come back at the bound too: the budget is spent, and stays a number.
    spend.acknowledge(batch.seq, [{ tenant: "t", period: "2026-12-05", tokens: MAX_TOKENS_SUM, usd: MAX_USD_SUM }], AT);
    expect(spend.check("t", { tokensPerDay: 1000 }, AT)?.spent).toBe(MAX_TOKENS_SUM);
  });

  it("a stored row past 2^53 is exported at the bound, and merging two never overflows", () => {
    const row: UsageRow = {
      tenant: "t",
      day: "2026-12-05",
      model: "m",
      region: "eu",
      requests: 2,
      prompt_tokens: 20,
      cached_tokens: 0,
      completion_tokens: 1.8e16,
      cost_usd: 7.2e9,
      estimated_requests: 0,
      estimated_prompt_tokens: 0,
      estimated_completion_tokens: 0,
      estimated_cost_usd: 0,
    };
    expect(usageRowSchema.safeParse(row).success).toBe(false);
    const bounded = boundedRow(row);
    expect(usageRowSchema.parse(bounded).completion_tokens).toBe(MAX_TOKENS_SUM);
    const [merged] = mergeUsageRows([bounded, bounded]);
    expect(usageRowSchema.parse(merged).completion_tokens).toBe(MAX_TOKENS_SUM);
    expect(merged!.requests).toBe(4);
  });
});
