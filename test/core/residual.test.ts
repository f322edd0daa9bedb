import { describe, expect, it } from "vitest";
import { expectedResidual, normalCdf } from "../../src/core/residual.ts";

describe("expectedResidual", () => {
  it("is the exact remainder when prefill times are predictable", () => {
    expect(expectedResidual(0, 0)).toBe(1);
    expect(expectedResidual(0.25, 0)).toBeCloseTo(0.75);
    expect(expectedResidual(1.5, 0)).toBe(0);
  });

  it("grows with the time already run on a heavy tail (sigma 1)", () => {
    expect(expectedResidual(0, 1)).toBe(1);
    const a = expectedResidual(1, 1);
    const b = expectedResidual(2, 1);
    const c = expectedResidual(5, 1);
    expect(a).toBeGreaterThan(1); // a job at its predicted time is expected to need more than a fresh one
    expect(b).toBeGreaterThan(a);
    expect(c).toBeGreaterThan(b);
  });

  it("matches a Monte Carlo estimate of E[X - t | X > t] for lognormal X of mean 1", () => {
    const sigma = 0.8;
    let seed = 12345;
    const uniform = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) + 0.5) / 4294967296;
    const draws: number[] = [];
    for (let i = 0; i < 200_000; i++) {
      const z = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
      draws.push(Math.exp(sigma * z - (sigma * sigma) / 2));
    }
    for (const t of [0.3, 1, 2]) {
      const over = draws.filter((x) => x > t);
      const mc = over.reduce((s, x) => s + x - t, 0) / over.length;
      expect(expectedResidual(t, sigma)).toBeCloseTo(mc, 1);
    }
  });

  it("stays finite and positive far in the tail", () => {
    const r = expectedResidual(1e6, 0.3);
    expect(Number.isFinite(r)).toBe(true);
    expect(r).toBeGreaterThan(0);
  });

  it("uses an accurate normal CDF", () => {
    expect(normalCdf(0)).toBeCloseTo(0.5, 6);
    expect(normalCdf(1.96)).toBeCloseTo(0.975, 3);
    expect(normalCdf(-1.96)).toBeCloseTo(0.025, 3);
  });
});
