/**
 * Per-tenant fair share of a region's prefill capacity, so one tenant's flood queues behind its
 * own share while the others keep their latency.
 *
 * Engines prefill in arrival order, so whatever a flooding tenant has queued on a node is ahead of
 * everyone's next request there: the only lever a router has is how much it lets queue. The rule:
 * - While the shortest modelled wait in the region is under `fairShareWaitSeconds` (queues short),
 *   everyone is admitted: a tenant may use capacity nobody else is using (work-conserving).
 * - Past it, with two or more tenants active (a request in the last ACTIVE_WINDOW_MS, or work
 *   still queued), a tenant whose recent prefill (uncached tokens dispatched, decayed with a
 *   RECENT_HALF_LIFE_MS half-life) is more than SHARE_TOLERANCE over its weighted share of all the
 *   active tenants' recent prefill (weight / their total weight) is refused here, if it still has
 *   work queued: the worker tries the next region, and answers 429 with `Retry-After` (the time
 *   its queued work takes to drain at its share of the region's rate) if no region takes it.
 *   The light tenants are admitted, so their requests only ever wait behind about
 *   `fairShareWaitSeconds` of someone else's work.
 * Shares are judged on recent work rather than on what is queued at this instant: two tenants
 * sending alike hold 40% or 60% of a queue by the luck of arrival, and must not refuse each other
 * (measured: comparing instantaneous queues refused 7 of 400 requests of two equal tenants in the
 * demo's quick run, `npm run demo -- --quick`). Queued prefill is each request's uncached tokens
 * from dispatch to its first byte (or its end).
 */

/** A tenant counts as active for this long after its last request: a steady light tenant stays active between requests. */
export const ACTIVE_WINDOW_MS = 10_000;
/** Tenants tracked per region (the configuration's tenants, with room to spare). */
const MAX_TRACKED = 1_024;
/** Recent prefill halves every 5 s: a flood is seen within seconds, and forgiven as fast once it stops. */
export const RECENT_HALF_LIFE_MS = 5_000;
/** A tenant is over its share past 1.5x it (75% of the recent work of two equal tenants). */
export const SHARE_TOLERANCE = 0.5;

interface TenantLoad {
  queuedTokens: number;
  weight: number;
  lastSeen: number;
  /** Uncached tokens dispatched, decayed to `recentAt`. */
  recent: number;
  recentAt: number;
}

function decayed(t: TenantLoad, now: number): number {
  return t.recent * 2 ** (-Math.max(0, now - t.recentAt) / RECENT_HALF_LIFE_MS);
}

export type Admission = { ok: true } | { ok: false; retryAfterSeconds: number; shareOfQueue: number; queuedTokens: number };

export class FairShare {
  private readonly tenants = new Map<string, TenantLoad>();

  /**
   * Whether `tenant` may queue more work now. `minWaitSeconds`: the region's shortest modelled
   * wait; `regionRate`: its prefill tokens per second over the eligible nodes.
   */
  admit(tenant: string, weight: number, now: number, minWaitSeconds: number, waitBoundSeconds: number, regionRate: number): Admission {
    const self = this.touch(tenant, weight, now);
    if (minWaitSeconds <= waitBoundSeconds || self.queuedTokens <= 0) return { ok: true };
    let totalRecent = 0;
    let activeWeight = 0;
    let active = 0;
    for (const t of this.tenants.values()) {
      if (t.queuedTokens <= 0 && now - t.lastSeen > ACTIVE_WINDOW_MS) continue;
      active++;
      activeWeight += t.weight;
      totalRecent += decayed(t, now);
    }
    if (active < 2 || totalRecent <= 0) return { ok: true };
    const share = self.weight / activeWeight;
    const used = decayed(self, now) / totalRecent;
    if (used <= share * (1 + SHARE_TOLERANCE)) return { ok: true };
    const drainSeconds = self.queuedTokens / Math.max(1, share * regionRate);
    return {
      ok: false,
      retryAfterSeconds: Math.min(60, Math.max(1, Math.ceil(drainSeconds))),
      shareOfQueue: used,
      queuedTokens: self.queuedTokens,
    };
  }

  /** A request of `tenant` was dispatched with `tokens` to prefill. */
  queued(tenant: string, tokens: number, now: number): void {
    const t = this.tenants.get(tenant);
    if (!t) return;
    t.queuedTokens += tokens;
    t.recent = decayed(t, now) + tokens;
    t.recentAt = now;
  }

  /** Its prefill is over (first byte) or it ended before: the tokens leave the queue. */
  drained(tenant: string, tokens: number): void {
    const t = this.tenants.get(tenant);
    if (t) t.queuedTokens = Math.max(0, t.queuedTokens - tokens);
  }

  private touch(tenant: string, weight: number, now: number): TenantLoad {
    let t = this.tenants.get(tenant);
    if (!t) {
      if (this.tenants.size >= MAX_TRACKED) this.forgetIdle(now);
      this.tenants.set(tenant, (t = { queuedTokens: 0, weight, lastSeen: now, recent: 0, recentAt: now }));
    }
    t.weight = weight;
    t.lastSeen = now;
    return t;
  }

  private forgetIdle(now: number): void {
    for (const [id, t] of this.tenants) if (t.queuedTokens <= 0 && now - t.lastSeen > ACTIVE_WINDOW_MS) this.tenants.delete(id);
  }
}
