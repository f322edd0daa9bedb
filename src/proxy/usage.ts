/**
 * Reading `usage` from the end of an answer without buffering it. vLLM and SGLang put `usage` at
 * the end of a JSON answer and in the last data event of a stream (with
 * `stream_options.include_usage`), so the relay keeps only a bounded tail of the text and this
 * function finds the last usage object in it.
 */

import type { Usage } from "../contracts/routing.ts";

export type { Usage };

/** Characters of the answer's tail kept for usage parsing. */
export const USAGE_TAIL_CHARS = 8192;

/** Finds the last `"usage": {...}` object in `tail` (one nested level, for prompt_tokens_details). */
export function parseUsageTail(tail: string): Usage | undefined {
  let at = tail.lastIndexOf('"usage"');
  while (at >= 0) {
    const open = tail.indexOf("{", at);
    if (open >= 0) {
      const object = balancedObject(tail, open);
      if (object !== undefined) {
        const usage = toUsage(object);
        if (usage) return usage;
      }
    }
    at = tail.lastIndexOf('"usage"', at - 1);
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

function toUsage(value: unknown): Usage | undefined {
  if (!value || typeof value !== "object") return undefined;
  const u = value as Record<string, unknown>;
  if (typeof u.prompt_tokens !== "number") return undefined;
  const details = u.prompt_tokens_details as Record<string, unknown> | null | undefined;
  const cached = typeof details?.cached_tokens === "number" ? details.cached_tokens : 0;
  return {
    promptTokens: u.prompt_tokens,
    cachedTokens: cached,
    completionTokens: typeof u.completion_tokens === "number" ? u.completion_tokens : 0,
  };
}
