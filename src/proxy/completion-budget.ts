/**
 * A request's completion budget: what bounds the completion tokens a node may claim for it
 * (src/proxy/usage-check.ts, through src/region/bill.ts). Read by the edge from the body it parsed,
 * and sent with the dispatch (src/contracts/region-service.ts `bodyFields`), so the region worker
 * does not scan up to `max_body_bytes` of the body's text again; read by the region worker from
 * that scan (body-fields.ts) when an older edge sent none.
 */
import { STREAM_OPTIONS } from "./stream-usage.ts";

/** The body keys that bound an answer's completion tokens (chat, completions, Responses, Messages). */
export const COMPLETION_BUDGET_KEYS = ["max_completion_tokens", "max_tokens", "max_output_tokens"] as const;

/**
 * The largest of the body's budget keys, floored (vLLM takes `max_completion_tokens` over
 * `max_tokens`; a bound must hold whichever the engine reads), or undefined when it gives none: a
 * key counts when its value is a finite number from 0. `value`: a top-level key's value, undefined
 * when absent.
 */
export function completionBudget(value: (key: string) => unknown): number | undefined {
  let most: number | undefined;
  for (const key of COMPLETION_BUDGET_KEYS) {
    const v = value(key);
    if (typeof v === "number" && Number.isFinite(v) && v >= 0) most = Math.max(most ?? 0, Math.floor(v));
  }
  return most;
}

/** What the edge sends of a body it parsed (the dispatch's `bodyFields`): its completion budget, and whether it has `stream_options`. */
export function parsedBodyFields(object: Record<string, unknown>): { completionBudget: number | undefined; hasStreamOptions: boolean } {
  return {
    completionBudget: completionBudget((key) => (Object.hasOwn(object, key) ? object[key] : undefined)),
    hasStreamOptions: Object.hasOwn(object, STREAM_OPTIONS),
  };
}
