/**
 * Per-tenant fair share of a region's prefill capacity, so one tenant's flood queues behind its
 * own share while the others keep their latency.
 *
 * Engines prefill in arrival order (vLLM and SGLang schedule a running prefill's chunks before
 * any waiting request), so whatever a flooding tenant has queued on a node is ahead of
 * everyone's next request there: the only levers a router has are where it lets that work queue
 * and how much. The rules, while two or more tenants are active (a request in the last
 * ACTIVE_WINDOW_MS, or work still queued):
 * - **The reserve.** A *heavy* tenant (one holding more queued prefill than its weighted share of
 *   the short queue `fairShareWaitSeconds` allows: it is building a queue) never places work on
 *   the nodes kept for the others: those holding the least heavy tenants' queued prefill (none,
 *   once it has drained), as many as the others' recent demand in nodes, rounded up, at least
 *   one, and never the whole region, unless the held node holds most of the request's prompt
 *   (HELD_CACHE_SHARE). A light
 *   tenant's next request therefore finds a node with no flood ahead of it, and pays its own
 *   prefill, not someone else's. A heavy tenant uses every other node, and every node when no one
 *   else is active (work-conserving). A tenant flooding the region's demand (more than
 *   SHARE_TOLERANCE over its weighted share of what every active tenant asks: tenant-demand.ts
 *   `floodsEveryone`, the tenant the region's queue ranks last) is heavy too while it has prefill on the
 *   nodes, however short its queue (with nothing on them, holding a node from it holds an idle one): a
 *   flood of short, mostly cached requests builds no queue past the bound, and counted light it had nodes held for
 *   its own demand and was sent to them first, past the tenant it was taking from
 *   (bench:goodput's mix at 1x when this landed, a RAG tenant at five times its rate: the batch
 *   tenant kept 72.1% against 83.5% of its goodput; with the flood heavy, 77.1%).
 * - **The bound.** A tenant whose recent prefill (uncached tokens dispatched, decayed with a
 *   RECENT_HALF_LIFE_MS half-life) is more than SHARE_TOLERANCE over its weighted share of all the
 *   active tenants' recent prefill is refused here once every node it may use has more than
 *   `fairShareWaitSeconds` queued: the worker tries the next region, and answers 429 with
 *   `Retry-After` (the time its queued work takes to drain at its share of the region's rate) if
 *   no region takes it.
 * Measured (docs/faults.md, `npm run faults`): with the bound alone a light tenant's first byte
 * went from 19 ms to 340 ms p50 during a 30-request flood of 100,000-character prompts (it waited
 * behind the flood's half second); with the reserve it stays within 2x of its baseline.
 * Shares are judged on recent work rather than on what is queued at this instant: two tenants
 * sending alike hold 40% or 60% of a queue by the luck of arrival, and must not refuse each other
 * (measured: comparing instantaneous queues refused 7 of 400 requests of two equal tenants in the
 * demo's quick run, `npm run demo -- --quick`). Two tenants that both build queues are both
 * heavy, so neither keeps a reserve from the other. Queued prefill is each request's uncached
 * tokens from dispatch to its first byte (or its end).
 */
import { MemberSum } from "./compensated-sum.ts";
import { DecayingSum, ROUNDING_SLACK } from "./decaying-sum.ts";

/** A tenant counts as active for this long after its last request: a steady light tenant stays active between requests. */
export const ACTIVE_WINDOW_MS = 10_000;
/**
 * Tenants tracked per region (the configuration's tenants, with room to spare), here and by the
 * tenants' demand and growth (tenant-demand.ts, tenant-growth.ts); idle ones are forgotten first.
 */
export const MAX_TRACKED_TENANTS = 1_024;
/** Recent prefill halves every 5 s: a flood is seen within seconds, and forgiven as fast once it stops. */
const RECENT_HALF_LIFE_MS = 5_000;
/**
 * A heavy tenant's request may still go to a held node that holds at least half its prompt: it
 * adds at most half a prompt's prefill there, and sent elsewhere it would lose its cache. Without
 * this the held nodes cost the demo's tenants their locality whenever one of them queued
 * (`npm run demo`: warmpath's hit rate 85.7% without the held nodes, 84.1% with them, 85.5% with this).
 */
