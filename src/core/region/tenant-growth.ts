/**
 * Which tenants are growing faster than the region (docs/ADMISSION.md, "A flood is a change"): the
 * history half of the flood rule, beside the shares of tenant-demand.ts.
 *
 * Shares of the demand cannot tell a tenant that grew from one that was always large: a standard
 * RAG tenant at five times its rate asks 23.5% of the region's uncached prefill on bench:goodput's
 * mix at 1x, within its fifth x 1.5, so by shares it keeps its class and the batch tenant pays
 * (82.1% of its goodput kept, bench/GOODPUT.md). Its own history can: it sends five times what it usually sends
 * while the others send what they usually do. So a tenant without a commitment that sends, over
 * the last minute, more than SHARE_TOLERANCE over its usual rate, scaled by how much the rest of
 * the region grew, is past its allowance: what it sends past that (past its usual rate, while it
 * is: below) ranks after every tenant's usual traffic
 * (admission-queue.ts, with the excess of a tenant past its commitment). As a commitment would,
 * from what the tenant did rather than what it was sold:
 * - Usual: the prompt tokens a minute of its requests within its allowance (not all it sent,
 *   or a flood would be its own usual within minutes), over USUAL_TAU_MS. Prompt tokens, not
 *   uncached prefill: what the tenant sends, not what the cache's state makes it cost (a RAG
 *   tenant whose documents another's flood evicted did not grow).
 * - Scaled by the others' growth (their last minute against their usual), never below 1: when
 *   every tenant grows together (a region failing over into this one, a busy hour) no one is
 *   singled out and the classes decide; only a tenant out of step with the region is.
 * - So a tenant may grow by 1.5x (the same tolerance as the shares: bursts pass) every few
 *   minutes unnoticed, and faster growth only loses precedence: its requests still go to any node
 *   no one else needs, so below saturation nothing changes (they are dispatched at once).
 * - The tolerance is for bursts, not for a flood's foothold: while a tenant's last minute is past
 *   its allowance (`over`), it keeps its class for its usual rate at most (scaled by the region's
 *   growth), and what it sends within its usual while over its share of the demand and past the
 *   peer floor ranks with the excess too, but for a batch tenant's (tenant-demand.ts judge; such a
 *   request still counts against its usual here). At exactly the fleet's capacity every token another
 *   tenant keeps in class comes out of the batch tenant's: kept at 1.5x its usual (and its usual
 *   raised by what it kept in the first seconds of its flood), a RAG tenant at five times its
 *   rate kept 2.3x what it sent before in its class, and left the batch tenant 70.5% and 77.4% of
 *   its goodput on two held-out draws of bench:goodput's mix (`npm run bench:goodput-heldout`, before
 *   this rule).
 * - Not before GROWTH_MIN_HISTORY_MS of history: a tenant new to the region has no usual (the
 *   shares judge it alone). A tenant whose first minutes are a flood is judged by shares; that
 *   one a commitment catches (tenant-demand.ts).
 * - A tenant idle for IDLE_RESET_MS starts anew, as a newcomer: its usual has decayed to a third
 *   of itself and its last minute to nothing, and a usual that low could not be relearned, since
 *   a usual learns only what is within its allowance (1.5x itself). Kept, a region quiet for two
 *   hours judged the first of two alike tenants back `growing` on every request for four hours
 *   and more, and the second never (a review's scenario, now test/core/tenant-growth.test.ts).
 *   The price: a tenant that pauses ten minutes and comes back flooding is judged by shares alone
 *   for its first two minutes, and its usual is what it sends then.
 */
import { MAX_TRACKED_TENANTS, SHARE_TOLERANCE } from "./fair-share.ts";
import { decay } from "../stats.ts";
import { MemberSum } from "./compensated-sum.ts";
import { DecayingSum } from "./decaying-sum.ts";

/**
 * The usual rate's time constant: ten minutes, long against the last minute it is compared with
 * (so a flood is measured against what came before it).
 */
