/**
 * The configuration of usage, prices and budgets (docs/USAGE.md): what a tenant's tokens cost,
 * how long the usage ledger keeps its days, and how much a tenant may spend. Part of the
 * configuration document (schema.ts); strict like every object there.
 */
import { z } from "zod";
import { DEFAULT_RESERVE_MAX_TOKENS } from "../core/usage/reservations.ts";

/** The most a price may be: USD 100,000 per million tokens is far past any model's list price, and keeps a day's cost a safe double. */
const MAX_PRICE = 100_000;

const usdPerMillion = (what: string) => z.number().min(0).max(MAX_PRICE).describe(`USD per million ${what}.`);

/** One model's prices (USD per million tokens), as providers list them. */
const priceSchema = z.strictObject({
  model: z.string().min(1).max(256).describe("The model name, as requests name it."),
  input: usdPerMillion("prompt tokens not read from the cache"),
  cached_input: z
    .number()
    .min(0)
    .max(MAX_PRICE)
    .optional()
    .describe("USD per million prompt tokens the engine read from its prefix cache (`cached_tokens`). Default: `input`."),
  output: usdPerMillion("completion tokens"),
});
export type PriceConfig = z.output<typeof priceSchema>;

/** Prices by model; a model named twice is an error naming the second. */
export const pricesSchema = z
  .array(priceSchema)
  .max(1_024)
  .superRefine((prices, ctx) => {
    const seen = new Set<string>();
    prices.forEach((p, i) => {
      if (seen.has(p.model)) ctx.addIssue({ code: "custom", path: [i, "model"], message: `model ${p.model} priced twice` });
      seen.add(p.model);
    });
  });

/** The most days the ledger may keep: ten years of daily rows. */
export const MAX_RETENTION_DAYS = 3_660;

export const usageSchema = z.strictObject({
  retention_days: z
    .number()
    .int()
    .min(62)
    .max(MAX_RETENTION_DAYS)
    .default(400)
    .describe(
      "Days of usage each region object keeps (older days are deleted once an hour). At least 62, so a month's budget and last month's invoice are always whole; the default, 400, covers a year's invoices and the month before.",
    ),
  flush_interval_ms: z
    .number()
    .int()
    .min(100)
    .max(60_000)
    .default(1_000)
    .describe(
      "How often a region object writes the usage it has counted to its storage and tells the budget ledger what its tenants spent. Usage in memory between two flushes is lost only if the object crashes (a restart through the admin API or a deploy's restart flushes first); the budget's overshoot grows with it (docs/USAGE.md).",
    ),
});

/** The largest `reserve_max_tokens`: 10M tokens, the largest context window served today. */
const MAX_RESERVE_MAX_TOKENS = 10_000_000;

/**
 * A tenant's budget: at least one limit; each one resets at 00:00 UTC (day) or on the 1st at 00:00
 * UTC (month). `reserve_max_tokens` defaults to {@link DEFAULT_RESERVE_MAX_TOKENS} (4,096).
 */
export const budgetSchema = z
  .strictObject({
    tokens_per_day: z.number().int().positive().optional().describe("Prompt plus completion tokens a UTC day, over every region."),
    tokens_per_month: z
      .number()
      .int()
      .positive()
      .optional()
      .describe("Prompt plus completion tokens a UTC calendar month, over every region."),
    usd_per_day: z.number().positive().max(1e9).optional().describe("Cost (at `prices`) a UTC day, over every region."),
    usd_per_month: z.number().positive().max(1e9).optional().describe("Cost (at `prices`) a UTC calendar month, over every region."),
    reserve_max_tokens: z
      .number()
      .int()
      .min(1)
      .max(MAX_RESERVE_MAX_TOKENS)
      .default(DEFAULT_RESERVE_MAX_TOKENS)
      .describe(
        `Completion tokens a request holds against the budget from its admission until its bill settles it when it sets no \`max_tokens\` (or more than this); a request holds its estimated prompt plus its \`max_tokens\` otherwise (docs/USAGE.md).`,
      ),
  })
  .refine((b) => [b.tokens_per_day, b.tokens_per_month, b.usd_per_day, b.usd_per_month].some((v) => v !== undefined), {
    message: "name at least one of tokens_per_day, tokens_per_month, usd_per_day, usd_per_month",
  });
