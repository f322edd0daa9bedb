/**
 * The prefix index: which nodes the router believes hold which prefix blocks.
 *
 * Belief is learned from the router's own decisions (a request dispatched to a node leaves its
 * prompt in that node's KV cache), so it must also *forget* the way the node does: each node's
 * blocks are kept in LRU order and bounded by that node's KV capacity, measured in base blocks
 * (a deep block of a long prompt counts as the several base blocks it spans, block-layout.ts), so
 * the index drops a block at about the time the node itself must have evicted it. A hard cap on
 * the whole index (node-block entries) bounds memory however many nodes report large caches;
 * when it binds, every node's share is scaled down in proportion to its capacity.
 *
 * Exact LRU, not an approximation such as CLOCK: CLOCK makes a touch cheaper (an in-place bit
 * instead of delete + re-insert), but its eviction order drifts from the engines' LRU, and the
 * benchmark measured the drift: warmpath's hit rate on the Mooncake trace fell from 81% to 79% of
 * the pooled bound and chat-heavy mean TTFT at heavy load rose 6%. The index's accuracy is worth
 * the microseconds (bench/ROUTE_COST.md).
 *
 * Memory, measured (bench/ROUTE_COST.md): about 200 bytes per entry (a slot in the node's LRU map,
 * a slot in the holder map, and the 16-character key), so the default cap of 262,144 entries is
 * about 50 MiB, inside a Durable Object's 128 MB.
 */

import { blockWeight } from "./block-layout.ts";

/** Default hard cap on node-block entries across the whole index. */
export const DEFAULT_MAX_INDEX_ENTRIES = 262_144;

/**
 * An entry's value packs when it was last touched (a sequence number, increasing across the
 * index) and its size: `seq * WEIGHT_SLOTS + log2(size)`. One number per entry, so the map costs
 * what it did when it held only the size.
 */
const WEIGHT_SLOTS = 16;
const pack = (seq: number, weight: number) => seq * WEIGHT_SLOTS + Math.log2(weight);
const weightOf = (packed: number) => 2 ** (packed % WEIGHT_SLOTS);
const seqOf = (packed: number) => Math.floor(packed / WEIGHT_SLOTS);

interface NodeBlocks {
  /**
   * Block hash -> when it was last touched and its size in base blocks (block-layout.ts; packed,
   * see {@link pack}), in LRU order (first = least recently used). Map iteration order is
   * insertion order.
   */
  lru: Map<string, number>;
  /** Base blocks held: the sum of the sizes. */
  held: number;
  /** Capacity in base blocks, from the node's KV capacity. */
  capacityBlocks: number;
  /** Entries the node may keep once the global cap is shared out. */
  entryLimit: number;
}

export class PrefixIndex {
  /**
   * Block hash -> the node(s) believed to hold it: a node id when one node does (most blocks),
   * an array when several do. A Set per block cost ~150 bytes more per entry (353 vs 200, measured).
   */
  private readonly holders = new Map<string, string | string[]>();
  private readonly nodes = new Map<string, NodeBlocks>();
  private entries = 0;
  /** Entries dropped because a node's capacity (or its share of the global cap) was full. */
  private evictedEntries = 0;

  private readonly maxEntries: number;
  /** Touch sequence: every insert of a block takes the next number. */
  private seq = 0;

  /** @param maxEntries hard cap on node-block entries (default {@link DEFAULT_MAX_INDEX_ENTRIES}). */
  constructor(maxEntries: number = DEFAULT_MAX_INDEX_ENTRIES) {
    this.maxEntries = maxEntries;
  }

  /** Adds a node or updates its capacity (in blocks); shrinking evicts at once. */
  setNode(nodeId: string, capacityBlocks: number): void {
    const existing = this.nodes.get(nodeId);
    const cap = Math.max(1, Math.floor(capacityBlocks));
    if (existing) {
      if (existing.capacityBlocks === cap) return;
      existing.capacityBlocks = cap;
    } else {
      this.nodes.set(nodeId, { lru: new Map(), held: 0, capacityBlocks: cap, entryLimit: cap });
    }
    this.rebalanceLimits();
  }