export const USUAL_TAU_MS = 600_000;
/** The window a tenant's recent rate is judged over: a minute; a commitment is judged over the same (tenant-demand.ts COMMITMENT_TAU_MS). */
export const RECENT_TAU_MS = 60_000;
/** A tenant is judged against its usual only after two minutes of history. */
export const GROWTH_MIN_HISTORY_MS = 120_000;
/** A tenant idle this long (ten of its recent windows, one usual time constant) starts anew: its history says little of it now. */
export const IDLE_RESET_MS = 10 * RECENT_TAU_MS;
/**
 * While a tenant's last minute is past its allowance, that time counts this much in its usual
 * (what it keeps then, and the time it keeps it in): a growth that lasts becomes its usual over
 * hours (an hour of it weighs six minutes), while a flood is measured against the rate before it.
 * Learned at full weight, a tenant kept at 1.5x its usual had its usual follow its flood: on
 * bench:goodput's mix (a RAG tenant at five times its rate from 600 s) it doubled within the
 * flood, and 35% of the flood was judged growing. Judged over the minute, not a shorter window:
 * the minute fills for some seconds after a flood starts, and what it kept meanwhile raises its
 * usual (by about a quarter for that RAG tenant), but a chat tenant's bursts over ten seconds
 * passed 1.5x its usual so often that its usual lagged its own ramp and its requests were judged
 * growing at 1x load (the mix at 1x, when it was tried: 92.8% of all requests in time against 98.9%).
 */
export const LEARN_WHILE_GROWING = 0.1;

interface History {
  firstAt: number;
  at: number;
  /** Prompt tokens of its requests within its allowance, weighted by how much their time counts ({@link LEARN_WHILE_GROWING}), decayed with USUAL_TAU_MS. */
  usualTokens: number;
  /** The time they were sent in (ms), weighted and decayed alike: the usual rate is their ratio. */
  usualMs: number;
  /** The weight the time since `at` counts with (1, or LEARN_WHILE_GROWING while past its allowance). */
  learning: number;
  /** Prompt tokens of its requests within its allowance, decayed with RECENT_TAU_MS (a steady rate r a minute sums to r): what its usual learns. */
  recentAllowed: number;
  /** Prompt tokens of its requests not judged `growing` here, decayed alike: what it kept in its class, at most. */
  recentKept: number;
  /** Prompt tokens of all its requests, decayed with RECENT_TAU_MS. */
  recentSent: number;
  /** It has GROWTH_MIN_HISTORY_MS of history: counted in the others' allowances, with `usual` as its usual rate. */
  counted: boolean;
  usual: number;
}

/**
 * A request's verdict ({@link TenantGrowth.arrived}): `growing`, past what its tenant may keep in
 * its class (it ranks with the excess); `over`, kept, but its tenant's last minute is past its
 * allowance (over its share as well, it ranks with the excess: tenant-demand.ts); undefined,
 * neither.
 */
export type Growth = "growing" | "over" | undefined;

export class TenantGrowth {
  private readonly tenants = new Map<string, History>();
  /** The tenants with less than GROWTH_MIN_HISTORY_MS of history, oldest first: they are counted in that order. */
  private readonly young = new Map<string, History>();
  /**
   * The counted tenants' recent prompt tokens and usual rates, summed as they change (the sum
   * over every tenant at every request cost ~0.37 µs a tenant with the other rules: decaying-sum.ts);
   * the usual rates' `size` is how many are above 0 (none: their sum is 0 exactly).
   */
  private readonly sent = new DecayingSum(RECENT_TAU_MS, (visit) => {
    for (const h of this.tenants.values()) if (h.counted) visit(h.recentSent, h.at);
  });
  private readonly usualSum = new MemberSum();
  /** The latest time seen: a clock that steps back is taken as standing still (tenants are counted in the order they came). */
  private clock = -Infinity;

