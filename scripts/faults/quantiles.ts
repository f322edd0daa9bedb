/** p50, p99 and max of the times a fault run measured (nearest rank: src/core/stats.ts). */
import { percentile } from "../../src/core/stats.ts";

export type Quantiles = { p50: number; p99: number; max: number; n: number };

/** p50 and p99 (nearest rank) of the times measured. */
export function quantiles(xs: Array<number | undefined>) {
  const sorted = xs.filter((x): x is number => Number.isFinite(x)).sort((a, b) => a - b);
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted.at(-1) ?? NaN, n: sorted.length };
}
