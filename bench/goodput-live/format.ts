/** Number formats shared by RESULTS.md's generated sections (report.ts, reading.ts). */

/** A share as a percentage with one decimal, or "-" when there is none. */
export const pct = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(1)}%` : "-");

/** Milliseconds as seconds with two decimals, or "-". */
export const s = (ms: number | undefined) => (ms !== undefined && Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : "-");

/** The ratio of warmpath's goodput to the naive router's, as text. */
export function ratio(w: number, n: number): string {
  if (!Number.isFinite(w) || !Number.isFinite(n)) return "-";
  if (n === 0) return w > 0 ? "∞ (naive 0)" : "-";
  return `${(w / n).toFixed(2)}x`;
}
