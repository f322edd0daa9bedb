/**
 * A running sum that keeps the rounding its additions lose (Neumaier's compensated summation), so
 * that taking a large term out again leaves the small ones it was added beside, not the rounding
 * of the large one. The region's tenant rules keep sums over their active tenants as tenants come
 * and go (decaying-sum.ts); a plain running sum lost a quiet tenant's usual rate (~1e-13 tokens a
 * minute) beside a busy one's (~5e4), and when the busy one left it read 0, or below, where the
 * sum over the tenants reads 1e-13 (a review of the change, a region quiet overnight: every
 * request judged growing instead of half). The error stays within a few units in the last place
 * of the true sum plus the square of the unit roundoff (~1e-32) times every term that ever passed
 * through, whatever the order of additions and removals.
 */
export class CompensatedSum {
  private sum = 0;
  private carry = 0;

  /** The sum of every term added (a removal is the term's negative). */
  get value(): number {
    return this.sum + this.carry;
  }

  add(term: number): void {
    const t = this.sum + term;
    // The low-order bits the addition lost, from whichever of the two is smaller.
    this.carry += Math.abs(this.sum) >= Math.abs(term) ? this.sum - t + term : term - t + this.sum;
    this.sum = t;
  }

  /** Starts again from `value` (an exact sum computed afresh, or 0). */
  reset(value = 0): void {
    this.sum = value;
    this.carry = 0;
  }
}

/**
 * The sum of its members' values that do not decay (the active tenants' weights, their usual
 * rates: what the rules divide by, beside a decaying-sum.ts sum of what they send), compensated as
 * {@link CompensatedSum} is, and exactly 0 once no member with a value is left: not the rounding
 * their comings and goings left, which a share would divide by. A member whose value is 0 adds
 * nothing and is not counted.
 */
export class MemberSum {
  private readonly sum = new CompensatedSum();
  private members = 0;

  /** The members' values summed. */
  get value(): number {
    return this.sum.value;
  }

  /** How many members with a value it holds. */
  get size(): number {
    return this.members;
  }

  /** A member joins with `value`. */
  add(value: number): void {
    if (value === 0) return;
    this.members++;
    this.sum.add(value);
  }

  /** A member leaves: `value` exactly as it joined with (or was last {@link update}d to). */
  remove(value: number): void {
    if (value === 0) return;
    this.members--;
    if (this.members > 0) this.sum.add(-value);
    else {
      this.members = 0;
      this.sum.reset();
    }
  }

  /** A member's value changes from `before` to `after`. */
  update(before: number, after: number): void {
    if (before === 0 || after === 0) {
      this.remove(before);
      this.add(after);
    } else this.sum.add(after - before);
  }
}
