/**
 * Whether the router's predicted cached share of a prompt agrees with what the node measured: the
 * one rule the region router corrects its index by and the benchmark reports agreement with.
 */

/**
 * Engines count cached tokens in whole blocks of their own (vLLM 16 tokens by default, others up
 * to 512: the Mooncake trace's store hashes 512-token blocks) and never the prompt's last token,
 * so a prediction and a measurement of the same cache differ by up to one engine block. Shortfalls
 * within this many tokens (plus 2% of the prompt for the tokenizer's count against the router's
 * characters) are agreement, not evictions. Measured: with one router block (128 tokens) as the
 * allowance, Mooncake's 512-token blocks read as evictions and the corrections cost 0.7 points of
 * hit rate at x2.
 */
export const ENGINE_BLOCK_ALLOWANCE_TOKENS = 512;

/** The tolerance on shares of the prompt: one engine block (at least one router block) plus 2%. */
function shareTolerance(blockTokens: number, promptTokens: number): number {
  return Math.max(blockTokens, ENGINE_BLOCK_ALLOWANCE_TOKENS) / Math.max(1, promptTokens) + 0.02;
}

/**
 * Compares shares, not tokens: the router counts tokens by characters, the node by its tokenizer.
 * @returns the predicted and measured shares, and whether they agree
 */
export function compareShares(
  predictedCachedTokens: number,
  estimatedPromptTokens: number,
  measuredCachedTokens: number,
  measuredPromptTokens: number,
  blockTokens: number,
): { predicted: number; measured: number; tolerance: number; agreed: boolean } {
  const predicted = predictedCachedTokens / Math.max(1, estimatedPromptTokens);
  const measured = measuredCachedTokens / Math.max(1, measuredPromptTokens);
  const tolerance = shareTolerance(blockTokens, estimatedPromptTokens);
  return { predicted, measured, tolerance, agreed: Math.abs(predicted - measured) <= tolerance };
}
