/**
 * Usage counted in memory until the region object's next flush (durable-objects/usage-store.ts):
 * one row per tenant, UTC day and model, summed. Writing each answer's usage as it ends would cost
 * a billed SQLite row write per request ($1 a million: more than the rest of a request's platform
 * cost, docs/SCALING.md); summed, a flush writes one row per tenant and model that was busy.
 */
import type { Bill } from "../../contracts/usage.ts";
import { addTokens, addUsd } from "./bounds.ts";
import { utcDay, type Day } from "./periods.ts";

/** A row's counters (see usageRowSchema for their meaning). */
interface UsageCounters {
  requests: number;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  costUsd: number;
  estimatedRequests: number;
  estimatedPromptTokens: number;
  estimatedCompletionTokens: number;
  estimatedCostUsd: number;
}

export interface PendingRow extends UsageCounters {
  tenant: string;
  day: Day;
  model: string;
}

const COUNTERS: (keyof UsageCounters)[] = [
  "requests",
  "promptTokens",
  "cachedTokens",
  "completionTokens",
  "costUsd",
  "estimatedRequests",
  "estimatedPromptTokens",
  "estimatedCompletionTokens",
  "estimatedCostUsd",
];

function zeroCounters(): UsageCounters {
  return {
    requests: 0,
    promptTokens: 0,
    cachedTokens: 0,
    completionTokens: 0,
    costUsd: 0,
    estimatedRequests: 0,
    estimatedPromptTokens: 0,
    estimatedCompletionTokens: 0,
    estimatedCostUsd: 0,
  };
}

/** The counters in USD (the rest count tokens or requests): each saturates at its own bound (bounds.ts). */
const USD_COUNTERS = new Set<keyof UsageCounters>(["costUsd", "estimatedCostUsd"]);

/**
 * Adds one bill to a row's counters: reported usage and estimates kept apart. Every sum saturates
 * (bounds.ts): a row never passes what the usage contract accepts, however absurd a bill.
 */
function addBill(c: UsageCounters, bill: Bill): void {
  c.requests = addTokens(c.requests, 1);
  if (bill.estimated) {
    c.estimatedRequests = addTokens(c.estimatedRequests, 1);
    c.estimatedPromptTokens = addTokens(c.estimatedPromptTokens, bill.promptTokens);
    c.estimatedCompletionTokens = addTokens(c.estimatedCompletionTokens, bill.completionTokens);
    c.estimatedCostUsd = addUsd(c.estimatedCostUsd, bill.costUsd);
  } else {
    c.promptTokens = addTokens(c.promptTokens, bill.promptTokens);
    c.cachedTokens = addTokens(c.cachedTokens, bill.cachedTokens);
    c.completionTokens = addTokens(c.completionTokens, bill.completionTokens);
    c.costUsd = addUsd(c.costUsd, bill.costUsd);
  }
}

/** Adds `b`'s counters to `a`'s, saturating. */
export function addCounters(a: UsageCounters, b: UsageCounters): void {
  for (const k of COUNTERS) a[k] = USD_COUNTERS.has(k) ? addUsd(a[k], b[k]) : addTokens(a[k], b[k]);
}

/**
 * Rows waiting for the next flush. Bounded by {@link MAX_PENDING_ROWS}: past it the caller flushes
 * at once (`full`), so memory never grows with the number of tenants x models between flushes.
 */
export class PendingUsage {
  private rows = new Map<string, PendingRow>();

  /** Counts a bill on the UTC day `at` falls in. */
  add(bill: Bill, at: number): void {
    const day = utcDay(at);
    const key = `${bill.tenant}\u0000${day}\u0000${bill.model}`;
    let row = this.rows.get(key);
    if (!row) this.rows.set(key, (row = { tenant: bill.tenant, day, model: bill.model, ...zeroCounters() }));
    addBill(row, bill);
  }

  get size(): number {
    return this.rows.size;
  }

  /** Rows past which the object flushes without waiting for its interval. */
  get full(): boolean {
    return this.rows.size >= MAX_PENDING_ROWS;
  }

  /** Everything counted, handed over (and forgotten here). */
  take(): PendingRow[] {
    const rows = [...this.rows.values()];
    this.rows = new Map();
    return rows;
  }

  /** Rows a failed write could not store, counted again (with whatever arrived since). */
  restore(rows: PendingRow[]): void {
    for (const r of rows) {
      const key = `${r.tenant}\u0000${r.day}\u0000${r.model}`;
      const row = this.rows.get(key);
      if (row) addCounters(row, r);
      else this.rows.set(key, { ...r });
    }
  }
}

/** Distinct tenant x day x model rows held between flushes (a few hundred bytes each). */
export const MAX_PENDING_ROWS = 4_096;
