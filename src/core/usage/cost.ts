/**
 * What a request's tokens cost at the configured prices (USD per million tokens, as providers list
 * them). Prompt tokens the engine read from its prefix cache are priced apart (`cached_input`,
 * default the input price): they are what cache-aware routing saves, and what a provider bills
 * less for.
 */
import type { PriceConfig } from "../../config/usage-schema.ts";

/** Token counts as an answer's usage reports them: `promptTokens` includes `cachedTokens`. */
interface TokenCounts {
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
}

/** A model's price as the ledger applies it (USD per million tokens). */
export interface Price {
  input: number;
  cachedInput: number;
  output: number;
}

const PER_MILLION = 1_000_000;

/** The cost of `tokens` at `price` (USD); 0 without a price. Cached tokens beyond the prompt are counted as prompt tokens. */
export function costUsd(tokens: TokenCounts, price: Price | undefined): number {
  if (!price) return 0;
  const cached = Math.min(tokens.cachedTokens, tokens.promptTokens);
  return ((tokens.promptTokens - cached) * price.input + cached * price.cachedInput + tokens.completionTokens * price.output) / PER_MILLION;
}

/**
 * The price of `model` for a tenant: its own entry if it has one, else the configuration's, else
 * none (the model costs 0).
 */
export function priceOf(
  model: string,
  prices: readonly PriceConfig[],
  tenantPrices: readonly PriceConfig[] | undefined,
): Price | undefined {
  const p = tenantPrices?.find((x) => x.model === model) ?? prices.find((x) => x.model === model);
  return p && { input: p.input, cachedInput: p.cached_input ?? p.input, output: p.output };
}
