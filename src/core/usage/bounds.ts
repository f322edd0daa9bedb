/**
 * The most any figure of the usage ledger or the budget ledger may hold, and the arithmetic that
 * keeps it there (docs/USAGE.md, "Bounds"). A node's usage is validated where it is read
 * (src/region/bill.ts), but the ledgers assume a bill may still be absurd: one such bill used to
 * push a row past 2^53 (after which no export containing its day could be answered, and the spend
 * batch holding it was refused by the budget ledger and resent unchanged for ever). Here a bill is
 * clamped to what one request can cost, and every sum saturates below what the contracts accept,
 * so no row, spend line or batch can become unsendable.
 */
import type { Bill } from "../../contracts/usage.ts";

/**
 * The most tokens one request is billed (prompt, cached or completion, each): 100 million, ten
 * times the largest context window served today (10M tokens), so no real answer is clamped, and a
 * row can take 90 million such requests before it saturates at {@link MAX_TOKENS_SUM}.
 */
export const MAX_REQUEST_TOKENS = 100_000_000;
/** The most USD one request is billed: MAX_REQUEST_TOKENS at the highest price the configuration allows (USD 100,000 per million tokens, usage-schema.ts), x2 for prompt and completion. */
export const MAX_REQUEST_USD = 2 * (MAX_REQUEST_TOKENS / 1_000_000) * 100_000;
/** A token sum saturates here: exact integers in a double, and what the contracts' counts accept. */
export const MAX_TOKENS_SUM = Number.MAX_SAFE_INTEGER;
/** A USD sum saturates here (the contracts' bound): a thousand billion dollars, far past any invoice; a double still resolves 0.0002 USD at that size. */
export const MAX_USD_SUM = 1e12;

/** `a + b`, saturating at {@link MAX_TOKENS_SUM} (and never below 0). */
export function addTokens(a: number, b: number): number {
  return Math.max(0, Math.min(MAX_TOKENS_SUM, a + b));
}

/** `a + b`, saturating at {@link MAX_USD_SUM} (and never below 0). */
export function addUsd(a: number, b: number): number {
  return Math.max(0, Math.min(MAX_USD_SUM, a + b));
}

/** A token count as the ledgers keep it: a non-negative integer within {@link MAX_TOKENS_SUM} (NaN as 0). */
export function tokenCount(n: number): number {
  return Number.isFinite(n) ? Math.max(0, Math.min(MAX_TOKENS_SUM, Math.floor(n))) : n > 0 ? MAX_TOKENS_SUM : 0;
}

/** A USD amount as the ledgers keep it: non-negative, within {@link MAX_USD_SUM} (NaN as 0). */
export function usdAmount(n: number): number {
  return Number.isFinite(n) ? Math.max(0, Math.min(MAX_USD_SUM, n)) : n > 0 ? MAX_USD_SUM : 0;
}

/** Which of a bill's figures were past what one request can cost. */
type ClampedField = "promptTokens" | "cachedTokens" | "completionTokens" | "costUsd";

/**
 * A bill within what one request can cost ({@link MAX_REQUEST_TOKENS}, {@link MAX_REQUEST_USD}),
 * and the figures that were not (the caller logs them): an absurd bill is counted at the ceiling,
 * never dropped (the tokens were served) and never allowed to overflow a sum.
 */
export function clampBill(bill: Bill): { bill: Bill; clamped: ClampedField[] } {
  const clamped: ClampedField[] = [];
  const tokens = (field: "promptTokens" | "cachedTokens" | "completionTokens"): number => {
    const v = bill[field];
    if (v <= MAX_REQUEST_TOKENS && v >= 0 && Number.isInteger(v)) return v;
    clamped.push(field);
    return Math.max(0, Math.min(MAX_REQUEST_TOKENS, Number.isFinite(v) ? Math.floor(v) : MAX_REQUEST_TOKENS));
  };
  const promptTokens = tokens("promptTokens");
  const cachedTokens = tokens("cachedTokens");
  const completionTokens = tokens("completionTokens");
  let costUsd = bill.costUsd;
  if (!(costUsd >= 0 && costUsd <= MAX_REQUEST_USD)) {
    clamped.push("costUsd");
    costUsd = Math.max(0, Math.min(MAX_REQUEST_USD, Number.isFinite(costUsd) ? costUsd : MAX_REQUEST_USD));
  }
  if (!clamped.length) return { bill, clamped };
  return { bill: { ...bill, promptTokens, cachedTokens, completionTokens, costUsd }, clamped };
}
