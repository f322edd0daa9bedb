/**
 * Which tenants are flooding (docs/ADMISSION.md). A tenant is, while it sends more than
 * SHARE_TOLERANCE over its weighted share of the recent uncached prefill either of every tenant
 * active in the region, or of those asking for its class or a higher one (two at least in each
 * case). A flooding tenant loses the class it asked for, as far as its flood reaches:
 * - over its share of its peers' demand only, it takes from the tenants of its class and above:
 *   queued as batch, it keeps no precedence over the lower classes beyond its fair part;
 * - over its share of everyone's demand, it takes from every tenant: queued below batch (the
 *   excess rank, admission-queue.ts EXCESS_RANK), after every tenant within its share. A tenant
 *   that asked for batch keeps batch: it claimed no precedence, and among the batch tenants the
 *   queue's weights and the fair share's bound already hold it to its share.
 * - Classes are ordered before tenants in the region's queue, so without this an interactive
 *   tenant's flood took every node from the standard and batch tenants (bench:goodput's mix, when
 *   this landed, at 1x with one interactive tenant at five times its rate: the others kept about 30% of their
 *   goodput). One class lower was not enough: the flood still outranked the batch tenant (41%).
 *   Queued as batch, it competed with the batch tenant by weight and took its share (the batch
 *   tenant kept 88% of its goodput); below batch the flood absorbs its own shedding.
 * - Below batch only when over everyone's share: the peers' test also catches a standard RAG tenant
 *   whose documents a batch flood evicted (its uncached demand, long documents beside chat turns,
 *   looks like a flood of its class), and below a batch flood it was starved (0.5% of its goodput).
 * - Its peers' demand as well as everyone's: a class goes ahead of the classes below for its fair
 *   part of what that class and those above send. Judged against every tenant only, a standard
 *   tenant's flood looked small beside the batch tenant's long documents and kept its class (the
 *   batch tenant kept 74% of its goodput; with the peers' test, 79%, when it landed). Judged against its peers
 *   only, a lone interactive tenant could never flood.
 * - Demand, not the capacity's max-min share: past 2x load every tenant asks more than its share of
 *   the capacity, and demoting them all demoted the interactive tenants with them (interactive
 *   goodput at 3x fell from 81% to 65%).
 * - Over everyone's share, it is also heavy for the fair share (fair-share.ts: no node is held for
 *   it, and it keeps off those held for the others, while it has prefill on the nodes), though its requests may be too short and too
 *   cached to build a queue: a RAG tenant at five times its rate, 91% of its prompts cached, was
 *   counted light there, had nodes held for its demand, and took them ahead of the batch tenant
 *   (which kept 72.1% of its goodput against 83.5%; 77.1% with this, when it landed).
 * - Past its usual rate as well (tenant-growth.ts): a tenant without a commitment that keeps, over
 *   the last minute, more than 1.5x what it usually sends, out of step with the others, has the
 *   rest rank with a commitment's excess (`growth`), whatever its share: shares cannot tell a
 *   tenant that grew from one that was always large, its history can. While its last minute is
 *   past that, a request its share demotes ranks with the excess as well, not with the batch class: on
 *   a held-out draw of bench:goodput's mix at 1x (seeds +3), a RAG tenant at five times its rate,
 *   held in its class to its usual rate, had 1,438 requests over its peers' share dispatched
 *   level with the batch tenant's in ten minutes (2.1M tokens of uncached prefill, against the
 *   batch tenant's 5.4M).
 * - Beyond a peer floor ({@link TenantDemand.judge}): a flooding tenant is never given less, per
 *   weight, than a tenant of its class within its share asks; without it a tenant that is large,
 *   not growing, lost every request to the excess rank and starved past 2x load.
 * Same tolerance as the fair share's bound (fair-share.ts): two tenants sending alike hold 40% or
 * 60% by the luck of arrival, and must not demote each other.
 *
 * A tenant with a commitment (its `committed_prompt_tokens_per_minute`: what the operator sold it)
 * is judged by it instead, request by request ({@link TenantDemand.arrived}), against the prompt
 * tokens of its that kept their class over the last minute: within the commitment, a request keeps
 * its class whatever the others send; up to 1.5x it (the same tolerance), only while the tenant is
 * within its share of the demand (bursts pass, a flood does not); past that it is `commitment`, and
 * ranks after every tenant's traffic within its commitment or share, in class order
 * (admission-queue.ts). Only the part past the commitment: a tenant at five times its rate keeps its
 * committed part in its class. Shares of the demand cannot tell who changed: on the mix at 1x, a
 * standard RAG tenant at five times its rate asks 23.5% of the uncached prefill, within its fifth
 * x 1.5, while the batch tenant asks 45%, so by shares the batch tenant is the one over (it kept
 * 82.1% of its goodput); with every tenant committed its own rate, 93.8% at worst under any
 * tenant's flood (bench/GOODPUT.md, warmpath-committed). A commitment says what each was sold, so
 * the tenant past its own is the one that pays. (Judged by everything it sent, not what it kept,
 * a tenant at 1.5x its commitment flipped between classes and lost all of them: interactive
 * goodput at 1.5x load 70% against 92%.)
 */
