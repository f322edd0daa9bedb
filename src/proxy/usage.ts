/**
 * Reading `usage` (and llama.cpp's `timings`) from the end of an answer without buffering it. vLLM and SGLang put `usage` at
 * the end of a JSON answer and in the last data event of a stream (with
 * `stream_options.include_usage`), so the relay keeps only a bounded tail of the text and this
 * function finds the last usage object in it.
 */

import type { Usage } from "../contracts/routing.ts";

export type { Usage };

/** Characters of the answer's tail kept for usage parsing. */
export const USAGE_TAIL_CHARS = 8192;

/**
 * Finds the last `"usage": {...}` object in `tail` (one nested level, for prompt_tokens_details).
 * An Anthropic stream's `message_delta` may carry only `output_tokens` (its prompt's counts came in
 * `message_start`): the completion is then that later count, the prompt the earlier object's, found
 * in the answer's `head` when the answer is longer than its tail.
 */
export function parseUsageTail(tail: string, head = ""): Usage | undefined {
  const whole = lastObject(tail, '"usage"', toUsage);
  const output = lastObject(tail, '"usage"', outputTokensOnly);
  if (output && (!whole || output.at > whole.at)) {
    const earlier = whole ?? lastObject(head, '"usage"', toUsage);
    if (earlier) return { ...earlier.value, completionTokens: output.value };
  }
  return whole?.value;
}

/** A usage object with `output_tokens` and no prompt count (Anthropic's `message_delta`). */
function outputTokensOnly(value: unknown): number | undefined {
  if (!value || typeof value !== "object") return undefined;
  const u = value as Record<string, unknown>;
  return typeof u.output_tokens === "number" && u.input_tokens === undefined && u.prompt_tokens === undefined ? u.output_tokens : undefined;
}

/**
 * The last object following `key` in `tail` that `read` accepts (walking back past values that
 * are cut off, not objects, or not of the expected shape, such as `"usage": null`), and where.
 */
function lastObject<T>(tail: string, key: string, read: (value: unknown) => T | undefined): { value: T; at: number } | undefined {
  let at = tail.lastIndexOf(key);
  while (at >= 0) {
    const open = tail.indexOf("{", at);
    if (open >= 0) {
      const object = balancedObject(tail, open);
      const value = object === undefined ? undefined : read(object);
      if (value !== undefined) return { value, at };
    }
    at = tail.lastIndexOf(key, at - 1);
  }
  return undefined;
}

function balancedObject(text: string, open: number): unknown {
  let depth = 0;
  let inString = false;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) {
      try {
        return JSON.parse(text.slice(open, i + 1));
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * A usage object in any of the three shapes engines answer with:
 * - chat and completions: `prompt_tokens`, `completion_tokens`, `prompt_tokens_details.cached_tokens`;
 * - the Responses API: `input_tokens`, `output_tokens`, `input_tokens_details.cached_tokens`;
 * - Anthropic's Messages API: `input_tokens` are the tokens *not* read from the cache, and
 *   `cache_read_input_tokens` (and `cache_creation_input_tokens`) the rest, so the prompt is their sum.
 */
function toUsage(value: unknown): Usage | undefined {
  if (!value || typeof value !== "object") return undefined;
  const u = value as Record<string, unknown>;
  const num = (v: unknown) => (typeof v === "number" ? v : undefined);
  let usage: Usage;
  let cached: number | undefined;
  if (num(u.prompt_tokens) !== undefined) {
    usage = { promptTokens: num(u.prompt_tokens)!, completionTokens: num(u.completion_tokens) ?? 0 };
    cached = num((u.prompt_tokens_details as Record<string, unknown> | null | undefined)?.cached_tokens);
  } else if (num(u.input_tokens) !== undefined && num(u.cache_read_input_tokens) !== undefined) {
    cached = num(u.cache_read_input_tokens)!;
    usage = {
      promptTokens: num(u.input_tokens)! + cached + (num(u.cache_creation_input_tokens) ?? 0),
      completionTokens: num(u.output_tokens) ?? 0,
    };
  } else if (num(u.input_tokens) !== undefined) {
    usage = { promptTokens: num(u.input_tokens)!, completionTokens: num(u.output_tokens) ?? 0 };
    cached = num((u.input_tokens_details as Record<string, unknown> | null | undefined)?.cached_tokens);
  } else return undefined;
  // Absent is not zero: an engine that does not report cached tokens must not look evicted.
  if (cached !== undefined) usage.cachedTokens = cached;
  return usage;
}

/**
 * llama.cpp's server reports its prompt cache in `timings` (`cache_n`: prompt tokens reused,
 * `prompt_n`: prompt tokens computed), in the final event of a stream and at the end of a JSON
 * answer, rather than in `usage.prompt_tokens_details`. Finds the last such object in `tail`.
 */
function parseLlamaTimingsTail(tail: string): Pick<Usage, "promptTokens" | "cachedTokens"> | undefined {
  return lastObject(tail, '"timings"', (object): Pick<Usage, "promptTokens" | "cachedTokens"> | undefined => {
    if (!object || typeof object !== "object") return undefined;
    const t = object as Record<string, unknown>;
    if (typeof t.cache_n !== "number" || typeof t.prompt_n !== "number") return undefined;
    return { promptTokens: t.cache_n + t.prompt_n, cachedTokens: t.cache_n };
  })?.value;
}

/** The answer's usage, with llama.cpp's cache counters filling in what `usage` does not say (`head`: the answer's first bytes). */
export function parseAnswerTail(tail: string, head = ""): Usage | undefined {
  const usage = parseUsageTail(tail, head);
  const timings = parseLlamaTimingsTail(tail);
  if (!timings) return usage;
  if (!usage) return { promptTokens: timings.promptTokens, cachedTokens: timings.cachedTokens, completionTokens: 0 };
  return usage.cachedTokens === undefined ? { ...usage, cachedTokens: timings.cachedTokens } : usage;
}