  /** Forgets a node and every block it held. */
  removeNode(nodeId: string): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    for (const hash of node.lru.keys()) this.dropHolder(hash, nodeId);
    this.entries -= node.lru.size;
    this.nodes.delete(nodeId);
    this.rebalanceLimits();
  }

  /** Forgets a node's blocks but keeps the node (its cache was lost, e.g. a restart). */
  clearNode(nodeId: string): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    for (const hash of node.lru.keys()) this.dropHolder(hash, nodeId);
    this.entries -= node.lru.size;
    node.lru.clear();
    node.held = 0;
  }

  hasNode(nodeId: string): boolean {
    return this.nodes.has(nodeId);
  }

  /**
   * Records that `nodeId` now holds every block of `hashes` (it was just sent this prompt),
   * marking them most recently used. Blocks are touched last-to-first so that, when the node's
   * LRU overflows, a prompt's tail is evicted before its head, as in an engine's prefix cache.
   */
  insert(nodeId: string, hashes: readonly string[]): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    const { lru } = node;
    for (let i = hashes.length - 1; i >= 0; i--) {
      const hash = hashes[i]!;
      const weight = blockWeight(i);
      const value = pack(++this.seq, weight);
      if (lru.delete(hash)) {
        lru.set(hash, value);
        continue;
      }
      lru.set(hash, value);
      node.held += weight;
      this.entries++;
      const held = this.holders.get(hash);
      if (held === undefined) this.holders.set(hash, nodeId);
      else if (typeof held === "string") this.holders.set(hash, [held, nodeId]);
      else held.push(nodeId);
    }
    this.evict(nodeId, node);
  }

  /**
   * Longest believed prefix match of `hashes` on each of `nodeIds`, in blocks.
   * Walks the chain once; cost is O(longest match x nodes still matching).
   */
  matchDepths(hashes: readonly string[], nodeIds: readonly string[]): number[] {
    const depths = new Array<number>(nodeIds.length).fill(0);
    let alive = nodeIds.map((_, i) => i);
    for (let b = 0; b < hashes.length && alive.length > 0; b++) {
      const held = this.holders.get(hashes[b]!);
      if (held === undefined) break;
      const next: number[] = [];
      for (const i of alive) {
        if (typeof held === "string" ? held === nodeIds[i] : held.includes(nodeIds[i]!)) {
          depths[i] = b + 1;
          next.push(i);
        }
      }
      alive = next;
    }
    return depths;
  }

  /**
   * When `nodeId`'s copy of `hash` was last touched (a sequence number of this index), or
   * undefined if the node is not believed to hold it.
   */
  touchedAt(nodeId: string, hash: string): number | undefined {
    const v = this.nodes.get(nodeId)?.lru.get(hash);
    return v === undefined ? undefined : seqOf(v);
  }

  /**
   * Forgets `hashes[from..]` on `nodeId`: a speculative insert the node turned out not to hold
   * (it refused the request, or failed before computing it).
   */
  forgetChain(nodeId: string, hashes: readonly string[], from: number): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    for (let i = Math.max(0, from); i < hashes.length; i++) this.forgetEntry(nodeId, node, hashes[i]!);
  }

  /**
   * Forgets every block of `nodeId` last touched at or before `seq`. When a node reports that a
   * block it was believed to hold is gone, it evicted it; its cache evicts least recently used
   * first, so every block touched no later is gone too. Returns the base blocks forgotten.
   */
  forgetOlderThan(nodeId: string, seq: number): number {
    const node = this.nodes.get(nodeId);
    if (!node) return 0;
    let forgotten = 0;
    for (const [hash, value] of node.lru) {
      if (seqOf(value) > seq) break;
      forgotten += weightOf(value);
      this.forgetEntry(nodeId, node, hash);
    }
    return forgotten;
  }

  /** Base blocks the index believes `nodeId` holds (its believed cache size, in block units). */
  blocksOf(nodeId: string): number {
    return this.nodes.get(nodeId)?.held ?? 0;
  }

  /** A node's capacity in base blocks (0 for an unknown node). */
  capacityOf(nodeId: string): number {
    return this.nodes.get(nodeId)?.capacityBlocks ?? 0;
  }

  /** Total node-block entries. */
  get size(): number {
    return this.entries;
  }

  /** Distinct block hashes. */
  get distinctBlocks(): number {
    return this.holders.size;
  }

  /** Entries evicted for capacity so far (not counting those forgotten on a node's evidence). */
  get evictions(): number {
    return this.evictedEntries;
  }

  get capacity(): number {
    return this.maxEntries;
  }

  private dropHolder(hash: string, nodeId: string): void {
    const held = this.holders.get(hash);
    if (held === undefined) return;
    if (typeof held === "string") {
      if (held === nodeId) this.holders.delete(hash);
      return;
    }
    const rest = held.filter((id) => id !== nodeId);
    this.holders.set(hash, rest.length === 1 ? rest[0]! : rest);
  }

  /** Drops least recently used blocks until the node is within its capacity and its share of entries. */
  private evict(nodeId: string, node: NodeBlocks): void {
    const { lru } = node;
    if (node.held <= node.capacityBlocks && lru.size <= node.entryLimit) return;
    for (const hash of lru.keys()) {
      if (node.held <= node.capacityBlocks && lru.size <= node.entryLimit) break;
      this.forgetEntry(nodeId, node, hash);
      this.evictedEntries++;
    }
  }

  private forgetEntry(nodeId: string, node: NodeBlocks, hash: string): void {
    const value = node.lru.get(hash);
    if (value === undefined) return;
    node.lru.delete(hash);
    node.held -= weightOf(value);
    this.entries--;
    this.dropHolder(hash, nodeId);
  }

  /** Shares the global cap out in proportion to capacity, when the capacities exceed it. */
  private rebalanceLimits(): void {
    let total = 0;
    for (const n of this.nodes.values()) total += n.capacityBlocks;
    const scale = total > this.maxEntries ? this.maxEntries / total : 1;
    for (const [id, n] of this.nodes) {
      n.entryLimit = Math.max(1, Math.floor(n.capacityBlocks * scale));
      this.evict(id, n);
    }
  }
}
