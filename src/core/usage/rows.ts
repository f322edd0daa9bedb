/**
 * Usage rows as exported (GET /admin/usage): a sharded region's shards' rows summed into one per
 * tenant, day, model and region, sorted; and the CSV form.
 */
import { USAGE_COLUMNS, type UsageRow } from "../../contracts/usage.ts";
import { addTokens, addUsd, tokenCount, usdAmount } from "./bounds.ts";

const SUMMED = [
  "requests",
  "prompt_tokens",
  "cached_tokens",
  "completion_tokens",
  "cost_usd",
  "estimated_requests",
  "estimated_prompt_tokens",
  "estimated_completion_tokens",
  "estimated_cost_usd",
] as const satisfies readonly (keyof UsageRow)[];

const USD_COLUMNS = new Set<keyof UsageRow>(["cost_usd", "estimated_cost_usd"]);

/**
 * A stored row as the usage contract accepts it: every count a non-negative safe integer and every
 * cost within its bound (bounds.ts). A row stored before the ledger saturated its sums (one past
 * 2^53 answered 503 for every export holding its day) is exported at the bound, never refused.
 */
export function boundedRow(r: UsageRow): UsageRow {
  const out = { ...r };
  for (const k of SUMMED) out[k] = USD_COLUMNS.has(k) ? usdAmount(r[k]) : tokenCount(r[k]);
  return out;
}

/** Rows of one key summed (saturating); sorted by day, tenant, model, region (an invoice's order). */
export function mergeUsageRows(rows: readonly UsageRow[]): UsageRow[] {
  const byKey = new Map<string, UsageRow>();
  for (const r of rows) {
    const key = `${r.day}\u0000${r.tenant}\u0000${r.model}\u0000${r.region}`;
    const sum = byKey.get(key);
    if (!sum) byKey.set(key, boundedRow(r));
    else for (const k of SUMMED) sum[k] = USD_COLUMNS.has(k) ? addUsd(sum[k], r[k]) : addTokens(sum[k], r[k]);
  }
  return [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
}

/** Costs as exported: to the micro-dollar (a float sum's last bits are noise, not money). */
export function roundUsd(usd: number): number {
  return Math.round(usd * 1e6) / 1e6;
}

/** A CSV field: quoted when it holds a comma, quote or line break (RFC 4180); a leading =, +, - or @ is quoted with a ' so spreadsheets never run it. */
function csvField(v: string | number): string {
  let s = String(v);
  if (typeof v === "string" && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** The rows as CSV with a header line (RFC 4180, CRLF line ends). */
export function usageCsv(rows: readonly UsageRow[]): string {
  const lines = [USAGE_COLUMNS.join(",")];
  for (const r of rows) lines.push(USAGE_COLUMNS.map((c) => csvField(r[c])).join(","));
  return lines.join("\r\n") + "\r\n";
}
