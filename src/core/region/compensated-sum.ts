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
