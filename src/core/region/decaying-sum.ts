/**
 * The sum of values that all decay exponentially with one time constant, kept as its members
 * change: O(1) to add, remove or read, where adding up the members' decayed values at every read
 * is O(members). The region's tenant rules (fair-share.ts, tenant-demand.ts, tenant-growth.ts)
 * weigh each tenant against the sum over every active tenant at every request; summed afresh,
 * that cost ~0.37 µs per active tenant per request: 386 µs a request with 1,000 active tenants
 * against 30 µs kept this way (bench/ROUTE_COST.md, by active tenants, when this landed), where a
 * Durable Object has 1-2 ms a request.
 *
 * All members decay by the same factor, so each is kept scaled to a common epoch, `value x
 * e^((at - epoch) / tau)`, and the sum is the scaled sum times `e^-((now - epoch) / tau)`. A
 * member leaves by subtracting exactly the scaled value it was added with (same formula, same
 * epoch), from a compensated sum (compensated-sum.ts): what is left is the remaining members' sum
 * to within a few units in its last place, however large the member that left. The epoch moves
 * forward (the members summed afresh from their own values) before the scale could overflow a
 * double: at {@link advance}, which the owner calls on entry, while its members and this sum agree.
 * Not bit for bit what summing the members' decayed values reads: a comparison against it must
 * not turn on the last bit (the rules compare with {@link ROUNDING_SLACK}).
 */
import { CompensatedSum } from "./compensated-sum.ts";

/**
 * A relative slack for comparing a value against a share of such a sum: a tenant exactly at its
 * limit (all the demand, two thirds of the weight: 1.5 x 2/3 = 1) is within it, as it is when its
 * own term is the whole sum, whichever way the sum's last bit rounds.
 */
export const ROUNDING_SLACK = 1e-12;

/** The epoch moves once `now` is this many time constants past it: e^40 ~ 2e17, far from a double's 1e308. */
const REBASE_TAUS = 40;

/** Visits every member with its value and the time (ms) that value is as of. */
export type EachMember = (visit: (value: number, at: number) => void) => void;

export class DecayingSum {
  private readonly scaled = new CompensatedSum();
  private epoch: number | undefined;
  private count = 0;
  /** The members' time constant (ms): a value v as of `at` counts `v x e^-((now - at) / tau)` at `now`. */
  readonly tauMs: number;
  /** Every current member, visited when the epoch moves. */
  private readonly members: EachMember;

  constructor(tauMs: number, members: EachMember) {
    this.tauMs = tauMs;
    this.members = members;
  }

  /** How many members it holds. */
  get size(): number {
    return this.count;
  }

  /** A member joins with `value` as of `at`. */
  add(value: number, at: number): void {
    this.scaled.add(this.scale(value, at));
    this.count++;
  }

  /** A member leaves: `value` and `at` exactly as it was {@link add}ed with. */
  remove(value: number, at: number): void {
    this.count--;
    if (this.count > 0) this.scaled.add(-this.scale(value, at));
    else {
      // With no one left the sum is 0, not the rounding its members' arrivals and departures left.
      this.count = 0;
      this.scaled.reset();
      this.epoch = undefined;
    }
  }

  /** A member's value changes from (`before`, `beforeAt`) to (`after`, `afterAt`). */
  update(before: number, beforeAt: number, after: number, afterAt: number): void {
    this.scaled.add(this.scale(after, afterAt));
    this.scaled.add(-this.scale(before, beforeAt));
  }

  /** The members' values decayed to `now` and summed (never below 0). */
  read(now: number): number {
    if (this.count === 0 || this.epoch === undefined) return 0;
    return Math.max(0, this.scaled.value * Math.exp(-(now - this.epoch) / this.tauMs));
  }

  /**
   * Time has come to `now`: the epoch moves to it once it is far enough past, the members summed
   * afresh. Call it while the members (as `members` visits them) and this sum agree: on entry,
   * before changing any at `now`.
   */
  advance(now: number): void {
    if (this.epoch === undefined || Math.abs(now - this.epoch) <= REBASE_TAUS * this.tauMs) return;
    const epoch = now;
    const sum = new CompensatedSum();
    this.members((value, at) => sum.add(value * Math.exp((at - epoch) / this.tauMs)));
    this.epoch = epoch;
    this.scaled.reset(sum.value);
  }

  private scale(value: number, at: number): number {
    this.epoch ??= at;
    return value * Math.exp((at - this.epoch) / this.tauMs);
  }
}
