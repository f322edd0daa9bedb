/**
 * OpenAI's rate-limit headers, which its SDKs and many clients read to pace themselves:
 * `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, the reset as a duration (`1s`, `6m0s`,
 * `20ms`), as api.openai.com writes it.
 */
import type { RateLimitState } from "../contracts/routing.ts";

/** A duration as OpenAI writes it: `20ms` under a second, else `[Nm]S.sss s` trimmed (`1s`, `6m0s`, `1.5s`). */
export function openaiDuration(seconds: number): string {
  if (seconds < 1) return `${Math.max(0, Math.ceil(seconds * 1000))}ms`;
  const minutes = Math.floor(seconds / 60);
  const rest = Number((seconds - minutes * 60).toFixed(3));
  return minutes > 0 ? `${minutes}m${rest}s` : `${rest}s`;
}

export function rateLimitHeaders(state: RateLimitState | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kind of ["requests", "tokens"] as const) {
    const s = state?.[kind];
    if (!s) continue;
    out[`x-ratelimit-limit-${kind}`] = String(s.limit);
    out[`x-ratelimit-remaining-${kind}`] = String(s.remaining);
    out[`x-ratelimit-reset-${kind}`] = openaiDuration(s.resetSeconds);
  }
  return out;
}
