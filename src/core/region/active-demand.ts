/**
 * The active tenants' recent demand, kept as it changes, for the rules of tenant-demand.ts: by
 * the class rank each asked for, their demand and weights summed (decaying-sum.ts) and their
 * demand per weight in order, so that a tenant's share and the peer floor cost the same whether
 * ten tenants are active or a thousand. Summed afresh at every request, the region's tenant rules
 * cost ~0.37 µs per active tenant (decaying-sum.ts).
 *
 * A tenant is active for DEMAND_TAU_MS after its last arrival; they leave in arrival order.
 */
import { DEMAND_TAU_MS } from "./class-reserve.ts";
import { MemberSum } from "./compensated-sum.ts";
import { DecayingSum } from "./decaying-sum.ts";
import { SortedByKey } from "./sorted-by-key.ts";
import { decay } from "../stats.ts";

/** What this keeps of a tenant: its demand (uncached prefill, decayed with DEMAND_TAU_MS to `at`), weight and class rank. */
export interface Tracked {
  name: string;
  tokens: number;
  at: number;
  weight: number;
  rank: number;
  /** Counted here: arrived within DEMAND_TAU_MS as of the last {@link ActiveDemand.advance}. */
  active: boolean;
  /**
   * Its demand per weight as a time-free order, while it is listed: `ln(tokens / weight) + (at -
   * origin) / tau`. Every demand decays alike, so this orders the tenants by demand per weight at
   * any instant.
   */
  key: number;
}

/** The recent demand and weight of a set of active tenants, summed, and how many they are. */
export interface Totals {
  total: number;
  weights: number;
  active: number;
}

/** Which ordered list a tenant is in: judged by its share of the demand, within its commitment, or neither (past it). */
export type Listing = "shares" | "within-commitment" | undefined;

interface RankBook<T extends Tracked> {
  demand: DecayingSum;
  weights: MemberSum;
  shares: SortedByKey<T>;
  withinCommitment: SortedByKey<T>;
}

/** `d`'s demand decayed to `now`. */
export function demandAt(d: Tracked, now: number): number {
  return decay(d.tokens, d.at, now, DEMAND_TAU_MS);
}

export class ActiveDemand<T extends Tracked> {
  /** The active tenants, oldest arrival first. */
  private readonly recent = new Map<string, T>();
  private readonly books: (RankBook<T> | undefined)[] = [];
  /**
   * The time keys count from: the first arrival, so that they stay small: a key grows by 1 every
   * DEMAND_TAU_MS (3 million a year), precise to ~1e-9 of itself, which {@link largestWithin}'s
   * search allows for.
   */
  private origin: number | undefined;
  private clock = -Infinity;

  /**
   * Time has come to `now`: the tenants whose last arrival is more than DEMAND_TAU_MS old leave.
   * Call on entry. Returns the time to judge at: a clock that steps back is taken as standing
   * still (tenants leave in arrival order, and a demand never grows by decaying).
   */
  advance(now: number): number {
    now = this.clock = Math.max(this.clock, now);
    for (const d of this.recent.values()) {
      if (now - d.at <= DEMAND_TAU_MS) break;
      this.leave(d);
    }
    for (const book of this.books) book?.demand.advance(now);
    return now;
  }

  /** `d` stops counting (before its demand, weight or rank change). */
  leave(d: T): void {
    if (!d.active) return;
    d.active = false;
    this.recent.delete(d.name);
    const book = this.books[d.rank]!;
    book.demand.remove(d.tokens, d.at);
    book.weights.remove(d.weight);
    if (!book.shares.remove(d)) book.withinCommitment.remove(d);
  }

  /** `d` arrived (its `at` is now): it counts in its rank's sums; not listed until {@link list}. */
  join(d: T): void {
    if (d.active) this.leave(d);
    d.active = true;
    this.recent.set(d.name, d);
    const book = this.book(d.rank);
    book.demand.add(d.tokens, d.at);
    book.weights.add(d.weight);
  }

  /** Lists the joined `d` in its rank's order: `listing` says which list. */
  list(d: T, listing: Listing): void {
    if (!d.active || listing === undefined) return;
    this.origin ??= d.at;
    d.key = Math.log(d.tokens / d.weight) + (d.at - this.origin) / DEMAND_TAU_MS;
    const book = this.book(d.rank);
    (listing === "shares" ? book.shares : book.withinCommitment).insert(d);
  }

  /** The recent demand and weight of every active tenant asking for class `maxRank` or a higher one (every class by default), summed. */
  totals(now: number, maxRank = Infinity): Totals {
    let total = 0;
    let weights = 0;
    let active = 0;
    for (let r = 0; r < this.books.length && r <= maxRank; r++) {
      const book = this.books[r];
      if (!book || book.demand.size === 0) continue;
      total += book.demand.read(now);
      weights += book.weights.value;
      active += book.demand.size;
    }
    return { total, weights, active };
  }

  /**
   * The largest demand per weight at `now` of an active tenant of `rank` other than `own` that is
   * within: listed within its commitment, or listed by shares and `within` (a test that holds up to
   * some demand per weight, `limit`, and above it not). O(log tenants) and the few near the limit.
   */
  largestWithin(own: T, rank: number, now: number, limit: number, within: (d: T, demand: number) => boolean): number {
    const book = this.books[rank];
    if (!book) return 0;
    let most = 0;
    for (let i = book.withinCommitment.size - 1; i >= 0; i--) {
      const d = book.withinCommitment.at(i)!;
      if (d === own) continue;
      most = demandAt(d, now) / d.weight;
      break;
    }
    // From just above the limit's key (keys round: a tenant at the limit may sit a hair either
    // side), down to the first that is within by the exact test.
    let from = book.shares.size;
    if (limit < Infinity && this.origin !== undefined) {
      const key = Math.log(limit) + (now - this.origin) / DEMAND_TAU_MS;
      from = book.shares.upperBound(key + 1e-9 * (1 + Math.abs(key)));
    }
    for (let i = from - 1; i >= 0; i--) {
      const d = book.shares.at(i)!;
      if (d === own) continue;
      const demand = demandAt(d, now);
      if (!within(d, demand)) continue;
      return Math.max(most, demand / d.weight);
    }
    return most;
  }

  private book(rank: number): RankBook<T> {
    let book = this.books[rank];
    if (!book) {
      const members = (visit: (value: number, at: number) => void) => {
        for (const d of this.recent.values()) if (d.rank === rank) visit(d.tokens, d.at);
      };
      book = {
        demand: new DecayingSum(DEMAND_TAU_MS, members),
        weights: new MemberSum(),
        shares: new SortedByKey(),
        withinCommitment: new SortedByKey(),
      };
      this.books[rank] = book;
    }
    return book;
  }
}
