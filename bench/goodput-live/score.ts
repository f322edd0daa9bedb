/**
 * Scoring one replay from what the client measured (pure): goodput, token-weighted goodput, time
 * to first token, and every way a request can fail to be answered in time, counted apart.
 */
import { percentile } from "../../src/core/stats.ts";
import type { RequestRecord } from "./client.ts";

/** What the scorer needs of each request: its prompt tokens (the fleet's count) and objective (wall ms). */
export interface Scored {
  id: number;
  promptTokens: number;
  objectiveMs: number;
}

export interface Summary {
  requests: number;
  /** First token within the objective. */
  within: number;
  /** Answered, first token after the objective. */
  late: number;
  /** within / requests: every request counts, refused ones as misses. */
  goodput: number;
  /** Prompt tokens of the requests within / prompt tokens of all requests. */
  tokenGoodput: number;
  /** Time to first token of the answered requests (ms). */
  ttftMeanMs: number;
  ttftP50Ms: number;
  ttftP99Ms: number;
  answered: number;
  /** 429s by error code (warmpath's shedding: `objective_unreachable`). */
  refused429: Record<string, number>;
  /** 429s carrying a Retry-After header. */
  refused429WithRetryAfter: number;
  /** 503s by error code. */
  refused503: Record<string, number>;
  /** Other answers that were errors, by `status code`. */
  errors: Record<string, number>;
  /** No first token by the give-up time (after the objective): the client closed the connection. */
  gaveUp: number;
  /** No answer that says what happened, by what went wrong. */
  lost: Record<string, number>;
  /** Non-2xx answers whose body is not OpenAI's error shape. */
  unshapedErrors: number;
  /** Cached share of the answered requests' prompt tokens (the nodes' usage). */
  hitRate: number;
  /** Answered requests whose usage.prompt_tokens differs from the fleet's count the objective was computed from. */
  promptTokenMismatches: number;
  /** Answered requests per node. */
  perNode: Record<string, number>;
  /** How late the client sent requests against the schedule (ms). */
  sendLagP99Ms: number;
  sendLagMaxMs: number;
  /** warmpath's time in the region's queue (x-warmpath-queued-ms) of the answered requests, when it says. */
  queuedP50Ms: number | undefined;
  queuedP99Ms: number | undefined;
}

const bump = (m: Record<string, number>, k: string) => {
  m[k] = (m[k] ?? 0) + 1;
};

export function summarise(requests: readonly Scored[], records: readonly RequestRecord[]): Summary {
  const byId = new Map(records.map((r) => [r.id, r]));
  let within = 0;
  let late = 0;
  let tokensAll = 0;
  let tokensWithin = 0;
  let prompt = 0;
  let cached = 0;
  let mismatches = 0;
  let gaveUp = 0;
  let unshaped = 0;
  let withRetryAfter = 0;
  const ttft: number[] = [];
  const queued: number[] = [];
  const refused429: Record<string, number> = {};
  const refused503: Record<string, number> = {};
  const errors: Record<string, number> = {};
  const lost: Record<string, number> = {};
  const perNode: Record<string, number> = {};
  for (const q of requests) {
    tokensAll += q.promptTokens;
    const r = byId.get(q.id);
    if (!r) {
      bump(lost, "no record");
      continue;
    }
    if (r.status !== undefined && r.status !== 200 && r.shaped === false) unshaped++;
    switch (r.outcome) {
      case "answered": {
        ttft.push(r.ttftMs!);
        if (r.ttftMs! <= q.objectiveMs) {
          within++;
          tokensWithin += q.promptTokens;
        } else late++;
        prompt += r.promptTokens ?? 0;
        cached += r.cachedTokens ?? 0;
        if (r.promptTokens !== q.promptTokens) mismatches++;
        if (r.node) bump(perNode, r.node);
        if (r.queuedMs !== undefined && Number.isFinite(r.queuedMs)) queued.push(r.queuedMs);
        break;
      }
      case "refused":
        if (r.status === 429) {
          bump(refused429, r.code ?? "(no code)");
          if (r.retryAfter !== undefined) withRetryAfter++;
        } else bump(refused503, r.code ?? "(no code)");
        break;
      case "error":
        bump(errors, `${r.status ?? "stream"} ${r.code ?? ""}`.trim());
        break;
      case "gave-up":
        gaveUp++;
        break;
      case "lost":
        bump(lost, r.code ?? "lost");
        break;
    }
  }
  ttft.sort((a, b) => a - b);
  queued.sort((a, b) => a - b);
  const lags = records.map((r) => r.sendLagMs).sort((a, b) => a - b);
  const n = requests.length;
  return {
    requests: n,
    within,
    late,
    goodput: n ? within / n : NaN,
    tokenGoodput: tokensAll ? tokensWithin / tokensAll : NaN,
    ttftMeanMs: ttft.length ? ttft.reduce((a, b) => a + b, 0) / ttft.length : NaN,
    ttftP50Ms: percentile(ttft, 0.5),
    ttftP99Ms: percentile(ttft, 0.99),
    answered: ttft.length,
    refused429,
    refused429WithRetryAfter: withRetryAfter,
    refused503,
    errors,
    gaveUp,
    lost,
    unshapedErrors: unshaped,
    hitRate: prompt ? cached / prompt : NaN,
    promptTokenMismatches: mismatches,
    perNode,
    sendLagP99Ms: percentile(lags, 0.99),
    sendLagMaxMs: lags.length ? lags[lags.length - 1]! : NaN,
    queuedP50Ms: queued.length ? percentile(queued, 0.5) : undefined,
    queuedP99Ms: queued.length ? percentile(queued, 0.99) : undefined,
  };
}

/** Sum of a count map. */
export function total(m: Record<string, number>): number {
  return Object.values(m).reduce((a, b) => a + b, 0);
}