export const HELD_CACHE_SHARE = 0.5;

/** A tenant is over its share past 1.5x it (75% of the recent work of two equal tenants). */
export const SHARE_TOLERANCE = 0.5;

interface TenantLoad {
  name: string;
  queuedTokens: number;
  /** Queued prefill by node id (entries removed at zero). */
  byNode: Map<string, number>;
  weight: number;
  lastSeen: number;
  /** Uncached tokens dispatched, decayed to `recentAt`. */
  recent: number;
  recentAt: number;
  /** Seen within ACTIVE_WINDOW_MS as of the last pass over the window (it is in `FairShare.seen`). */
  inWindow: boolean;
  /** Counted among the active tenants (their weights and recent prefill summed): in the window, or with prefill queued. */
  active: boolean;
}

/** A node the tenant could be sent to: its id, modelled wait (s) and prefill rate (tokens/s). */
export interface ShareNode {
  id: string;
  waitSeconds: number;
  prefillRate: number;
  /** It holds at least HELD_CACHE_SHARE of this request's prompt: usable even when held for others. */
  holdsPrompt?: boolean | undefined;
}

function decayed(t: TenantLoad, now: number): number {
  return t.recent * 2 ** (-Math.max(0, now - t.recentAt) / RECENT_HALF_LIFE_MS);
}

export type Admission =
  | {
      ok: true;
      /** Nodes kept for the other tenants: this request may not use them. */
      reserved: ReadonlySet<string> | undefined;
      /** Nodes held for light tenants, this one among them: it goes there. */
      preferred?: ReadonlySet<string> | undefined;
    }
  | { ok: false; retryAfterSeconds: number; shareOfQueue: number; queuedTokens: number; reserved: number };

const ADMIT_ALL: Admission = { ok: true, reserved: undefined };
const NEVER = (): boolean => false;

export class FairShare {
  private readonly tenants = new Map<string, TenantLoad>();
  /** The tenants seen within ACTIVE_WINDOW_MS, in the order last seen: the oldest leave the window first. */
  private readonly seen = new Map<string, TenantLoad>();
  /** The tenants with prefill queued: the only ones that can be heavy, a few where thousands are active. */
  private readonly withQueue = new Set<TenantLoad>();
  /** The tenants not active: forgotten first when the table is full. */
  private readonly idle = new Set<TenantLoad>();
  /** The active tenants' weights, summed as they come and go (decaying-sum.ts: the cost of summing afresh). */
  private readonly activeWeight = new MemberSum();
  /** The latest time seen: a clock that steps back is taken as standing still (expiry is in arrival order). */
  private clock = -Infinity;
  /** The active tenants' recent prefill, summed as it changes. */
  private readonly recentSum = new DecayingSum(RECENT_HALF_LIFE_MS / Math.LN2, (visit) => {
    for (const t of this.tenants.values()) if (t.active) visit(t.recent, t.recentAt);
  });
  /** The nodes held last time: kept while they qualify, so the reserve does not hop between nodes as queues drain. */
  private held: ReadonlySet<string> = new Set();