import { MAX_TRACKED_TENANTS, SHARE_TOLERANCE } from "./fair-share.ts";
import { DEMAND_TAU_MS } from "./class-reserve.ts";
import { RECENT_TAU_MS, TenantGrowth, type Growth } from "./tenant-growth.ts";
import { decay as decayWith } from "../stats.ts";
import { demotedRank } from "./admission-queue.ts";
import { ActiveDemand, demandAt, type Totals, type Tracked } from "./active-demand.ts";
import { ROUNDING_SLACK } from "./decaying-sum.ts";

/**
 * Whose demand a tenant is over its share of: every active tenant's, only its peers' (its class and
 * above), its own commitment, its own usual rate (`growth`: tenant-growth.ts), or none.
 */
export type Flooding = "everyone" | "peers" | "commitment" | "growth" | undefined;

/**
 * A commitment is judged over the last minute (decayed with this time constant, so a steady rate
 * of r tokens a minute sums to r): the period it is stated in, over which a chat tenant's bursts
 * average out.
 */
export const COMMITMENT_TAU_MS = RECENT_TAU_MS;

/** What a request sent, for {@link TenantDemand.arrived}: its prompt tokens, and its tenant's commitment if it has one. */
export interface Sent {
  /** This request's prompt tokens (estimated, as the rate limits count them). */
  promptTokens: number;
  /** Its tenant's committed prompt tokens a minute in this region, if it has a commitment. */
  perMinute?: number | undefined;
}

/** A tenant's demand (active-demand.ts: its uncached prefill decayed with DEMAND_TAU_MS to `at`, weight, class rank), and what the rules keep of it. */
interface Demand extends Tracked {
  /** Its last request's uncached prefill (tokens): what {@link TenantDemand.judge} weighs against its floor. */
  last: number;
  /**
   * What it was given, for the peer floor ({@link TenantDemand.judge}), decayed as the demand is
   * (DEMAND_TAU_MS) to `givenAt`: the uncached prefill of its requests judged to keep their class,
   * and of its demoted ones that were dispatched all the same.
   */
  given: number;
  givenAt: number;
  /** With a commitment: see {@link Commitment}. */
  committed?: Commitment | undefined;
  /** Without one: its last request's verdict against its usual rate (tenant-growth.ts). */
  growth: Growth;
}

/**
 * A tenant's commitment and the prompt tokens of its requests that kept their class over the last
 * minute (`kept`, decayed with COMMITMENT_TAU_MS to `at`).
 */
interface Commitment {
  perMinute: number;
  kept: number;
  at: number;
  /** Its last request's verdict ({@link TenantDemand.arrived}): it kept its class (undefined), or `commitment`. */
  verdict: Flooding;
}

export class TenantDemand {
  private readonly tenants = new Map<string, Demand>();
  private readonly growth = new TenantGrowth();
  /** The active tenants' demand by class, summed and ordered as it changes. */
  private readonly active = new ActiveDemand<Demand>();

