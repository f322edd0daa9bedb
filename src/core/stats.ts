/**
 * Summary statistics shared by the benchmark (bench/metrics.ts) and the demo (scripts/demo/),
 * so that a "TTFT p99" means the same thing in both reports. Pure: no I/O, no clock.
 */

/**
 * The `p` quantile of `sorted` (ascending, numerically), by the **nearest-rank** method: the
 * smallest value such that at least `p` of the values are at or below it, i.e. the value at
 * 1-based rank ceil(p * n) (clamped to [1, n]). It never interpolates, so the result is always
 * one of the inputs. NaN for an empty input.
 *
 * @param sorted values sorted ascending (the caller sorts once for several quantiles)
 * @param p the quantile as a fraction in [0, 1] (0.99 for p99)
 * @example percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.5) === 5; percentile([3, 20, 1000], 0.9) === 1000
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[i]!;
}