  /**
   * A request of `tenant` with `promptTokens` arrived at `now`: whether it is past what the tenant
   * may keep in its class ({@link Growth}). `judged` false: the tenant is judged otherwise (a
   * commitment), and only its history is kept, for the others' scale.
   */
  arrived(tenant: string, promptTokens: number, now: number, judged = true): Growth {
    now = this.clock = Math.max(this.clock, now);
    this.sent.advance(now);
    for (const [k, y] of this.young) {
      if (now - y.firstAt < GROWTH_MIN_HISTORY_MS) break;
      this.young.delete(k);
      this.count(y);
    }
    let h = this.tenants.get(tenant);
    if (h && now - h.at > IDLE_RESET_MS) {
      this.forget(tenant, h);
      h = undefined;
    }
    if (!h) {
      if (this.tenants.size >= MAX_TRACKED_TENANTS) this.forgetIdle(now);
      if (this.tenants.size >= MAX_TRACKED_TENANTS) return undefined;
      h = {
        firstAt: now,
        at: now,
        usualTokens: 0,
        usualMs: 0,
        learning: 1,
        recentAllowed: 0,
        recentKept: 0,
        recentSent: 0,
        counted: false,
        usual: 0,
      };
      this.tenants.set(tenant, h);
      this.young.set(tenant, h);
    }
    // Out of the sums while it changes: its allowance is the others' growth.
    const counted = h.counted;
    if (counted) this.uncount(h);
    decayTo(h, now);
    h.recentSent += promptTokens;
    const allowed = this.allowed(h, now);
    const judging = judged && now - h.firstAt >= GROWTH_MIN_HISTORY_MS;
    const over = judging && h.recentSent > allowed;
    const within = !judging || h.recentAllowed + promptTokens <= allowed;
    // Over its allowance, it keeps its class for its usual rate alone (the tolerance is for bursts).
    const growing = over ? h.recentKept + promptTokens > allowed / (1 + SHARE_TOLERANCE) : !within;
    h.learning = over ? LEARN_WHILE_GROWING : 1;
    // Its usual learns what was within its allowance, kept or not: a growth that lasts becomes its
    // usual over hours (learned from what it kept over, its usual would learn itself and never move).
    if (within) {
      h.usualTokens += h.learning * promptTokens;
      h.recentAllowed += promptTokens;
    }
    if (!growing) h.recentKept += promptTokens;
    if (counted) this.count(h);
    return growing ? "growing" : over ? "over" : undefined;
  }

  /**
   * What `h` (out of the sums) may send in a minute: 1.5x its usual rate, times the rest of the
   * region's growth (at least 1). Without another tenant with history, anything: there is no one
   * its growth could take from, only its own requests to reorder.
   */
  private allowed(h: History, now: number): number {
    if (this.usualSum.size === 0) return Infinity;
    const others = this.sent.read(now) / this.usualSum.value;
    return (1 + SHARE_TOLERANCE) * Math.max(1, others) * usualRate(h);
  }

  private count(h: History): void {
    h.counted = true;
    h.usual = usualRate(h);
    this.usualSum.add(h.usual);
    this.sent.add(h.recentSent, h.at);
  }

  private uncount(h: History): void {
    h.counted = false;
    this.sent.remove(h.recentSent, h.at);
    this.usualSum.remove(h.usual);
  }

  /** Forgets the tenants idle for IDLE_RESET_MS (they would start anew), to make room. */
  private forgetIdle(now: number): void {
    for (const [k, h] of this.tenants) if (now - h.at > IDLE_RESET_MS) this.forget(k, h);
  }

  private forget(tenant: string, h: History): void {
    this.tenants.delete(tenant);
    this.young.delete(tenant);
    if (h.counted) this.uncount(h);
  }
}
/** A tenant's usual prompt tokens a minute (as of its last arrival: decaying both terms alike leaves it unchanged). */
function usualRate(h: History): number {
  return h.usualMs > 0 ? (h.usualTokens / h.usualMs) * RECENT_TAU_MS : 0;
}

function decayTo(h: History, now: number): void {
  const dt = Math.max(0, now - h.at);
  const kept = Math.exp(-dt / USUAL_TAU_MS);
  h.usualTokens *= kept;
  // The time since its last arrival, decayed as the tokens are: a steady rate keeps its ratio.
  h.usualMs = h.usualMs * kept + h.learning * USUAL_TAU_MS * -Math.expm1(-dt / USUAL_TAU_MS);
  h.recentAllowed = decay(h.recentAllowed, h.at, now, RECENT_TAU_MS);
  h.recentKept = decay(h.recentKept, h.at, now, RECENT_TAU_MS);
  h.recentSent = decay(h.recentSent, h.at, now, RECENT_TAU_MS);
  h.at = now;
}
