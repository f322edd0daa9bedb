/** Periods, prices and the usage rows of the ledger (src/core/usage/). */
import { describe, expect, it } from "vitest";
import type { Bill, UsageRow } from "../../../src/contracts/usage.ts";
import { costUsd, priceOf } from "../../../src/core/usage/cost.ts";
import { MAX_PENDING_ROWS, PendingUsage } from "../../../src/core/usage/pending.ts";
import { dayEndsAt, daysBefore, isCalendarDay, monthEndsAt, utcDay, utcMonth } from "../../../src/core/usage/periods.ts";
import { gatherBounded, mergeUsageRows, roundUsd, usageCsv } from "../../../src/core/usage/rows.ts";

const bill = (over: Partial<Bill> = {}): Bill => ({
  tenant: "t",
  model: "m",
  estimated: false,
  promptTokens: 100,
  cachedTokens: 40,
  completionTokens: 10,
  costUsd: 0.001,
  budgeted: false,
  ...over,
});

describe("periods", () => {
  it("are UTC days and months, ending at the next midnight and the next 1st", () => {
    const at = Date.UTC(2026, 11, 31, 23, 59, 59);
    expect(utcDay(at)).toBe("2026-12-31");
    expect(utcMonth(at)).toBe("2026-12");
    expect(dayEndsAt(at)).toBe(Date.UTC(2027, 0, 1));
    expect(monthEndsAt(at)).toBe(Date.UTC(2027, 0, 1));
    expect(daysBefore(Date.UTC(2026, 2, 1), 1)).toBe("2026-02-28");
    expect(isCalendarDay("2028-02-29")).toBe(true);
    expect(isCalendarDay("2026-02-29")).toBe(false);
    expect(isCalendarDay("2026-2-1")).toBe(false);
  });
});

describe("prices", () => {
  const prices = [{ model: "m", input: 2, cached_input: 0.5, output: 8 }];
  it("price cached prompt tokens apart, per million, and a tenant's own entry first", () => {
    expect(
      costUsd({ promptTokens: 1_000_000, cachedTokens: 400_000, completionTokens: 100_000 }, priceOf("m", prices, undefined)),
    ).toBeCloseTo(1.2 + 0.2 + 0.8, 12);
    expect(priceOf("m", prices, [{ model: "m", input: 1, output: 1 }])).toEqual({ input: 1, cachedInput: 1, output: 1 });
    expect(priceOf("other", prices, undefined)).toBeUndefined();
    expect(costUsd({ promptTokens: 10, cachedTokens: 0, completionTokens: 10 }, undefined)).toBe(0);
    // More cached than prompt (an engine's rounding) never makes a negative cost.
    expect(costUsd({ promptTokens: 10, cachedTokens: 20, completionTokens: 0 }, priceOf("m", prices, undefined))).toBeCloseTo(5e-6, 12);
  });
});

describe("PendingUsage", () => {
  it("sums bills per tenant, day and model, estimates apart", () => {
    const p = new PendingUsage();
    const at = Date.UTC(2026, 11, 4, 10);
    p.add(bill(), at);
    p.add(bill(), at);
    p.add(bill({ estimated: true, cachedTokens: 0 }), at);
    p.add(bill(), at + 86_400_000);
    p.add(bill({ model: "n" }), at);
    expect(p.size).toBe(3);
    const rows = p.take();
    expect(p.size).toBe(0);
    const row = rows.find((r) => r.day === "2026-12-04" && r.model === "m")!;
    expect(row).toMatchObject({
      requests: 3,
      promptTokens: 200,
      cachedTokens: 80,
      completionTokens: 20,
      estimatedRequests: 1,
      estimatedPromptTokens: 100,
      estimatedCompletionTokens: 10,
    });
    expect(row.costUsd).toBeCloseTo(0.002, 12);
    // A failed write's rows come back, summed with what arrived since.
    p.add(bill(), at);
    p.restore(rows);
    expect(p.take().find((r) => r.day === "2026-12-04" && r.model === "m")!.requests).toBe(4);
  });

  it("says when it is full", () => {
    const p = new PendingUsage();
    for (let i = 0; i < MAX_PENDING_ROWS; i++) p.add(bill({ tenant: `t${i}` }), 0);
    expect(p.full).toBe(true);
  });
});

describe("usage rows", () => {
  const row = (over: Partial<UsageRow>): UsageRow => ({
    tenant: "t",
    day: "2026-12-04",
    model: "m",
    region: "us",
    requests: 1,
    prompt_tokens: 10,
    cached_tokens: 5,
    completion_tokens: 2,
    cost_usd: 0.1,
    estimated_requests: 0,
    estimated_prompt_tokens: 0,
    estimated_completion_tokens: 0,
    estimated_cost_usd: 0,
    ...over,
  });
  it("are gathered from sources one after another, each asked for what the others left, and refused past the bound", async () => {
    const sources = [[row({ model: "a" }), row({ model: "b" })], [], [row({ model: "c" })]];
    const asked: number[] = [];
    const gather = (limit: number) =>
      gatherBounded(limit, (k, left) => {
        const data = sources[k];
        if (!data) return undefined;
        asked.push(left);
        return Promise.resolve(data.length > left ? { data: [], overflow: true as const } : { data });
      });
    expect((await gather(3))?.map((r) => r.model)).toEqual(["a", "b", "c"]);
    expect(asked).toEqual([3, 1, 1]);
    // One row more than the bound: the last source, asked for the one row left, has it and is over.
    asked.length = 0;
    expect(await gather(2)).toBeUndefined();
    expect(asked).toEqual([2, 1, 1]);
    // A source answering more rows than it was asked for is over too.
    expect(await gatherBounded(1, (k) => (k === 0 ? Promise.resolve({ data: sources[0]! }) : undefined))).toBeUndefined();
  });

  it("merge a sharded region's rows and sort by day, tenant, model, region", () => {
    const merged = mergeUsageRows([row({ region: "us" }), row({ day: "2026-12-03" }), row({ region: "us" }), row({ region: "eu" })]);
    expect(merged.map((r) => `${r.day}/${r.region}/${r.requests}`)).toEqual(["2026-12-03/us/1", "2026-12-04/eu/1", "2026-12-04/us/2"]);
    expect(merged[2]!.cost_usd).toBeCloseTo(0.2, 12);
    expect(roundUsd(0.1 + 0.2)).toBe(0.3);
  });

  it("write CSV with quoting and no formula injection", () => {
    const csv = usageCsv([row({ tenant: "=cmd", model: 'a,"b"' })]);
    const [header, line] = csv.split("\r\n");
    expect(header!.split(",")[0]).toBe("tenant");
    expect(line).toBe(`'=cmd,2026-12-04,"a,""b""",us,1,10,5,2,0.1,0,0,0,0`);
    expect(csv.endsWith("\r\n")).toBe(true);
  });
});
