/**
 * A node's measured prefill rate and spread (src/core/prefill-rate.ts): the configured rate as a
 * prior worth one sample, short prefills ignored, the estimate bounded around the configured rate,
 * and the spread learned from how far real prefill times fall from predicted ones.
 */
import { describe, expect, it } from "vitest";
import { PrefillRate } from "../../src/core/prefill-rate.ts";

describe("PrefillRate", () => {
  it("starts at the configured rate, with the prior spread (0.5)", () => {
    const r = new PrefillRate(10_000);
    expect(r.tokensPerSecond).toBe(10_000);
    expect(r.msPerToken).toBe(0.1);
    expect(r.spread()).toBe(0.5);
  });

  it("takes no sample from a prefill under 2,000 tokens or one that took no time", () => {
    const r = new PrefillRate(10_000);
    expect(r.sample(1_000, 1_999)).toBe(false);
    expect(r.sample(0, 10_000)).toBe(false);
    expect(r.tokensPerSecond).toBe(10_000);
    expect(r.evidence().samples).toBe(0);
  });

  it("weighs the configured rate as one sample: one measurement 3x slower moves it halfway", () => {
    const r = new PrefillRate(10_000); // 0.1 ms a token
    expect(r.sample(600, 2_000)).toBe(true); // 0.3 ms a token
    expect(r.msPerToken).toBeCloseTo(0.2);
    expect(r.tokensPerSecond).toBeCloseTo(5_000);
    expect(r.evidence()).toMatchObject({ samples: 1, logMs: Math.log(0.3) });
  });

  it("keeps the rate in use within 0.1x-10x of the configured one", () => {
    const r = new PrefillRate(10_000);
    r.use(1_000, 0.2);
    expect(r.tokensPerSecond).toBeCloseTo(1_000);
    expect(r.spread()).toBe(0.2);
    r.use(0.000_001, 0.2);
    expect(r.tokensPerSecond).toBeCloseTo(100_000);
  });

  it("learns a small spread from exact prefill times and a large one from noisy times", () => {
    const exact = new PrefillRate(10_000);
    for (let i = 0; i < 100; i++) exact.sample(1_000, 10_000); // always 0.1 ms a token
    expect(exact.spread()).toBeLessThan(0.1);
    expect(exact.evidence().samples).toBe(50); // a moving average remembers about 1 / 0.02 samples
    const noisy = new PrefillRate(10_000);
    for (let i = 0; i < 100; i++) noisy.sample(i % 2 === 0 ? 300 : 3_000, 10_000); // 0.03 and 0.3 ms a token
    expect(noisy.spread()).toBeGreaterThan(0.8);
  });
});
