/** A Map bounded to `limit` entries, evicting the least recently set. Used for session hints. */
export class BoundedLru<K, V> {
  private readonly map = new Map<K, V>();
  private readonly limit: number;
  constructor(limit: number) {
    this.limit = limit;
  }
  get(key: K): V | undefined {
    return this.map.get(key);
  }
  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.limit) this.map.delete(this.map.keys().next().value as K);
  }
  deleteWhere(predicate: (value: V) => boolean): void {
    for (const [k, v] of this.map) if (predicate(v)) this.map.delete(k);
  }
  get size(): number {
    return this.map.size;
  }
  /** Least recently set first. */
  entries(): IterableIterator<[K, V]> {
    return this.map.entries();
  }
}
