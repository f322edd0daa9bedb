/**
 * Summary statistics shared by every benchmark (bench/) and script (scripts/) that reports a
 * percentile, so that a "TTFT p99" means the same thing in every report: one definition, nearest
 * rank. Pure: no I/O, no clock. It lives in src/core/ because both bench/tsconfig.json and
 * scripts/tsconfig.json reach it (bench/'s program includes src/core/).
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

/**
 * The `p` quantile of `values` in any order, by the nearest-rank method of {@link percentile}, on a
 * sorted copy (`values` is left as it is). NaN for an empty input. For several quantiles of one
 * sample, sort once and call {@link percentile}.
 *
 * @param p the quantile as a fraction in [0, 1] (0.99 for p99)
 * @example percentileOf([10, 1, 5], 0.5) === 5
 */
export function percentileOf(values: readonly number[], p: number): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    p,
  );
}

/**
 * The median of `values` in any order: the middle value of an odd count, the mean of the two middle
 * values of an even count (so, unlike `percentileOf(values, 0.5)`, not always one of the inputs).
 * NaN for an empty input. bench/workerd/ takes the difference of two medians of a few batch times,
 * where the interpolated middle moves less with one batch than a nearest rank does.
 *
 * @example median([4, 1, 3, 2]) === 2.5; median([7]) === 7
 */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * `value` as of `at`, decayed exponentially to `now` with time constant `tau` (ms): a steady rate
 * r a millisecond summed this way comes to r x tau. Never grows: a `now` before `at` leaves it.
 */
export function decay(value: number, at: number, now: number, tau: number): number {
  return value * Math.exp(-Math.max(0, now - at) / tau);
}
