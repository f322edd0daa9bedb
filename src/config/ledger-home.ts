/**
 * Where the budget ledger lives (docs/USAGE.md): the region named by `budget_ledger_region`, else
 * the first region. One function, read by the region objects' configuration (src/config/load.ts),
 * the deploy generator (which binds every other region worker to that region's worker) and so
 * `npm start` (which takes the generator's first region worker as the home).
 */
import type { WarmpathConfig } from "./schema.ts";

/** The budget ledger's home region. Default: the first region (the schema checks a named one exists). */
export function budgetLedgerRegion(cfg: Pick<WarmpathConfig, "regions" | "budget_ledger_region">): string {
  return cfg.budget_ledger_region ?? cfg.regions[0]!.name;
}

/** Whether any tenant has a budget: only then does the ledger's home hold anything. */
export function hasBudgets(cfg: Pick<WarmpathConfig, "tenants">): boolean {
  return cfg.tenants.some((t) => t.budget !== undefined);
}
