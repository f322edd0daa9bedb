/**
 * The usage boundary (docs/USAGE.md): what the region worker bills a region object for an answered
 * request, what the admin API exports, and what region objects tell the budget ledger. One zod
 * contract per message, types derived; the objects validate what reaches them.
 */
import { z } from "zod";
import { MAX_TOKENS_SUM, MAX_USD_SUM } from "../core/usage/bounds.ts";
import { DAY_PATTERN } from "../core/usage/periods.ts";
import { MAX_SHARDS } from "../core/shard.ts";

/**
 * The budget ledger: one object for the deployment, named so in the namespace of the first
 * region's worker (its home: BUDGET_LEDGER_BINDING, src/contracts/topology.ts).
 */
export const SPEND_LEDGER_NAME = "warmpath#spend";

const count = () => z.number().int().min(0).max(MAX_TOKENS_SUM);
/** The most a row or a spend line may cost: far past any real figure (bounds.ts MAX_USD_SUM; sums saturate there). */
const usd = () => z.number().min(0).max(MAX_USD_SUM);
/**
 * A bill's figure: any finite number. The region object clamps what one request cannot cost
 * (src/core/usage/bounds.ts clampBill: negative, fractional or past MAX_REQUEST_TOKENS / _USD) and
 * logs it, rather than refuse the completion carrying it (which would leave its ticket and its
 * budget's hold in place, and the usage unbilled).
 */
const billFigure = () => z.number();

/**
 * One answered request's usage, as its answer carried it (the whole answer's, for a continued
 * stream), or estimated when the node reported none (`estimated`: a stream cut short, a client
 * that went away, an engine without usage): the router's estimate of the prompt and one token a
 * streamed chunk, or the answer's characters for a whole one.
 */
export const billSchema = z.strictObject({
  tenant: z.string().min(1).max(64),
  model: z.string().min(1).max(256),
  estimated: z.boolean(),
  promptTokens: billFigure(),
  cachedTokens: billFigure(),
  completionTokens: billFigure(),
  /** At the tenant's price for the model when the request ended (0 unpriced). */
  costUsd: billFigure(),
  /** The tenant has a budget: its spend goes to the budget ledger too. */
  budgeted: z.boolean(),
});
export type Bill = z.infer<typeof billSchema>;

/** A tenant's budget as the region object applies it (from `tenants[].budget`). */
export const routeBudgetSchema = z.strictObject({
  tokensPerDay: z.number().int().positive().optional(),
  tokensPerMonth: z.number().int().positive().optional(),
  usdPerDay: z.number().positive().optional(),
  usdPerMonth: z.number().positive().optional(),
});
export type RouteBudget = z.infer<typeof routeBudgetSchema>;

/**
 * What a budgeted request holds from its admission until its bill settles it
 * (src/core/usage/reservations.ts): its estimated prompt plus its `max_tokens` (capped by
 * `budget.reserve_max_tokens`), and that in USD at the tenant's price.
 */
export const reservationSchema = z.strictObject({ tokens: count(), usd: usd() });

/** One ledger row: a tenant's usage of a model in a region on a UTC day (GET /admin/usage). */
export const usageRowSchema = z.strictObject({
  tenant: z.string(),
  day: z.string().regex(DAY_PATTERN),
  model: z.string(),
  region: z.string(),
  /** Answered requests, those estimated included. */
  requests: count(),
  /** As the nodes reported them; prompt tokens include the cached ones. */
  prompt_tokens: count(),
  cached_tokens: count(),
  completion_tokens: count(),
  cost_usd: usd(),
  /** Requests whose node reported no usage, and what was estimated for them (never in the columns above). */
  estimated_requests: count(),
  estimated_prompt_tokens: count(),
  estimated_completion_tokens: count(),
  estimated_cost_usd: usd(),
});
export type UsageRow = z.infer<typeof usageRowSchema>;

/** The columns of a usage row, in the order the CSV export writes them. */
export const USAGE_COLUMNS = Object.keys(usageRowSchema.shape) as (keyof UsageRow)[];

/**
 * The most rows one usage export carries, every region and shard together: a row is ~300 bytes of
 * JSON, so 50,000 rows are ~15 MB, held whole (parsed, merged) in a 128 MB isolate at each layer.
 * A month of a fleet of 100 tenants on 5 models in 3 regions is 46,500 rows; past the bound the
 * export asks for fewer days or one tenant (docs/USAGE.md), rather than exhaust an isolate.
 */
export const MAX_USAGE_EXPORT_ROWS = 50_000;

/**
 * What a region object (or a region worker, its shards' together) answers for a usage query: its
 * rows (region filled in by the object), at most the query's `limit`; `overflow` when more matched
 * (`data` is then empty: a partial export must not look whole). An object says `shards`, the most
 * shards its region has had as far as it knows: a region whose shards were lowered still holds the
 * removed shards' usage, which its worker then asks for too (shard 0's answer is the one read).
 */
export const usageAnswerSchema = z.strictObject({
  data: z.array(usageRowSchema).max(MAX_USAGE_EXPORT_ROWS),
  overflow: z.literal(true).optional(),
  shards: z.number().int().min(1).max(MAX_SHARDS).optional(),
});
export type UsageAnswer = z.infer<typeof usageAnswerSchema>;

/**
 * A usage query as the region worker and its objects take it: days inclusive, a tenant or every
 * one, and the most rows wanted (default and at most {@link MAX_USAGE_EXPORT_ROWS}; the edge passes
 * what the regions it asked before left of the bound).
 */
export const usageQuerySchema = z.strictObject({
  tenant: z.string().min(1).max(64).optional(),
  from: z.string().regex(DAY_PATTERN),
  to: z.string().regex(DAY_PATTERN),
  limit: z.coerce.number().int().min(1).max(MAX_USAGE_EXPORT_ROWS).optional(),
});
export type UsageQuery = z.infer<typeof usageQuerySchema>;

/** A tenant's spend in one period (`2026-12-04` or `2026-12`), in tokens and USD. */
const spendSchema = z.strictObject({
  tenant: z.string().min(1).max(64),
  period: z.string().regex(/^\d{4}-\d{2}(-\d{2})?$/),
  tokens: count(),
  usd: usd(),
});
export type Spend = z.infer<typeof spendSchema>;

/** The most spend lines one message carries: every tenant's day and month, with room. */
export const MAX_SPEND_LINES = 8_192;

/**
 * A region object's spend since it last told the budget ledger (docs/USAGE.md). `source` names the
 * object's instance and `seq` the batch: the ledger applies a batch once, so one resent after a
 * lost answer is not counted twice. `periods`: the day and month whose totals it wants back.
 */
export const spendReportSchema = z.strictObject({
  source: z.string().min(1).max(160),
  seq: z.number().int().min(0),
  spends: z.array(spendSchema).max(MAX_SPEND_LINES),
  periods: z.array(z.string().regex(/^\d{4}-\d{2}(-\d{2})?$/)).max(4),
});
export type SpendReport = z.infer<typeof spendReportSchema>;

/** The budget ledger's answer: every tenant's total in the periods asked for, this batch included. */
export const spendTotalsSchema = z.strictObject({ totals: z.array(spendSchema).max(MAX_SPEND_LINES) });
export type SpendTotals = z.infer<typeof spendTotalsSchema>;
