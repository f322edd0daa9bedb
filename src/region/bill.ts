/**
 * A request's bill for the usage ledger (docs/USAGE.md): the usage its answer carried (a continued
 * stream's whole answer, as src/region/seam.ts rewrote it for the client), priced at the tenant's
 * price for the model; or, when the node reported none (a stream cut short, a client that left),
 * an estimate, kept apart. Billed once per answered request, by the region that answered it, on
 * the completion of the node that answered last.
 *
 * A node's usage is checked before it is billed (src/proxy/usage-check.ts): one that fails a check
 * is billed as if the node had reported none, and the reason is logged (`usage_rejected`). An
 * estimate never bills more completion tokens than the request's `max_tokens` allowed.
 */
import type { TenantConfig } from "../config/schema.ts";
import type { Usage } from "../contracts/routing.ts";
import type { Bill, RouteBudget } from "../contracts/usage.ts";
import { costUsd, priceOf } from "../core/usage/cost.ts";
import { COMPLETION_SLACK_TOKENS, checkUsage, type UsageRejection } from "../proxy/usage-check.ts";
import type { RegionContext } from "./context.ts";

/**
 * Bytes of a streamed answer per token, for an estimate without usage: an OpenAI-style chunk
 * carrying one token is ~150 bytes of envelope (id, object, created, model, choices) around it.
 */
const STREAMED_BYTES_PER_TOKEN = 150;

/** The tenant's budget as the region object applies it, or undefined (none configured). */
export function budgetOf(tenant: TenantConfig | undefined): RouteBudget | undefined {
  const b = tenant?.budget;
  if (!b) return undefined;
  return { tokensPerDay: b.tokens_per_day, tokensPerMonth: b.tokens_per_month, usdPerDay: b.usd_per_day, usdPerMonth: b.usd_per_month };
}

/** What is known of an answer when it ends. */
interface AnswerMeasure {
  /** The usage its answer carried (or would have, the router asked for it), if the node reported any. */
  usage: Usage | undefined;
  /** Tokens a continuable stream relayed (src/region/seam.ts), for an estimate. */
  streamedTokens: number | undefined;
  /** Bytes relayed to the client, and whether as a stream. */
  bytes: number;
  sse: boolean;
  /** Characters of answer text a continuable stream relayed (src/region/seam.ts), when read. */
  relayedChars?: number | undefined;
}

/** A node's usage the checks refused, for the `usage_rejected` line and the decision line. */
export interface RejectedUsage {
  reason: UsageRejection;
  /** The bound it broke (undefined: not counts at all). */
  limit: number | undefined;
  /** The node's figures, as reported (numbers only: nothing of the answer). */
  reported: Usage;
}

/** An answer's usage once checked: the usage to bill, learn from and log (undefined: none to trust), and why one was refused. */
interface CheckedUsage {
  usage: Usage | undefined;
  rejected: RejectedUsage | undefined;
  /** The request's completion budget, when its body gave one. */
  maxTokens: number | undefined;
}

/** Checks the usage an answer carried against the request and what was relayed (src/proxy/usage-check.ts). */
export function checkedUsage(rc: RegionContext, m: AnswerMeasure): CheckedUsage {
  const maxTokens = rc.completionBudget;
  if (!m.usage) return { usage: undefined, rejected: undefined, maxTokens };
  const verdict = checkUsage(m.usage, {
    maxTokens,
    relayedBytes: m.bytes,
    relayedChars: m.relayedChars,
    promptEstimate: rc.request.promptTokens,
  });
  if (verdict.ok) return { usage: verdict.usage, rejected: undefined, maxTokens };
  return { usage: undefined, rejected: { reason: verdict.reason, limit: verdict.limit, reported: { ...m.usage } }, maxTokens };
}

/** The `usage_rejected` line: which request and node, why, the bound and the figures the node claimed. */
export function logRejectedUsage(rc: RegionContext, node: string, rejected: RejectedUsage): void {
  console.log(
    JSON.stringify({
      event: "usage_rejected",
      request_id: rc.request.requestId,
      region: rc.region.config.name,
      tenant: rc.request.tenant.id,
      node,
      reason: rejected.reason,
      limit: rejected.limit,
      reported: rejected.reported,
    }),
  );
}

/**
 * The bill of an answered request. `m.usage` must be checked already ({@link checkedUsage}):
 * undefined when the node reported none or its usage was refused. `maxTokens` caps an estimate.
 */
export function billOf(rc: RegionContext, m: AnswerMeasure, maxTokens?: number): Bill {
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
  const estimate = m.streamedTokens ?? Math.ceil(m.bytes / (m.sse ? STREAMED_BYTES_PER_TOKEN : charsPerToken));
  // A node that padded its stream is not billed past what the client allowed.
  const completionTokens = Math.max(0, Math.min(estimate, maxTokens === undefined ? Infinity : maxTokens + COMPLETION_SLACK_TOKENS));
  const tokens = { promptTokens: request.promptTokens, cachedTokens: 0, completionTokens };
  return { tenant: request.tenant.id, model: request.model, estimated: true, ...tokens, costUsd: costUsd(tokens, price), budgeted };
}
