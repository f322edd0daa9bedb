/**
 * `[[tenants]]` of the configuration (src/config/schema.ts): who may call, with which keys, limits,
 * budget, prices and priority.
 */
import { z } from "zod";
import { priorityClassSchema, MAX_COMMITTED_TOKENS_PER_MINUTE, MAX_OBJECTIVE_MS } from "../contracts/routing.ts";
import { name, SHA256_HEX } from "./schema-names.ts";
import { budgetSchema, pricesSchema } from "./usage-schema.ts";

export const tenantSchema = z.strictObject({
  id: name().describe("Tenant id; its own cache namespace."),
  api_key_sha256: z
    .array(z.string().regex(SHA256_HEX, "must be 64 lowercase hex characters"))
    .min(1)
    .describe('SHA-256 (hex) of each API key: `printf %s "$KEY" | sha256sum`. The keys themselves are never stored.'),
  weight: z
    .number()
    .positive()
    .max(1_000)
    .default(1)
    .describe("Its weight in each region's fair share of prefill capacity, against the other active tenants."),
  regions: z
    .array(name())
    .min(1)
    .optional()
    .describe(
      'The regions its requests may go to (data residency), e.g. `["eu-west"]`: never routed, failed over or sent for a warm prefix anywhere else; `x-warmpath-region` naming another is refused (403 `region_not_allowed`). Default: every region.',
    ),
  shared_namespaces: z
    .array(name())
    .default([])
    .describe(
      "Namespaces it may share with other tenants (`x-warmpath-namespace`). Shared caches leak timing between tenants: share only within one organisation.",
    ),
  rate_limits: z
    .strictObject({
      requests_per_minute: z
        .number()
        .int()
        .positive()
        .optional()
        .describe("Requests a minute, per region (429 `rate_limit_exceeded` past it)."),
      prompt_tokens_per_minute: z
        .number()
        .int()
        .positive()
        .optional()
        .describe("Estimated prompt tokens a minute, per region (429 `rate_limit_exceeded` past it)."),
    })
    .optional()
    .describe("Its rate limits in each region, as token buckets (a minute's budget may be spent at once); default none."),
  committed_prompt_tokens_per_minute: z
    .number()
    .int()
    .positive()
    .max(MAX_COMMITTED_TOKENS_PER_MINUTE)
    .optional()
    .describe(
      "The prompt tokens a minute it was sold in each region (estimated, as `rate_limits` count them), for the region's admission (`regions[].admission.enabled`): within it, its requests keep their class whatever the other tenants send; up to 1.5x it, while it is within its share of the demand; what it sends past that ranks after every tenant within its commitment or share, in class order (docs/ADMISSION.md). Size the commitments within the region's prefill. Default none: judged by its weighted share of the demand.",
    ),
  budget: budgetSchema
    .optional()
    .describe(
      "What it may spend over every region, in tokens or USD, a UTC day and a calendar month: past it, 429 `insufficient_quota` until the period resets (docs/USAGE.md). Default none.",
    ),
  prices: pricesSchema
    .optional()
    .describe("Its own prices for some models (e.g. a negotiated rate), each replacing the top-level `prices` entry of that model."),
  priority: priorityClassSchema
    .default("standard")
    .describe(
      "Its priority class in every region's queue (docs/ADMISSION.md): `interactive` is released first, `batch` last and only onto idle nodes while a higher class is active, so batch absorbs shedding first. A request may lower its own with `x-warmpath-priority`, never raise it.",
    ),
  ttft_objective_ms: z
    .number()
    .int()
    .min(1)
    .max(MAX_OBJECTIVE_MS)
    .optional()
    .describe(
      "Its time-to-first-token objective (ms), replacing the region's default (max(objective_min_ms, objective_prefill_factor x the cold prefill)); a request may ask for a tighter one with `x-warmpath-ttft-objective-ms`.",
    ),
});
