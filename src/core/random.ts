/** mulberry32: a tiny, fast, seedable PRNG, so policies that draw at random are reproducible in the benchmark. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Zipf(s) over 0..n-1 by inverse CDF (s = 0: uniform), drawing one `rnd()` per sample. Shared by
 * the benchmark's and the demo's workload generators, so a popularity knob means the same in both.
 */
export function zipfSampler(n: number, s: number, rnd: () => number): () => number {
  const cdf: number[] = [];
  let acc = 0;
  for (let k = 1; k <= n; k++) cdf.push((acc += 1 / Math.pow(k, s)));
  return () => {
    const u = rnd() * acc;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}
