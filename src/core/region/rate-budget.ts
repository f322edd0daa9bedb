/**
 * Per-tenant rate limits of a region: requests per minute and estimated prompt tokens per minute,
 * as token buckets (a full minute's budget may be spent at once, and refills continuously), so a
 * tenant that keeps under its rate is never refused, and one over it is refused at once rather
 * than queued.
 *
 * Kept in the region's object because the object already sees every request it places with its
 * token estimate: an exact budget at no extra round trip. The cost: limits hold per region (a
 * tenant served by two regions may spend its budget in each); an exact global budget would put
 * one more object, far from most clients, on every request's path. Requests are counted when
 * placed, as OpenAI counts them (a request that then fails still spent its budget).
 */

/** Buckets tracked per region (tenants of the configuration, with room to spare). */
const MAX_TRACKED = 1_024;
const MINUTE_MS = 60_000;

interface TenantLimits {
  requestsPerMinute?: number | undefined;
  promptTokensPerMinute?: number | undefined;
}

/** One limit's state after a request, as OpenAI's `x-ratelimit-*` headers report it. */
interface LimitState {
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
}

export type BudgetResult =
  | { ok: true; requests: LimitState | undefined; tokens: LimitState | undefined }
  | {
      ok: false;
      /** Which limit refused it. */
      limit: "requests" | "tokens";
      retryAfterSeconds: number;
      requests: LimitState | undefined;
      tokens: LimitState | undefined;
    };

interface Bucket {
  level: number;
  at: number;
}

function refill(b: Bucket, perMinute: number, now: number): number {
  return Math.min(perMinute, b.level + (Math.max(0, now - b.at) * perMinute) / MINUTE_MS);
}

function state(level: number, perMinute: number): LimitState {
  return {
    limit: perMinute,
    remaining: Math.max(0, Math.floor(level)),
    resetSeconds: ((perMinute - level) * MINUTE_MS) / perMinute / 1000,
  };
}

export class RateBudgets {
  private readonly buckets = new Map<string, { requests: Bucket; tokens: Bucket }>();

  /** Spends one request and `tokens` prompt tokens of `tenant`'s budget, or says why not and when to retry. */
  take(tenant: string, limits: TenantLimits | undefined, tokens: number, now: number): BudgetResult {
    const rpm = limits?.requestsPerMinute;
    const tpm = limits?.promptTokensPerMinute;
    if (rpm === undefined && tpm === undefined) return { ok: true, requests: undefined, tokens: undefined };
    let b = this.buckets.get(tenant);
    if (!b) {
      if (this.buckets.size >= MAX_TRACKED) this.forgetFull(now);
      // Still full (over a thousand tenants active within a minute): the oldest entry goes.
      if (this.buckets.size >= MAX_TRACKED) this.buckets.delete(this.buckets.keys().next().value!);
      b = { requests: { level: rpm ?? 0, at: now }, tokens: { level: tpm ?? 0, at: now } };
      this.buckets.set(tenant, b);
    }
    const r = rpm !== undefined ? refill(b.requests, rpm, now) : 0;
    const t = tpm !== undefined ? refill(b.tokens, tpm, now) : 0;
    // A prompt larger than the whole minute's budget could never pass: it is judged against a full bucket.
    const cost = tpm !== undefined ? Math.min(tokens, tpm) : 0;
    const shortRequests = rpm !== undefined && r < 1;
    const shortTokens = tpm !== undefined && t < cost;
    if (shortRequests || shortTokens) {
      b.requests = { level: r, at: now };
      b.tokens = { level: t, at: now };
      const wait = Math.max(shortRequests ? ((1 - r) * MINUTE_MS) / rpm! : 0, shortTokens ? ((cost - t) * MINUTE_MS) / tpm! : 0);
      return {
        ok: false,
        limit: shortRequests ? "requests" : "tokens",
        retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000)),
        requests: rpm !== undefined ? state(r, rpm) : undefined,
        tokens: tpm !== undefined ? state(t, tpm) : undefined,
      };
    }
    b.requests = { level: r - (rpm !== undefined ? 1 : 0), at: now };
    b.tokens = { level: t - cost, at: now };
    return {
      ok: true,
      requests: rpm !== undefined ? state(b.requests.level, rpm) : undefined,
      tokens: tpm !== undefined ? state(b.tokens.level, tpm) : undefined,
    };
  }

  /** Forgets tenants whose buckets have been idle a minute (full again: nothing to remember). */
  private forgetFull(now: number): void {
    for (const [id, b] of this.buckets) if (now - Math.max(b.requests.at, b.tokens.at) >= MINUTE_MS) this.buckets.delete(id);
  }
}

/** A budget's limits as a route result reports them (the `x-ratelimit-*` headers), or undefined for a tenant without limits. */
export function rateLimitOf(budget: BudgetResult): Pick<BudgetResult, "requests" | "tokens"> | undefined {
  return budget.requests || budget.tokens ? { requests: budget.requests, tokens: budget.tokens } : undefined;
}
