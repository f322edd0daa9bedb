import { describe, expect, it } from "vitest";
import { NodeLoad } from "../../src/core/node-load.ts";
import { poolRates } from "../../src/core/rate-pool.ts";

/** Lognormal factors of mean 1 from a fixed LCG, so the test is deterministic. */
function noise(sigma: number): () => number {
  let seed = 99;
  const uniform = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) + 0.5) / 4294967296;
  return () => Math.exp(sigma * Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform()) - (sigma * sigma) / 2);
}

/** Sends `n` 5,000-token prefills to each node in turn; node i really runs at trueRates[i] tokens/s. */
function measure(loads: NodeLoad[], trueRates: number[], n: number, factor: () => number): void {
  let t = 0;
  for (let k = 0; k < n; k++) {
    loads.forEach((load, i) => {
      t += 100_000;
      const p = load.dispatch(t, 5_000, 5_000);
      if (load.firstByte(t + ((5_000 * 1000) / trueRates[i]!) * factor(), t, p, 5_000)) poolRates(loads);
      load.complete(5_000);
    });
  }
}

describe("poolRates", () => {
  it("gives identical nodes one rate, learned from all of them, even when configured 4x wrong", () => {
    const loads = Array.from({ length: 8 }, () => new NodeLoad(40_000)); // really 10,000
    measure(loads, Array(8).fill(10_000), 6, noise(1));
    const rates = loads.map((l) => l.prefillRate);
    for (const r of rates) expect(r).toBe(rates[0]);
    expect(rates[0]).toBeGreaterThan(7_500);
    expect(rates[0]).toBeLessThan(13_000);
  });

  it("without pooling, the same samples leave identical nodes far apart", () => {
    const loads = Array.from({ length: 8 }, () => new NodeLoad(40_000));
    const factor = noise(1);
    let t = 0;
    for (let k = 0; k < 6; k++)
      for (const load of loads) {
        t += 100_000;
        const p = load.dispatch(t, 5_000, 5_000);
        load.firstByte(t + 500 * factor(), t, p, 5_000);
        load.complete(5_000);
      }
    const rates = loads.map((l) => l.prefillRate);
    expect(Math.max(...rates) / Math.min(...rates)).toBeGreaterThan(1.3);
  });

  it("keeps a really different node's own rate", () => {
    const loads = Array.from({ length: 8 }, () => new NodeLoad(10_000));
    const trueRates = [5_000, ...Array(7).fill(10_000)];
    measure(loads, trueRates, 40, noise(0.5));
    expect(loads[0]!.prefillRate).toBeLessThan(6_500);
    for (const l of loads.slice(1)) expect(l.prefillRate).toBeGreaterThan(8_500);
  });

  it("pools the measured spread too", () => {
    const loads = Array.from({ length: 4 }, () => new NodeLoad(10_000));
    measure(loads, Array(4).fill(10_000), 60, noise(1));
    for (const l of loads) {
      expect(l.spread()).toBeGreaterThan(0.7);
      expect(l.spread()).toBeLessThan(1.3);
    }
    const exact = Array.from({ length: 4 }, () => new NodeLoad(10_000));
    measure(exact, Array(4).fill(10_000), 200, () => 1); // the prior spread (0.5) fades
    for (const l of exact) expect(l.spread()).toBeLessThan(0.1);
  });
});
