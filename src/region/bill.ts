/**
 * A request's bill for the usage ledger (docs/USAGE.md): the usage its answer carried (a continued
 * stream's whole answer, as src/region/seam.ts rewrote it for the client), priced at the tenant's
 * price for the model; or, when the node reported none (a stream cut short, a client that left),
 * an estimate, kept apart. Billed once per answered request, by the region that answered it, on
 * the completion of the node that answered last.
 */
import type { TenantConfig } from "../config/schema.ts";
import type { Usage } from "../contracts/routing.ts";
import type { Bill, RouteBudget } from "../contracts/usage.ts";
import { costUsd, priceOf } from "../core/usage/cost.ts";
import type { RegionContext } from "./context.ts";

/**
 * Bytes of a streamed answer per token, for an estimate without usage: an OpenAI-style chunk
 * carrying one token is ~150 bytes of envelope (id, object, created, model, choices) around it.
 */
export const STREAMED_BYTES_PER_TOKEN = 150;

/** The tenant's budget as the region object applies it, or undefined (none configured). */
export function budgetOf(tenant: TenantConfig | undefined): RouteBudget | undefined {
  const b = tenant?.budget;
  if (!b) return undefined;
  return { tokensPerDay: b.tokens_per_day, tokensPerMonth: b.tokens_per_month, usdPerDay: b.usd_per_day, usdPerMonth: b.usd_per_month };
}

/** What is known of an answer when it ends. */
export interface AnswerMeasure {
  /** The usage its answer carried (or would have, the router asked for it), if the node reported any. */
  usage: Usage | undefined;
  /** Tokens a continuable stream relayed (src/region/seam.ts), for an estimate. */
  streamedTokens: number | undefined;
  /** Bytes relayed to the client, and whether as a stream. */
  bytes: number;
  sse: boolean;
}

/** The bill of an answered request. */
export function billOf(rc: RegionContext, m: AnswerMeasure): Bill {
  const { request, config } = rc;
  const tenant = config.tenantById.get(request.tenant.id);
  const price = priceOf(request.model, config.raw.prices, tenant?.prices);
  const budgeted = tenant?.budget !== undefined;
  if (m.usage) {
    const tokens = {
      promptTokens: m.usage.promptTokens,
      cachedTokens: m.usage.cachedTokens ?? 0,
      completionTokens: m.usage.completionTokens,
    };
    return { tenant: request.tenant.id, model: request.model, estimated: false, ...tokens, costUsd: costUsd(tokens, price), budgeted };
  }
  const charsPerToken = config.prefix.charsPerToken;
  const completionTokens = m.streamedTokens ?? Math.ceil(m.bytes / (m.sse ? STREAMED_BYTES_PER_TOKEN : charsPerToken));
  const tokens = { promptTokens: request.promptTokens, cachedTokens: 0, completionTokens };
  return { tenant: request.tenant.id, model: request.model, estimated: true, ...tokens, costUsd: costUsd(tokens, price), budgeted };
}