  /**
   * A request of `tenant` (of `weight`) arrived, asking for class `rank` (its last request's
   * counts), costing `tokens` of uncached prefill; `sent`: its prompt tokens and commitment (without
   * it, the tenant is judged by shares alone).
   */
  arrived(tenant: string, weight: number, tokens: number, now: number, rank: number, sent?: Sent): void {
    now = this.active.advance(now);
    let d = this.tenants.get(tenant);
    if (!d) {
      if (this.tenants.size >= MAX_TRACKED_TENANTS) this.forgetIdle();
      if (this.tenants.size >= MAX_TRACKED_TENANTS) return;
      d = { name: tenant, tokens: 0, at: now, weight, rank, last: 0, given: 0, givenAt: now, growth: undefined, active: false, key: 0 };
      this.tenants.set(tenant, d);
    }
    this.active.leave(d);
    d.tokens = demandAt(d, now) + tokens;
    d.last = tokens;
    d.at = now;
    d.weight = weight;
    d.rank = rank;
    // Counted in its class's sums before its commitment is judged: its share is of a demand that includes its own.
    this.active.join(d);
    const committed = sent?.perMinute === undefined ? undefined : { perMinute: sent.perMinute, promptTokens: sent.promptTokens };
    d.growth = sent ? this.growth.arrived(tenant, sent.promptTokens, now, committed === undefined) : undefined;
    if (committed) {
      const c = d.committed;
      const kept = c ? decay(c.kept, c.at, now, COMMITMENT_TAU_MS) : 0;
      const after = kept + committed.promptTokens;
      // Within its commitment it keeps its class; up to 1.5x it, only while within its share of
      // the demand (as a tenant without one is judged); past that, only what it sends beyond
      // loses its class: a tenant at five times its commitment keeps its committed part.
      const verdict: Flooding =
        after <= committed.perMinute
          ? undefined
          : after <= (1 + SHARE_TOLERANCE) * committed.perMinute && this.shareVerdict(d, now) === undefined
            ? undefined
            : "commitment";
      d.committed = {
        perMinute: committed.perMinute,
        kept: verdict === undefined ? after : kept,
        at: now,
        verdict,
      };
    } else d.committed = undefined;
    this.active.list(d, !d.committed ? "shares" : d.committed.verdict === undefined ? "within-commitment" : undefined);
  }

  /**
   * Whether a tenant is over its share of `everyone`'s demand at `now` as {@link overShare} finds
   * it (or past its commitment, or growing: tenant-growth.ts), for the fair share's reserve
   * (fair-share.ts): the demand summed once, then O(1) a tenant.
   */
  floodsEveryone(now: number): (tenant: string) => boolean {
    now = this.active.advance(now);
    const { total, weights, active } = this.active.totals(now);
    if (active < 2 || total <= 0) return () => false;
    return (tenant) => {
      const d = this.tenants.get(tenant);
      if (!d) return false;
      return d.committed
        ? d.committed.verdict !== undefined
        : d.growth === "growing" || overWeightedShare(demandAt(d, now), d.weight, weights, total);
    };
  }

  /**
   * With a commitment, whether its last request was past it (`commitment`: {@link arrived});
   * without one, whether `tenant` sent more than SHARE_TOLERANCE over its weighted share of the
   * recent prefill of every active tenant (`everyone`), or else of those of its class and above
   * (`peers`).
   */
  overShare(tenant: string, now: number): Flooding {
    now = this.active.advance(now);
    const own = this.tenants.get(tenant);
    if (!own) return undefined;
    // With a commitment, its last request was judged at its arrival.
    if (own.committed) return own.committed.verdict;
    return this.shareVerdict(own, now);
  }

