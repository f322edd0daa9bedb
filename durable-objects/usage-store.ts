/**
 * A region object's usage ledger and, in the object named SPEND_LEDGER_NAME (addressing.ts), the
 * budget ledger every region reports to (docs/USAGE.md, budget-ledger.ts). SQLite tables, created
 * on construction:
 *
 *     usage(tenant, day, model, requests, prompt_tokens, cached_tokens, completion_tokens, cost_usd,
 *           estimated_requests, estimated_prompt_tokens, estimated_completion_tokens,
 *           estimated_cost_usd; PRIMARY KEY (tenant, day, model))
 *         this object's answered requests, summed per tenant, UTC day and model (the region is the
 *         object's; a sharded region's shards each keep their own rows, summed on export)
 *     spend(tenant, period, tokens, usd; PRIMARY KEY (tenant, period))
 *         the budget ledger: every region's spend of budgeted tenants, per UTC day and month
 *     spend_sources(source PRIMARY KEY, seq, seen_at)
 *         the last batch applied from each region object's instance: a batch resent after a lost
 *         answer is applied once
 *     spent_budgets(tenant, lim, budget, spent, resets_at; PRIMARY KEY (tenant, lim))
 *         budgets this object found spent (one write per tenant and period): a restarted object
 *         refuses them before its first exchange answers
 */
import type { SpendReport, Spend, UsageQuery, UsageRow } from "../src/contracts/usage.ts";
import type { OverBudget } from "../src/core/usage/spend.ts";
import type { PendingRow } from "../src/core/usage/pending.ts";
import { daysBefore, utcMonth } from "../src/core/usage/periods.ts";
import { MAX_TOKENS_SUM, MAX_USD_SUM, tokenCount, usdAmount } from "../src/core/usage/bounds.ts";
import { boundedRow } from "../src/core/usage/rows.ts";

/**
 * Every sum in SQL saturates at the contracts' bounds (bounds.ts): SQLite's INTEGER would go on to
 * 2^63 and a row past 2^53 could not be exported (issue 31: `/admin/usage` answered 503 for every
 * tenant). Written as literals: they are constants, never input.
 */
const T = String(MAX_TOKENS_SUM);
const U = MAX_USD_SUM.toExponential();

/** The configuration's defaults (src/config/usage-schema.ts), for an object that has had no init (the budget ledger). */
export const DEFAULT_FLUSH_INTERVAL_MS = 1_000;
export const DEFAULT_RETENTION_DAYS = 400;

/** Old days are deleted at most this often (a DELETE scans the table's days). */
const PRUNE_INTERVAL_MS = 3_600_000;
/** The budget ledger keeps this month and the two before (a month's budget needs only this one). */
const SPEND_MONTHS_KEPT = 2;
/** A region object's instance not heard from in this long is forgotten by the ledger (instances are replaced on restart). */
const SOURCE_FORGET_MS = 2 * 86_400_000;

interface UsageDbRow extends Record<string, SqlStorageValue> {
  tenant: string;
  day: string;
  model: string;
  requests: number;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  cost_usd: number;
  estimated_requests: number;
  estimated_prompt_tokens: number;
  estimated_completion_tokens: number;
  estimated_cost_usd: number;
}

export class UsageStore {
  private readonly sql: SqlStorage;
  private lastPrune = -Infinity;