  /**
   * Whether `tenant` may queue more work now, and where not. `nodes`: the region's nodes this
   * request could use; `waitBoundSeconds`: the region's `fairShareWaitSeconds`; `overDemand`:
   * whether a tenant is over its share of every tenant's demand (tenant-demand.ts
   * `floodsEveryone`), asked of the tenants with prefill queued. O(tenants with prefill queued),
   * whatever the number active.
   */
  admit(
    tenant: string,
    weight: number,
    now: number,
    nodes: readonly ShareNode[],
    waitBoundSeconds: number,
    overDemand: (tenant: string) => boolean = NEVER,
  ): Admission {
    now = this.tick(now);
    this.recentSum.advance(now);
    this.expire(now);
    const self = this.touch(tenant, weight, now);
    const activeCount = this.recentSum.size;
    if (activeCount < 2) return ADMIT_ALL;
    let regionRate = 0;
    for (const n of nodes) regionRate += n.prefillRate;
    const totalRecent = this.recentSum.read(now);
    const activeWeight = this.activeWeight.value;
    // What the short queue holds at the region's rate, shared by weight.
    const boundTokens = waitBoundSeconds * regionRate;
    // Heavy: more queued than its share of the short queue, or anything queued while it sent more
    // than 1.5x its share of the recent prefill. The second keeps a flood heavy while its queue
    // hovers at the bound (else it flips to light as first bytes drain it, lands on a held node,
    // and the next light request waits behind it), and catches it from its second request.
    // Or over its share of what every tenant asks (`overDemand`) while it has prefill on the
    // nodes: the flood the region's queue already ranks last, whose short requests build no queue
    // past the bound here. Not with nothing on the nodes: a tenant sending one request at a time
    // beside a quiet one is over its share of the demand too, and holding a node from it then
    // holds an idle node (its cold requests no longer spread over every node). Every rule needs
    // prefill queued, so only those tenants are weighed.
    const heavies: TenantLoad[] = [];
    let heavyRecent = 0;
    for (const t of this.withQueue) {
      const recent = decayed(t, now);
      const share = t.weight / activeWeight;
      const overRecent = recent > share * (1 + SHARE_TOLERANCE) * totalRecent * (1 + ROUNDING_SLACK);
      if (overDemand(t.name) || t.queuedTokens > share * boundTokens * (1 + ROUNDING_SLACK) || overRecent) {
        heavies.push(t);
        heavyRecent += recent;
      }
    }
    if (heavies.length === 0) return ADMIT_ALL;
    const lightRecent = Math.max(0, totalRecent - heavyRecent);
    // Nodes are held only while someone is light: tenants that all build queues share every node.
    const reserved = heavies.length < activeCount ? this.reserve(nodes, heavies, lightRecent, regionRate) : undefined;
    // A light tenant goes to the held nodes while one of them is within the short wait: the load
    // model's view of a flood node's queue is an estimate, and a wrong one puts a short request
    // behind a long prefill (measured: one request in 40 at 174 ms against 20 ms alone).
    if (!heavies.includes(self)) {
      const prefer = reserved && nodes.some((n) => reserved.has(n.id) && n.waitSeconds <= waitBoundSeconds);
      return prefer ? { ok: true, reserved: undefined, preferred: reserved } : ADMIT_ALL;
    }

    let minWait = Infinity;
    for (const n of nodes) if (!reserved?.has(n.id) || n.holdsPrompt) minWait = Math.min(minWait, n.waitSeconds);
    const share = self.weight / activeWeight;
    const used = totalRecent > 0 ? decayed(self, now) / totalRecent : 0;
    if (minWait <= waitBoundSeconds || used <= share * (1 + SHARE_TOLERANCE) * (1 + ROUNDING_SLACK)) return { ok: true, reserved };
    const drainSeconds = self.queuedTokens / Math.max(1, share * regionRate);
    return {
      ok: false,
      retryAfterSeconds: Math.min(60, Math.max(1, Math.ceil(drainSeconds))),
      shareOfQueue: used,
      queuedTokens: self.queuedTokens,
      reserved: reserved?.size ?? 0,
    };
  }

  /**
   * The nodes kept for the light tenants, as many as their recent demand needs (at least one,
   * never all): those holding the least heavy tenants' queued prefill (none, once it has drained),
   * then those held last time (a reserve that hops to whichever node drained last lets the flood
   * onto the one a light request is about to pick), then the least loaded. Kept even while they
   * still hold some: a flood spread over every node before it was seen as heavy would otherwise
   * never leave one clear.
   */
  private reserve(
    nodes: readonly ShareNode[],
    heavies: readonly TenantLoad[],
    lightRecent: number,
    regionRate: number,
  ): ReadonlySet<string> | undefined {
    if (nodes.length < 2) return undefined;
    // A steady rate r decays into a sum of r * half-life / ln 2: the light tenants' demand in tokens/s, then in nodes.
    const lightRate = (lightRecent * Math.LN2) / (RECENT_HALF_LIFE_MS / 1000);
    const want = Math.min(nodes.length - 1, Math.max(1, Math.ceil((lightRate * nodes.length) / Math.max(1, regionRate))));
    const heavyOn = (id: string) => heavies.reduce((s, t) => s + (t.byNode.get(id) ?? 0), 0);
    const ranked = nodes.map((n) => ({ id: n.id, heavy: heavyOn(n.id), kept: this.held.has(n.id) ? 0 : 1, wait: n.waitSeconds }));
    ranked.sort((a, b) => a.heavy - b.heavy || a.kept - b.kept || a.wait - b.wait);
    this.held = new Set(ranked.slice(0, want).map((n) => n.id));
    return this.held;
  }

