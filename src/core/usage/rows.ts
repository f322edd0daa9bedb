/**
 * Usage rows as exported (GET /admin/usage): gathered within the export's bound, a sharded region's
 * shards' rows summed into one per tenant, day, model and region, sorted; and the CSV form.
 */
import { USAGE_COLUMNS, type UsageAnswer, type UsageRow } from "../../contracts/usage.ts";
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
 * Rows from sources asked one after another (the edge's regions, a region worker's shards), each
 * for what the earlier ones left of `limit` (rows as the sources store them, before a sharded
 * region's are merged): no caller holds more than one export carries. With none left, a source is
 * asked for one row: any is one too many. `ask` gives source `index`'s answer to a bound of `left`
 * rows, or undefined when there is no such source. Undefined when more than `limit` rows match.
 */
export async function gatherBounded(
  limit: number,
  ask: (index: number, left: number) => Promise<UsageAnswer> | undefined,
): Promise<UsageRow[] | undefined> {
  const rows: UsageRow[] = [];
  let left = limit;
  for (let index = 0; ; index++) {
    const answering = ask(index, Math.max(1, left));
    if (!answering) return rows;
    const answer = await answering;
    if (answer.overflow || answer.data.length > left) return undefined;
    rows.push(...answer.data);
    left -= answer.data.length;
  }
}

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
