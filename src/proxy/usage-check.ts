/**
 * Whether a node's `usage` can be billed (docs/USAGE.md, "What is billed"). A node is not trusted
 * to count: its figures are checked against what the router knows of the request and of the answer
 * it relayed, and a usage that fails a check is not billed (the router's estimate is, and the
 * reason is logged: src/region/bill.ts). The checks, and the figure behind each bound:
 * - every count a non-negative safe integer (negative or fractional usage was served and never
 *   billed, since the ledger refuses it), and cached tokens at most the prompt;
 * - completion tokens at most the request's `max_completion_tokens` / `max_tokens` (the larger
 *   when both are given: vLLM takes `max_completion_tokens` first) plus
 *   {@link COMPLETION_SLACK_TOKENS} (a stop token counted but not shown; a continued stream's
 *   carried part is estimated at one token a chunk);
 * - completion tokens at most the bytes the node relayed plus the same slack: every token the
 *   client was sent is at least one byte of the body, in any API's envelope (a sound upper bound
 *   whatever the tokenizer);
 * - where the text relayed is known (a chat or completions stream read by the seam), completion
 *   tokens at least its characters / {@link MAX_CHARS_PER_TOKEN} (a loose lower bound: the longest
 *   tokens of common vocabularies, runs of spaces or dashes, are under 128 characters);
 * - prompt tokens at most {@link PROMPT_ESTIMATE_FACTOR} x the router's estimate (characters / 4)
 *   plus {@link PROMPT_ALLOWANCE_TOKENS} (a chat template's, tool schemas' and images' tokens, which
 *   the estimate does not see), and at least one token when the estimate is any. No tighter lower
 *   bound holds: an image counts in the estimate by its base64 text (a 1 MB image is ~330,000
 *   estimated tokens) but costs a vision model ~1,000 to 16,000.
 */
import type { Usage } from "./usage.ts";
import type { UsageRejection } from "../contracts/decision-line.ts";

/** Completion tokens a node may report past the request's `max_tokens` and past the bytes relayed. */
export const COMPLETION_SLACK_TOKENS = 16;
/** The most characters one token may stand for, for the lower bound on completion tokens. */
export const MAX_CHARS_PER_TOKEN = 256;
/** A node's prompt tokens may be at most this many times the router's estimate (plus the allowance). */
export const PROMPT_ESTIMATE_FACTOR = 8;
/** Prompt tokens allowed on top of the factor: templates, tool schemas, images. */
export const PROMPT_ALLOWANCE_TOKENS = 1024;

/** Why a node's usage was not billed (the `usage_rejected` line's and the data point's `reason`). */
export type { UsageRejection };

/** What the router knows to check a usage against. */
export interface UsageBounds {
  /** The request's completion budget (`max_completion_tokens` / `max_tokens`), if it gave one. */
  maxTokens: number | undefined;
  /** Bytes of the answer the node(s) relayed. */
  relayedBytes: number;
  /** Characters of answer text relayed, when the stream's text was read (src/region/seam.ts). */
  relayedChars: number | undefined;
  /** The router's estimate of the prompt (tokens). */
  promptEstimate: number;
}

type UsageVerdict = { ok: true; usage: Usage } | { ok: false; reason: UsageRejection; limit: number | undefined };

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

/** Whether `usage` is a non-negative integer count in every field (cached tokens, if given, at most the prompt). */
export function wellFormed(usage: Usage): UsageRejection | undefined {
  if (!isCount(usage.promptTokens) || !isCount(usage.completionTokens)) return "not-counts";
  if (usage.cachedTokens !== undefined) {
    if (!isCount(usage.cachedTokens)) return "not-counts";
    if (usage.cachedTokens > usage.promptTokens) return "cached-over-prompt";
  }
  return undefined;
}

/** Checks a node's usage against the request and the answer relayed (see the module's comment). */
export function checkUsage(usage: Usage, b: UsageBounds): UsageVerdict {
  const malformed = wellFormed(usage);
  if (malformed) return { ok: false, reason: malformed, limit: undefined };
  const completion = usage.completionTokens;
  if (b.maxTokens !== undefined && completion > b.maxTokens + COMPLETION_SLACK_TOKENS) {
    return { ok: false, reason: "over-max-tokens", limit: b.maxTokens + COMPLETION_SLACK_TOKENS };
  }
  if (completion > b.relayedBytes + COMPLETION_SLACK_TOKENS) {
    return { ok: false, reason: "over-relayed", limit: b.relayedBytes + COMPLETION_SLACK_TOKENS };
  }
  if (b.relayedChars !== undefined) {
    const least = Math.floor(b.relayedChars / MAX_CHARS_PER_TOKEN);
    if (completion < least) return { ok: false, reason: "under-relayed", limit: least };
  }
  const most = PROMPT_ESTIMATE_FACTOR * b.promptEstimate + PROMPT_ALLOWANCE_TOKENS;
  if (usage.promptTokens > most) return { ok: false, reason: "prompt-over-estimate", limit: most };
  if (b.promptEstimate > 0 && usage.promptTokens < 1) return { ok: false, reason: "prompt-under-estimate", limit: 1 };
  return { ok: true, usage };
}
