/**
 * Items in ascending order of the numeric key each carries (`key`, not changed while it is held):
 * O(log n) to find where a key falls, and an array splice to insert or remove, which for the
 * region's tenants (at most MAX_TRACKED_TENANTS, 1,024) moves a few kilobytes at most.
 */
export class SortedByKey<T extends { key: number }> {
  private readonly list: T[] = [];

  get size(): number {
    return this.list.length;
  }

  /** The item at `index` in ascending key order. */
  at(index: number): T | undefined {
    return this.list[index];
  }

  insert(item: T): void {
    this.list.splice(this.upperBound(item.key), 0, item);
  }

  /** Removes `item` (held with the key it carries); false if it is not held. */
  remove(item: T): boolean {
    for (let i = this.lowerBound(item.key); i < this.list.length && this.list[i]!.key === item.key; i++) {
      if (this.list[i] !== item) continue;
      this.list.splice(i, 1);
      return true;
    }
    return false;
  }

  /** How many items have a key at most `key`: the index of the first above it. */
  upperBound(key: number): number {
    return this.bound(key, true);
  }

  /** How many items have a key below `key`. */
  private lowerBound(key: number): number {
    return this.bound(key, false);
  }

  /** How many items have a key below `key`, or at most `key` when `orEqual`: a binary search. */
  private bound(key: number, orEqual: boolean): number {
    let lo = 0;
    let hi = this.list.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const k = this.list[mid]!.key;
      if (k < key || (orEqual && k === key)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
