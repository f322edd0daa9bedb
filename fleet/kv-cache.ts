/**
 * The node's prefix (KV) cache: the ground truth of which prompt blocks a node holds.
 *
 * Modelled on vLLM's automatic prefix caching: the KV pool is a fixed number of blocks; a block is
 * named by a chained hash (its content and every block before it), so a block can only be reused
 * while the whole prefix before it is reused too. Blocks in use by a running request are pinned;
 * blocks of finished requests stay cached but evictable, least recently used first.
 *
 * Pure data structure, no I/O and no time: the engine decides when to call it.
 */
export class PrefixCache {
  readonly capacityBlocks: number;
  readonly blockTokens: number;
  /** Every held block -> number of running requests pinning it. */
  private readonly refs = new Map<string, number>();
  /**
   * Unpinned held blocks in eviction order (first = evicted first). A Map keeps insertion order,
   * and deleting then re-setting a key moves it to the end: an O(1) LRU.
   */
  private readonly evictable = new Map<string, true>();
  /** Blocks evicted since creation (for metrics and tests). */
  evictions = 0;

  constructor(capacityTokens: number, blockTokens = 16) {
    if (!(capacityTokens >= blockTokens)) throw new Error(`kv capacity ${capacityTokens} is below one block`);
    this.blockTokens = blockTokens;
    this.capacityBlocks = Math.floor(capacityTokens / blockTokens);
  }

  /** Blocks held (pinned or not). */
  get heldBlocks(): number {
    return this.refs.size;
  }

  /** Blocks pinned by running requests: what vLLM reports as KV cache usage. */
  get pinnedBlocks(): number {
    return this.refs.size - this.evictable.size;
  }

  /** Fraction of the pool in use by running requests, 0..1 (vLLM's kv_cache_usage_perc). */
  usage(): number {
    return Math.min(1, this.pinnedBlocks / this.capacityBlocks);
  }

  has(hash: string): boolean {
    return this.refs.has(hash);
  }

  /**
   * Length of the longest prefix of `hashes` held, looking at no more than `limit` blocks.
   * Stops at the first missing block: a later block is useless without the ones before it.
   * A pure lookup: it does not refresh recency.
   */
  matchLength(hashes: readonly string[], limit = hashes.length): number {
    const n = Math.min(limit, hashes.length);
    let i = 0;
    while (i < n && this.refs.has(hashes[i]!)) i++;
    return i;
  }

  /**
   * Whether a request whose first `matched` blocks are held can also get `newBlocks` more:
   * pinning its matched blocks removes them from the evictable pool, and every other pinned
   * block is untouchable.
   */
  canAllocate(hashes: readonly string[], matched: number, newBlocks: number): boolean {
    let extraPins = 0;
    for (let i = 0; i < matched; i++) if (this.evictable.has(hashes[i]!)) extraPins++;
    return this.pinnedBlocks + extraPins + newBlocks <= this.capacityBlocks;
  }

  /** Pins the first `count` blocks (which must be held): a request starts using them. */
  pin(hashes: readonly string[], count: number): void {
    for (let i = 0; i < count; i++) {
      const h = hashes[i]!;
      const r = this.refs.get(h);
      if (r === undefined) throw new Error("pin of a block that is not held");
      if (r === 0) this.evictable.delete(h);
      this.refs.set(h, r + 1);
    }
  }

  /**
   * Stores blocks `from..` as computed and pinned, evicting least recently used unpinned blocks
   * to make room. Stops at the first block that cannot get room (everything else is pinned), so
   * what is held is still a prefix. Returns the number of blocks now pinned for the request
   * (`from` + stored).
   */
  commit(hashes: readonly string[], from: number): number {
    let i = from;
    for (; i < hashes.length; i++) {
      const h = hashes[i]!;
      const r = this.refs.get(h);
      if (r !== undefined) {
        // Already held (computed by someone else meanwhile): share it.
        if (r === 0) this.evictable.delete(h);
        this.refs.set(h, r + 1);
        continue;
      }
      if (this.refs.size >= this.capacityBlocks && !this.evictOne()) break;
      this.refs.set(h, 1);
    }
    return i;
  }

  /**
   * Unpins the first `count` blocks: the request finished. They stay cached. Released tail
   * first, so a request's last blocks are evicted before its first ones (as vLLM's free queue
   * does): the shared beginning of a prompt outlives its private end.
   */
  release(hashes: readonly string[], count: number): void {
    for (let i = count - 1; i >= 0; i--) {
      const h = hashes[i]!;
      const r = this.refs.get(h);
      if (r === undefined || r === 0) continue;
      if (r === 1) this.evictable.set(h, true);
      this.refs.set(h, r - 1);
    }
  }

  /**
   * Drops every block no running request pins (vLLM's `POST /reset_prefix_cache`, SGLang's
   * `/flush_cache`): the cache is lost while the process, and its boot id, carry on. Returns the
   * blocks dropped.
   */
  reset(): number {
    const dropped = this.evictable.size;
    for (const h of this.evictable.keys()) this.refs.delete(h);
    this.evictable.clear();
    return dropped;
  }

  /** Drops everything (a restart: GPU memory is gone). */
  clear(): void {
    this.refs.clear();
    this.evictable.clear();
  }

  private evictOne(): boolean {
    const first = this.evictable.keys().next();
    if (first.done) return false;
    this.evictable.delete(first.value);
    this.refs.delete(first.value);
    this.evictions++;
    return true;
  }
}
