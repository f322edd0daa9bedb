/**
 * The periods usage is counted and budgets reset by: the UTC day (`2026-12-04`) and the UTC
 * calendar month (`2026-12`). UTC because a tenant's regions span time zones and an invoice
 * needs one calendar; ISO strings because they sort as they read, in SQLite and in CSV.
 */

/** A UTC day, `YYYY-MM-DD`. */
export type Day = string;
/** A UTC month, `YYYY-MM`. */
type Month = string;

export const DAY_PATTERN = /^\d{4}-\d{2}-\d{2}$/;

/** The UTC day `at` (ms epoch) falls in. */
export function utcDay(at: number): Day {
  return new Date(at).toISOString().slice(0, 10);
}

/** The UTC month `at` falls in. */
export function utcMonth(at: number): Month {
  return new Date(at).toISOString().slice(0, 7);
}

/** When the day `at` falls in ends (ms epoch): the next 00:00 UTC. */
export function dayEndsAt(at: number): number {
  const d = new Date(at);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
}

/** When the month `at` falls in ends: the 1st of the next month, 00:00 UTC. */
export function monthEndsAt(at: number): number {
  const d = new Date(at);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** The day `days` days before `day`'s (negative: after). */
export function daysBefore(at: number, days: number): Day {
  const d = new Date(at);
  return utcDay(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() - days));
}

/** Whether `day` is a real calendar day (`2026-02-30` is not). */
export function isCalendarDay(day: string): boolean {
  if (!DAY_PATTERN.test(day)) return false;
  const at = Date.parse(`${day}T00:00:00Z`);
  return Number.isFinite(at) && utcDay(at) === day;
}
