/** Per-tenant rate limits of a region (src/core/region/rate-budget.ts). */
import { describe, expect, it } from "vitest";
import { RateBudgets } from "../../src/core/region/rate-budget.ts";

describe("RateBudgets", () => {
  it("spends a minute's requests at once, then refuses until one has refilled", () => {
    const b = new RateBudgets();
    const limits = { requestsPerMinute: 3 };
    const left = [0, 1, 2].map(() => {
      const r = b.take("t", limits, 100, 0);
      if (!r.ok) throw new Error("refused");
      return r.requests!.remaining;
    });
    expect(left).toEqual([2, 1, 0]);
    const refused = b.take("t", limits, 100, 1_000);
    expect(refused).toMatchObject({ ok: false, limit: "requests" });
    if (refused.ok) throw new Error();
    expect(refused.retryAfterSeconds).toBe(19); // one request refills every 20 s; 1 s has passed
    expect(b.take("t", limits, 100, 20_000).ok).toBe(true);
    expect(b.take("other", limits, 100, 20_000).ok).toBe(true); // per tenant
  });

  it("counts estimated prompt tokens, and judges a prompt over the whole minute against a full bucket", () => {
    const b = new RateBudgets();
    const limits = { promptTokensPerMinute: 1_000 };
    expect(b.take("t", limits, 800, 0).ok).toBe(true);
    const refused = b.take("t", limits, 400, 0);
    expect(refused).toMatchObject({ ok: false, limit: "tokens", tokens: { limit: 1_000, remaining: 200 } });
    if (refused.ok) throw new Error();
    expect(refused.retryAfterSeconds).toBe(12); // 200 tokens more at 1,000 a minute
    // 5,000 tokens can never fit a 1,000-token minute: it waits for a full bucket, then passes.
    expect(b.take("big", limits, 5_000, 0).ok).toBe(true);
    expect(b.take("big", limits, 5_000, 30_000).ok).toBe(false);
    expect(b.take("big", limits, 5_000, 60_000).ok).toBe(true);
  });

  it("leaves a tenant without limits alone, and says nothing of limits it does not have", () => {
    const b = new RateBudgets();
    for (let i = 0; i < 1_000; i++) expect(b.take("free", undefined, 1e6, 0)).toEqual({ ok: true, requests: undefined, tokens: undefined });
    expect(b.take("r", { requestsPerMinute: 10 }, 5, 0)).toMatchObject({ ok: true, tokens: undefined });
  });

  it("stays bounded however many tenants pass", () => {
    const b = new RateBudgets();
    for (let i = 0; i < 5_000; i++) b.take(`t${i}`, { requestsPerMinute: 1 }, 1, 0);
    expect((b as unknown as { buckets: Map<string, unknown> }).buckets.size).toBeLessThanOrEqual(1_024);
  });
});