  constructor(sql: SqlStorage) {
    this.sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS usage (
      tenant TEXT NOT NULL, day TEXT NOT NULL, model TEXT NOT NULL,
      requests INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL,
      completion_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL,
      estimated_requests INTEGER NOT NULL, estimated_prompt_tokens INTEGER NOT NULL,
      estimated_completion_tokens INTEGER NOT NULL, estimated_cost_usd REAL NOT NULL,
      PRIMARY KEY (tenant, day, model))`);
    sql.exec(
      `CREATE TABLE IF NOT EXISTS spend (tenant TEXT NOT NULL, period TEXT NOT NULL, tokens INTEGER NOT NULL, usd REAL NOT NULL, PRIMARY KEY (tenant, period))`,
    );
    sql.exec(`CREATE TABLE IF NOT EXISTS spend_sources (source TEXT PRIMARY KEY, seq INTEGER NOT NULL, seen_at INTEGER NOT NULL)`);
    sql.exec(`CREATE TABLE IF NOT EXISTS spent_budgets (
      tenant TEXT NOT NULL, lim TEXT NOT NULL, budget REAL NOT NULL, spent REAL NOT NULL, resets_at INTEGER NOT NULL,
      PRIMARY KEY (tenant, lim))`);
  }

  /** Keeps a budget found spent. */
  rememberSpent(tenant: string, over: OverBudget): void {
    this.sql.exec(
      `INSERT OR REPLACE INTO spent_budgets (tenant, lim, budget, spent, resets_at) VALUES (?, ?, ?, ?, ?)`,
      tenant,
      over.limit,
      over.budget,
      over.spent,
      over.resetsAt,
    );
  }

  /** The budgets found spent that have not reset yet (the rest are deleted). */
  spentBudgets(now: number): Array<{ tenant: string; over: OverBudget }> {
    this.sql.exec(`DELETE FROM spent_budgets WHERE resets_at <= ?`, now);
    return this.sql
      .exec<{ tenant: string; lim: string; budget: number; spent: number; resets_at: number }>(`SELECT * FROM spent_budgets`)
      .toArray()
      .map((r) => ({
        tenant: r.tenant,
        over: { limit: r.lim as OverBudget["limit"], budget: r.budget, spent: r.spent, resetsAt: r.resets_at },
      }));
  }

  /** Adds counted rows to the stored ones (one statement a row, in the event's implicit transaction). */
  write(rows: readonly PendingRow[]): void {
    for (const r of rows) {
      this.sql.exec(
        `INSERT INTO usage (tenant, day, model, requests, prompt_tokens, cached_tokens, completion_tokens, cost_usd,
           estimated_requests, estimated_prompt_tokens, estimated_completion_tokens, estimated_cost_usd)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(tenant, day, model) DO UPDATE SET
           requests = MIN(requests + excluded.requests, ${T}),
           prompt_tokens = MIN(prompt_tokens + excluded.prompt_tokens, ${T}),
           cached_tokens = MIN(cached_tokens + excluded.cached_tokens, ${T}),
           completion_tokens = MIN(completion_tokens + excluded.completion_tokens, ${T}),
           cost_usd = MIN(cost_usd + excluded.cost_usd, ${U}),
           estimated_requests = MIN(estimated_requests + excluded.estimated_requests, ${T}),
           estimated_prompt_tokens = MIN(estimated_prompt_tokens + excluded.estimated_prompt_tokens, ${T}),
           estimated_completion_tokens = MIN(estimated_completion_tokens + excluded.estimated_completion_tokens, ${T}),
           estimated_cost_usd = MIN(estimated_cost_usd + excluded.estimated_cost_usd, ${U})`,
        r.tenant,
        r.day,
        r.model,
        r.requests,
        r.promptTokens,
        r.cachedTokens,
        r.completionTokens,
        r.costUsd,
        r.estimatedRequests,
        r.estimatedPromptTokens,
        r.estimatedCompletionTokens,
        r.estimatedCostUsd,
      );
    }
  }

  /** Deletes days older than `retentionDays` (at most once an hour). */
  prune(retentionDays: number, now: number): void {
    if (now - this.lastPrune < PRUNE_INTERVAL_MS) return;
    this.lastPrune = now;
    this.sql.exec(`DELETE FROM usage WHERE day < ?`, daysBefore(now, retentionDays));
    const d = new Date(now);
    const oldestMonth = utcMonth(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - SPEND_MONTHS_KEPT, 1));
    // Days sort after their month ("2026-10-05" > "2026-10"): this keeps the oldest kept month's days.
    this.sql.exec(`DELETE FROM spend WHERE period < ?`, oldestMonth);
    this.sql.exec(`DELETE FROM spend_sources WHERE seen_at < ?`, now - SOURCE_FORGET_MS);
  }

  /**
   * The stored rows a query asks for, in this object's region: at most `limit` (read with one more,
   * so that the caller can tell an export that does not fit from one that does).
   */
  query(q: UsageQuery, region: string, limit: number): UsageRow[] {
    const rows =
      q.tenant === undefined
        ? this.sql.exec<UsageDbRow>(`SELECT * FROM usage WHERE day >= ? AND day <= ? LIMIT ?`, q.from, q.to, limit)
        : this.sql.exec<UsageDbRow>(
            `SELECT * FROM usage WHERE tenant = ? AND day >= ? AND day <= ? LIMIT ?`,
            q.tenant,
            q.from,
            q.to,
            limit,
          );
    // Bounded on the way out too: a row stored before sums saturated (one past 2^53) is exported at the bound, never refused.
    return [...rows].map((r) =>
      boundedRow({
        tenant: r.tenant,
        day: r.day,
        model: r.model,
        region,
        requests: r.requests,
        prompt_tokens: r.prompt_tokens,
        cached_tokens: r.cached_tokens,
        completion_tokens: r.completion_tokens,
        cost_usd: r.cost_usd,
        estimated_requests: r.estimated_requests,
        estimated_prompt_tokens: r.estimated_prompt_tokens,
        estimated_completion_tokens: r.estimated_completion_tokens,
        estimated_cost_usd: r.estimated_cost_usd,
      }),
    );
  }

  /**
   * The budget ledger: applies a region object's batch once (a batch whose seq it has seen is an
   * answer lost on the way back, resent), and answers every tenant's totals in the periods asked.
   */
  applySpend(report: SpendReport, now: number): Spend[] {
    const seen = this.sql.exec<{ seq: number }>(`SELECT seq FROM spend_sources WHERE source = ?`, report.source).toArray()[0];
    if (!seen || report.seq > seen.seq) {
      for (const s of report.spends) {
        this.sql.exec(
          `INSERT INTO spend (tenant, period, tokens, usd) VALUES (?, ?, ?, ?)
           ON CONFLICT(tenant, period) DO UPDATE SET tokens = MIN(tokens + excluded.tokens, ${T}), usd = MIN(usd + excluded.usd, ${U})`,
          s.tenant,
          s.period,
          s.tokens,
          s.usd,
        );
      }
    }
    this.sql.exec(
      `INSERT INTO spend_sources (source, seq, seen_at) VALUES (?, ?, ?)
       ON CONFLICT(source) DO UPDATE SET seq = MAX(seq, excluded.seq), seen_at = excluded.seen_at`,
      report.source,
      report.seq,
      now,
    );
    const totals: Spend[] = [];
    for (const period of report.periods) {
      for (const r of this.sql.exec<{ tenant: string; tokens: number; usd: number }>(
        `SELECT tenant, tokens, usd FROM spend WHERE period = ?`,
        period,
      ))
        totals.push({ tenant: r.tenant, period, tokens: tokenCount(r.tokens), usd: usdAmount(r.usd) });
    }
    return totals;
  }
}