  /** The active tenants as {@link admit} weighs them at `now`: how many, and their weights and recent prefill summed. */
  activeTenants(now: number): { count: number; weight: number; recentPrefill: number } {
    now = this.tick(now);
    this.recentSum.advance(now);
    this.expire(now);
    return { count: this.recentSum.size, weight: this.activeWeight.value, recentPrefill: this.recentSum.read(now) };
  }

  /** A request of `tenant` was dispatched to `nodeId` with `tokens` to prefill. */
  queued(tenant: string, nodeId: string, tokens: number, now: number): void {
    const t = this.tenants.get(tenant);
    if (!t) return;
    now = this.tick(now);
    this.recentSum.advance(now);
    const recent = decayed(t, now) + tokens;
    if (t.active) this.recentSum.update(t.recent, t.recentAt, recent, now);
    t.recent = recent;
    t.recentAt = now;
    t.queuedTokens += tokens;
    if (tokens > 0) t.byNode.set(nodeId, (t.byNode.get(nodeId) ?? 0) + tokens);
    if (t.queuedTokens > 0) {
      this.withQueue.add(t);
      this.setActive(t, true);
    }
  }

  /** Its prefill is over (first byte) or it ended before: the tokens leave the queue. */
  drained(tenant: string, nodeId: string, tokens: number): void {
    const t = this.tenants.get(tenant);
    if (!t) return;
    t.queuedTokens = Math.max(0, t.queuedTokens - tokens);
    const left = (t.byNode.get(nodeId) ?? 0) - tokens;
    if (left > 0) t.byNode.set(nodeId, left);
    else t.byNode.delete(nodeId);
    if (t.queuedTokens > 0) return;
    this.withQueue.delete(t);
    if (!t.inWindow) this.setActive(t, false);
  }

  private touch(tenant: string, weight: number, now: number): TenantLoad {
    let t = this.tenants.get(tenant);
    if (!t) {
      if (this.tenants.size >= MAX_TRACKED_TENANTS) this.forgetIdle();
      t = {
        name: tenant,
        queuedTokens: 0,
        byNode: new Map(),
        weight,
        lastSeen: now,
        recent: 0,
        recentAt: now,
        inWindow: false,
        active: false,
      };
      this.tenants.set(tenant, t);
    }
    if (t.active && weight !== t.weight) this.activeWeight.update(t.weight, weight);
    t.weight = weight;
    t.lastSeen = now;
    // Last seen now: to the window's young end.
    this.seen.delete(tenant);
    this.seen.set(tenant, t);
    t.inWindow = true;
    this.setActive(t, true);
    return t;
  }

  /** The tenants last seen more than ACTIVE_WINDOW_MS before `now` leave the window; without prefill queued they are no longer active. */
  private expire(now: number): void {
    for (const [name, t] of this.seen) {
      if (now - t.lastSeen <= ACTIVE_WINDOW_MS) break;
      this.seen.delete(name);
      t.inWindow = false;
      if (t.queuedTokens <= 0) this.setActive(t, false);
    }
  }

  private setActive(t: TenantLoad, active: boolean): void {
    if (t.active === active) return;
    t.active = active;
    if (active) {
      this.idle.delete(t);
      this.activeWeight.add(t.weight);
      this.recentSum.add(t.recent, t.recentAt);
      return;
    }
    this.idle.add(t);
    this.recentSum.remove(t.recent, t.recentAt);
    this.activeWeight.remove(t.weight);
  }

  private tick(now: number): number {
    this.clock = Math.max(this.clock, now);
    return this.clock;
  }

  private forgetIdle(): void {
    for (const t of this.idle) this.tenants.delete(t.name);
    this.idle.clear();
  }
}