  /**
   * The verdict on the request of `tenant` that just {@link arrived}: {@link overShare}'s, except
   * that a tenant over its share keeps its class while it has been given less than the largest
   * recent demand (per weight) of a tenant that asked for the same class and is within its share:
   * the peer floor. Given: its requests that kept their class, and its demoted ones dispatched
   * all the same ({@link dispatchedDemoted}). A share of the demand cannot tell a tenant that is
   * large from one that grew, and demoting the whole of a large tenant starved it: on draws of
   * bench:goodput's mix other than the committed one (`npm run bench:goodput-heldout`), a RAG
   * tenant sending 1.5x its sibling's sessions asked just over 1.5 x a fifth of the region's
   * uncached prefill, ranked below batch with every request, and answered 0.2-0.7% of its
   * requests in time at 2.5x-3x load (at 2x, 1.5% and 53.9% on two draws) while its sibling, of
   * the same class and weight, answered 40-90%. With the floor it is never given less, per
   * weight, than a peer of its class within its share. What it was given below its class
   * counts: a flood at 1x load, whose demoted requests the spare capacity serves, keeps no more
   * of its class than before (judged on what it kept alone, a RAG tenant at five times its rate
   * kept its sibling's demand in its class, and the batch tenant kept 75.7% of its goodput
   * against 92.4%). Without such a peer, as before.
   */
  judge(tenant: string, now: number): Flooding {
    now = this.active.advance(now);
    const verdict = this.overShare(tenant, now);
    const own = this.tenants.get(tenant);
    if (!own || verdict === "commitment") return verdict;
    const given = decay(own.given, own.givenAt, now);
    const floored = verdict !== undefined && given + own.last > own.weight * this.largestPeerWithinShare(own, now) ? verdict : undefined;
    // Past its usual rate as well (tenant-growth.ts): whichever ranks it lower. Over its allowance
    // and demoted by its share, the share's verdict is the flood's, and ranks with its excess (a
    // batch tenant's share keeps it batch: that is its class, and its usual keeps it).
    const growing =
      own.growth === "growing" || (own.growth === "over" && floored !== undefined && demotedRank(own.rank, floored) !== own.rank);
    const judged = growing && demotedRank(own.rank, "growth") > demotedRank(own.rank, floored) ? "growth" : floored;
    own.given = judged === undefined ? given + own.last : given;
    own.givenAt = now;
    return judged;
  }

  /** A demoted request of `tenant` was dispatched, with `tokens` of uncached prefill: given to it below its class ({@link judge}). */
  dispatchedDemoted(tenant: string, tokens: number, now: number): void {
    now = this.active.advance(now);
    const d = this.tenants.get(tenant);
    if (!d) return;
    d.given = decay(d.given, d.givenAt, now) + tokens;
    d.givenAt = now;
  }

  /** The largest recent demand per weight of an active tenant other than `own` asking for its class and within its share (0: none). */
  private largestPeerWithinShare(own: Demand, now: number): number {
    const everyone = this.active.totals(now);
    const peers = this.active.totals(now, own.rank);
    // Within its share by shares: at most the least of the shares' limits, per weight.
    let limit = Infinity;
    if (everyone.active >= 2 && everyone.total > 0) {
      limit = ((1 + SHARE_TOLERANCE) * everyone.total) / everyone.weights;
      if (peers.active >= 2) limit = Math.min(limit, ((1 + SHARE_TOLERANCE) * peers.total) / peers.weights);
    }
    const within = (d: Demand, demand: number) => verdictByShares(demand, d.weight, everyone, () => peers) === undefined;
    return this.active.largestWithin(own, own.rank, now, limit, within);
  }

  /** Whether `own` is over its weighted share of every active tenant's recent demand, or else of its peers'. */
  private shareVerdict(own: Demand, now: number): Flooding {
    return verdictByShares(demandAt(own, now), own.weight, this.active.totals(now), () => this.active.totals(now, own.rank));
  }

  private forgetIdle(): void {
    for (const [k, d] of this.tenants) if (!d.active) this.tenants.delete(k);
  }
}

/** Whether `demand` is more than SHARE_TOLERANCE over the share `weight / weights` of `total`. */
function overWeightedShare(demand: number, weight: number, weights: number, total: number): boolean {
  return demand > (1 + SHARE_TOLERANCE) * (weight / weights) * total * (1 + ROUNDING_SLACK);
}

/** `value` as of `at`, decayed to `now` with time constant `tau` [the demand's, DEMAND_TAU_MS]. */
function decay(value: number, at: number, now: number, tau = DEMAND_TAU_MS): number {
  return decayWith(value, at, now, tau);
}

/**
 * Whether a tenant asking `mine` of weight `weight` is over its weighted share of every active
 * tenant's demand (`everyone`), or else of its peers' (`peers`, asked only then): for its own
 * verdict and for the peer floor's test of the others.
 */
function verdictByShares(mine: number, weight: number, everyone: Totals, peers: () => Totals): Flooding {
  if (everyone.active < 2 || everyone.total <= 0) return undefined;
  if (overWeightedShare(mine, weight, everyone.weights, everyone.total)) return "everyone";
  const p = peers();
  return p.active >= 2 && overWeightedShare(mine, weight, p.weights, p.total) ? "peers" : undefined;
}
