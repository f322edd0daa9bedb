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
 * Memory (issue 13). The index used to be a `Map<string, number>` LRU per node and a
 * `Map<string, node id | node id[]>` of holders. Measured with heap deltas (node --expose-gc,
 * Node 22): each Map costs 28 bytes per live slot (three tagged words and half a bucket), up to
 * twice that after its power-of-two growth and with the holes deletes leave until it rehashes
 * (112 bytes per entry for the two Maps once filled, 168 after churn, keys not counted); and
 * the index kept the key strings alive: 32 bytes flat (as the Durable Object receives them over
 * RPC), 64-96 as the edge's `hashToHex` builds them (cons strings), once per node that got the
 * block from a different request. In all, 116-142 bytes per entry at 10^6 entries, 144-230 at
 * 10^5 and 267-293 at 10^4 (bench/route-cost.ts, index-size rows), ~200 as ROUTE_COST.md
 * measured it: 10^6 entries were over a Durable Object's 128 MB. Now nothing is allocated per
 * block or entry; everything lives in flat typed arrays:
 *
 * - a block is interned once, as its 64-bit hash (two 32-bit words parsed from the 16 hex
 *   characters; the string is not kept), in an open-addressing table (linear probing, load at
 *   most 1/2, mixed with a per-index random seed so that crafted prompts cannot pile up in one
 *   probe run): 8 bytes of hash, 4 of holder-list head and 8-16 of table per distinct block.
 *   (Interning through a `Map<string, slot>` would have cost the Map slot and the string again,
 *   60-120 bytes per block.) Keys of any other form (tests use arbitrary strings) go through a
 *   `Map<string, slot>`, so every string is still its own key, exactly as before;
 * - an entry (node, block) is one slot of six parallel arrays, 28 bytes: block, node, LRU
 *   previous and next (a doubly linked list per node: a touch and an eviction are O(1) and the
 *   order is exactly the old Map's insertion order), the next holder of the same block (a list
 *   per block, walked to find a node's entry: most blocks have one holder or a few), and the
 *   touch sequence packed with the size, as before.
 *
 * Measured (bench/ROUTE_COST.md): 49 bytes per entry at 10^6 entries, 62-71 at 10^4-10^5 (the
 * arrays grow by half ahead of the entries) and 56 at the default cap (its table just doubled),
 * with every block on one node (the worst case: a block shared by several nodes costs its block
 * part once). Routing got faster too: matchDepths marks a block's holders once and tests each
 * still-matching node in O(1), where the old holder array's `includes` was O(holders) per node,
 * and the p99 no longer pays for collecting Map garbage (at 10^6 entries and 64 nodes, 22 µs
 * median and 43 µs p99 against 30 and 131 before, on the same machine).
 *
 * Hard bound: the arrays grow by half up to the cap plus {@link GROWTH_SLACK} and no further,
 * since the entries never exceed the cap after a call and one insert adds at most a prompt's
 * blocks (2,048 by default) before it evicts. So {@link indexMemoryBound} holds whatever the
 * traffic: 14.2 MiB at the default cap of 262,144 entries, 46.3 MiB (48.6 MB) at 10^6 (a growth
 * holds the old arrays too for a moment, at most 2/3 of the new). One exception to the cap: a
 * node whose proportional share of it rounds below one entry still keeps one (rebalanceLimits),
 * so the cap can be passed by one entry per such node (nodes more than `cap` times smaller than
 * the fleet's total).
 */

import { blockWeight } from "./block-layout.ts";

/** Default hard cap on node-block entries across the whole index. */
export const DEFAULT_MAX_INDEX_ENTRIES = 262_144;

/**
 * Entries one insert may add beyond the cap before it evicts (a prompt's new blocks; at most
 * 2,048 with the default prefix settings). The arrays are sized to the cap plus this.
 */
export const GROWTH_SLACK = 4096;

/** Bytes per entry slot: block, node, LRU previous, LRU next, next holder (Int32), touch+size (Float64). */
const ENTRY_BYTES = 5 * 4 + 8;
/** Bytes per block slot: the hash's two words and the holder list's head (Int32). */
const BLOCK_BYTES = 3 * 4;

/**
 * The most the index's arrays take with a cap of `maxEntries`, in bytes, when no insert adds
 * more than {@link GROWTH_SLACK} new blocks and every key is a 16-character hex hash: entry
 * arrays and block arrays for the cap plus the slack (distinct blocks never exceed entries) and
 * a hash table of the next power of two at or above twice that. About 48.5 MB at 10^6 entries.
 */
export function indexMemoryBound(maxEntries: number): number {
  const slots = maxEntries + GROWTH_SLACK;
  return slots * (ENTRY_BYTES + BLOCK_BYTES) + 4 * nextPowerOfTwo(2 * slots);
}

/**
 * An entry's value packs when it was last touched (a sequence number, increasing across the
 * index) and its size: `seq * WEIGHT_SLOTS + log2(size)`. One double per entry, exact up to
 * 2^49 touches.
 */
const WEIGHT_SLOTS = 16;
const pack = (seq: number, weight: number) => seq * WEIGHT_SLOTS + Math.log2(weight);
const weightOf = (packed: number) => 2 ** (packed % WEIGHT_SLOTS);
const seqOf = (packed: number) => Math.floor(packed / WEIGHT_SLOTS);

/** The end of a list, an empty table slot, an unknown block. */
const NONE = -1;
const MIN_SLOTS = 1024;

function nextPowerOfTwo(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/** A lowercase hex digit's value by character code, -1 for any other character. */
const NIBBLE = new Int8Array(128).fill(-1);
for (let i = 0; i < 16; i++) NIBBLE["0123456789abcdef".charCodeAt(i)] = i;

/** The words parsed by {@link parseHex} (module state, so that a lookup allocates nothing). */
let keyHi = 0;
let keyLo = 0;

/**
 * Parses a hash in the edge's form (exactly 16 lowercase hex characters, hash.ts's `hashToHex`)
 * into {@link keyHi} and {@link keyLo}; false for any other string. The mapping is one to one,
 * so two keys share a block exactly when they are the same string.
 */
function parseHex(s: string): boolean {
  if (s.length !== 16) return false;
  let hi = 0;
  let lo = 0;
  for (let i = 0; i < 8; i++) {
    const c = s.charCodeAt(i);
    const v = c < 128 ? NIBBLE[c]! : -1;
    if (v < 0) return false;
    hi = (hi << 4) | v;
  }
  for (let i = 8; i < 16; i++) {
    const c = s.charCodeAt(i);
    const v = c < 128 ? NIBBLE[c]! : -1;
    if (v < 0) return false;
    lo = (lo << 4) | v;
  }
  keyHi = hi;
  keyLo = lo;
  return true;
}

function grow<T extends Int32Array | Float64Array>(a: T, size: number): T {
  const b = new (a.constructor as new (n: number) => T)(size);
  b.set(a);
  return b;
}

interface NodeBlocks {
  /** This node's number in the entry arrays. */
  slot: number;
  /** Least and most recently used entries of the node's LRU list (NONE when empty). */
  head: number;
  tail: number;
  /** Entries. */
  count: number;
  /** Base blocks held: the sum of the sizes. */
  held: number;
  /** Capacity in base blocks, from the node's KV capacity. */
  capacityBlocks: number;
  /** Entries the node may keep once the global cap is shared out. */
  entryLimit: number;
}

export class PrefixIndex {
  private readonly nodes = new Map<string, NodeBlocks>();
  private entries = 0;
  /** Entries dropped because a node's capacity (or its share of the global cap) was full. */
  private evictedEntries = 0;

  private readonly maxEntries: number;
  /** Touch sequence: every insert of a block takes the next number. */
  private seq = 0;

  // Entries, by slot. A free slot is chained through eNext from freeEntry.
  private eBlock = new Int32Array(0);
  private eNode = new Int32Array(0);
  private ePrev = new Int32Array(0);
  private eNext = new Int32Array(0);
  /** The next entry holding the same block. */
  private eSibling = new Int32Array(0);
  /** Touch sequence and size, packed (see {@link pack}). */
  private eValue = new Float64Array(0);
  private entrySlots = 0;
  private entryTop = 0;
  private freeEntry = NONE;

  // Blocks, by slot. A free slot is chained through bFirst from freeBlock.
  private bHi = new Int32Array(0);
  private bLo = new Int32Array(0);
  /** The first entry holding the block. */
  private bFirst = new Int32Array(0);
  private blockSlots = 0;
  private blockTop = 0;
  private freeBlock = NONE;
  private liveBlocks = 0;

  /** Hex-keyed blocks by their hash: block slots, NONE for empty; a power of two long. */
  private table = new Int32Array(0);
  private tableBlocks = 0;
  private readonly seedA: number;
  private readonly seedB: number;
  /** Blocks whose key is not a 16-character hex hash, both ways. */
  private readonly otherIds = new Map<string, number>();
  private readonly otherKeys = new Map<number, string>();

  // Node slots, and matchDepths's marks (a holder's slot gets the block's stamp).
  private nodeTop = 0;
  private readonly freeNodes: number[] = [];
  private mark = new Int32Array(0);
  private stamp = 0;

  /** @param maxEntries hard cap on node-block entries (default {@link DEFAULT_MAX_INDEX_ENTRIES}). */
  constructor(maxEntries: number = DEFAULT_MAX_INDEX_ENTRIES) {
    this.maxEntries = maxEntries;
    let r = 0x9e3779b9;
    try {
      r = Math.floor(Math.random() * 2 ** 32);
    } catch {
      // A runtime that refuses randomness here: a fixed seed (only the table's layout depends on it).
    }
    this.seedA = r | 0;
    this.seedB = Math.imul(r ^ (r >>> 15), 0x2c1b3c6d) | 0;
  }

  /** Adds a node or updates its capacity (in blocks); shrinking evicts at once. */
  setNode(nodeId: string, capacityBlocks: number): void {
    const existing = this.nodes.get(nodeId);
    const cap = Math.max(1, Math.floor(capacityBlocks));
    if (existing) {
      if (existing.capacityBlocks === cap) return;
      existing.capacityBlocks = cap;
    } else {
      const slot = this.freeNodes.pop() ?? this.nodeTop++;
      if (slot >= this.mark.length) this.mark = grow(this.mark, Math.max(64, 2 * this.mark.length));
      this.nodes.set(nodeId, { slot, head: NONE, tail: NONE, count: 0, held: 0, capacityBlocks: cap, entryLimit: cap });
    }
    this.rebalanceLimits();
  }

  /**
   * Updates the capacities (in blocks) of nodes it knows, unknown ids ignored; shrinking evicts at
   * once. One pass over the nodes for the whole batch, where a call of {@link setNode} per node
   * would make one each: a sharded region resizes every node at each load exchange.
   */
  resizeNodes(capacities: Iterable<readonly [string, number]>): void {
    let changed = false;
    for (const [nodeId, capacityBlocks] of capacities) {
      const node = this.nodes.get(nodeId);
      const cap = Math.max(1, Math.floor(capacityBlocks));
      if (!node || node.capacityBlocks === cap) continue;
      node.capacityBlocks = cap;
      changed = true;
    }
    if (changed) this.rebalanceLimits();
  }

  /** Forgets a node and every block it held. */
  removeNode(nodeId: string): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    this.dropAll(node);
    this.nodes.delete(nodeId);
    this.freeNodes.push(node.slot);
    this.rebalanceLimits();
  }

  /** Forgets a node's blocks but keeps the node (its cache was lost, e.g. a restart). */
  clearNode(nodeId: string): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    this.dropAll(node);
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
    for (let i = hashes.length - 1; i >= 0; i--) {
      const weight = blockWeight(i);
      const value = pack(++this.seq, weight);
      const block = this.blockOf(hashes[i]!, true);
      let e = this.entryOf(node.slot, block);
      if (e !== NONE) {
        // A touch: most recently used now (its size is the new one, `held` unchanged, as always).
        this.eValue[e] = value;
        if (e !== node.tail) {
          this.unlinkLru(node, e);
          this.appendLru(node, e);
        }
        continue;
      }
      e = this.newEntry();
      this.eBlock[e] = block;
      this.eNode[e] = node.slot;
      this.eValue[e] = value;
      this.eSibling[e] = this.bFirst[block]!;
      this.bFirst[block] = e;
      this.appendLru(node, e);
      node.count++;
      node.held += weight;
      this.entries++;
    }
    this.evict(node);
  }

  /**
   * Longest believed prefix match of `hashes` on each of `nodeIds`, in blocks.
   * Walks the chain once; cost is O(longest match x (holders + nodes still matching)).
   */
  matchDepths(hashes: readonly string[], nodeIds: readonly string[]): number[] {
    const depths = new Array<number>(nodeIds.length).fill(0);
    const slots = new Array<number>(nodeIds.length);
    const alive: number[] = [];
    for (let i = 0; i < nodeIds.length; i++) {
      const node = this.nodes.get(nodeIds[i]!);
      slots[i] = node === undefined ? NONE : node.slot;
      // A node the index does not know matches nothing.
      if (node !== undefined) alive.push(i);
    }
    const mark = this.mark;
    for (let b = 0; b < hashes.length && alive.length > 0; b++) {
      const block = this.blockOf(hashes[b]!, false);
      if (block === NONE) break;
      if (this.stamp === 0x7fffffff) {
        mark.fill(0);
        this.stamp = 0;
      }
      const stamp = ++this.stamp;
      for (let e = this.bFirst[block]!; e !== NONE; e = this.eSibling[e]!) mark[this.eNode[e]!] = stamp;
      let kept = 0;
      for (let k = 0; k < alive.length; k++) {
        const i = alive[k]!;
        if (mark[slots[i]!] === stamp) {
          depths[i] = b + 1;
          alive[kept++] = i;
        }
      }
      alive.length = kept;
    }
    return depths;
  }

  /**
   * When `nodeId`'s copy of `hash` was last touched (a sequence number of this index), or
   * undefined if the node is not believed to hold it.
   */
  touchedAt(nodeId: string, hash: string): number | undefined {
    const node = this.nodes.get(nodeId);
    if (!node) return undefined;
    const e = this.entryOf(node.slot, this.blockOf(hash, false));
    return e === NONE ? undefined : seqOf(this.eValue[e]!);
  }

  /**
   * Forgets `hashes[from..]` on `nodeId`: a speculative insert the node turned out not to hold
   * (it refused the request, or failed before computing it).
   */
  forgetChain(nodeId: string, hashes: readonly string[], from: number): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    for (let i = Math.max(0, from); i < hashes.length; i++) {
      const e = this.entryOf(node.slot, this.blockOf(hashes[i]!, false));
      if (e !== NONE) this.forgetEntry(node, e);
    }
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
    for (let e = node.head; e !== NONE; e = node.head) {
      const value = this.eValue[e]!;
      if (seqOf(value) > seq) break;
      forgotten += weightOf(value);
      this.forgetEntry(node, e);
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
    return this.liveBlocks;
  }

  /** Entries evicted for capacity so far (not counting those forgotten on a node's evidence). */
  get evictions(): number {
    return this.evictedEntries;
  }

  get capacity(): number {
    return this.maxEntries;
  }

  /** Bytes the index's entry and block arrays and hash table take now (what {@link indexMemoryBound} bounds). */
  get arrayBytes(): number {
    return this.entrySlots * ENTRY_BYTES + this.blockSlots * BLOCK_BYTES + this.table.byteLength;
  }

  /** A block's slot by its key; a new block when `add` (else NONE for an unknown key). */
  private blockOf(hash: string, add: boolean): number {
    if (!parseHex(hash)) {
      const id = this.otherIds.get(hash);
      if (id !== undefined || !add) return id ?? NONE;
      const block = this.newBlock();
      this.otherIds.set(hash, block);
      this.otherKeys.set(block, hash);
      return block;
    }
    const hi = keyHi;
    const lo = keyLo;
    const { table, bHi, bLo } = this;
    const mask = table.length - 1;
    if (mask < 0) return add ? this.addAfterGrowth(hash) : NONE;
    for (let t = this.home(hi, lo) & mask; ; t = (t + 1) & mask) {
      const b = table[t]!;
      if (b === NONE) {
        if (!add) return NONE;
        // A new block: the load stays at most 1/2, so the table is never more than the next power of two above twice the blocks.
        if (2 * (this.tableBlocks + 1) > table.length) return this.addAfterGrowth(hash);
        const block = this.newBlock();
        this.bHi[block] = hi;
        this.bLo[block] = lo;
        table[t] = block;
        this.tableBlocks++;
        return block;
      }
      if (bHi[b] === hi && bLo[b] === lo) return b;
    }
  }

  private addAfterGrowth(hash: string): number {
    this.growTable();
    return this.blockOf(hash, true);
  }

  /** A 64-bit hash's home in the table, mixed with this index's seed (murmur3-style). */
  private home(hi: number, lo: number): number {
    let h = Math.imul(hi ^ this.seedA, 0xcc9e2d51);
    h = Math.imul((h << 15) | (h >>> 17), 0x1b873593) ^ lo ^ this.seedB;
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return h ^ (h >>> 16);
  }

  private growTable(): void {
    const old = this.table;
    const table = new Int32Array(Math.max(MIN_SLOTS, 2 * old.length)).fill(NONE);
    const mask = table.length - 1;
    for (const b of old) {
      if (b === NONE) continue;
      let t = this.home(this.bHi[b]!, this.bLo[b]!) & mask;
      while (table[t] !== NONE) t = (t + 1) & mask;
      table[t] = b;
    }
    this.table = table;
  }

  /** The size arrays grow to from `slots`: by half, up to the cap plus the slack, then by the slack. */
  private grownSlots(slots: number): number {
    const ceiling = this.maxEntries + GROWTH_SLACK;
    if (slots >= ceiling) return slots + GROWTH_SLACK;
    return Math.min(ceiling, Math.max(MIN_SLOTS, Math.ceil(slots * 1.5)));
  }

  private newBlock(): number {
    this.liveBlocks++;
    let b = this.freeBlock;
    if (b !== NONE) {
      this.freeBlock = this.bFirst[b]!;
    } else {
      if (this.blockTop === this.blockSlots) {
        const n = this.grownSlots(this.blockSlots);
        this.bHi = grow(this.bHi, n);
        this.bLo = grow(this.bLo, n);
        this.bFirst = grow(this.bFirst, n);
        this.blockSlots = n;
      }
      b = this.blockTop++;
    }
    this.bFirst[b] = NONE;
    return b;
  }

  /** Frees a block no node holds any more. */
  private dropBlock(b: number): void {
    this.liveBlocks--;
    const key = this.otherKeys.size > 0 ? this.otherKeys.get(b) : undefined;
    if (key !== undefined) {
      this.otherKeys.delete(b);
      this.otherIds.delete(key);
    } else {
      this.deleteFromTable(b);
    }
    this.bFirst[b] = this.freeBlock;
    this.freeBlock = b;
  }

  /** Removes a block from the table, shifting back the run after it (no tombstones). */
  private deleteFromTable(b: number): void {
    const table = this.table;
    const mask = table.length - 1;
    let i = this.home(this.bHi[b]!, this.bLo[b]!) & mask;
    while (table[i] !== b) i = (i + 1) & mask;
    table[i] = NONE;
    for (let j = (i + 1) & mask; table[j] !== NONE; j = (j + 1) & mask) {
      const c = table[j]!;
      const k = this.home(this.bHi[c]!, this.bLo[c]!) & mask;
      // c may move back to i if its home is not cyclically within (i, j].
      if (i <= j ? k <= i || k > j : k <= i && k > j) {
        table[i] = c;
        table[j] = NONE;
        i = j;
      }
    }
    this.tableBlocks--;
  }

  private newEntry(): number {
    let e = this.freeEntry;
    if (e !== NONE) {
      this.freeEntry = this.eNext[e]!;
      return e;
    }
    if (this.entryTop === this.entrySlots) {
      const n = this.grownSlots(this.entrySlots);
      this.eBlock = grow(this.eBlock, n);
      this.eNode = grow(this.eNode, n);
      this.ePrev = grow(this.ePrev, n);
      this.eNext = grow(this.eNext, n);
      this.eSibling = grow(this.eSibling, n);
      this.eValue = grow(this.eValue, n);
      this.entrySlots = n;
    }
    e = this.entryTop++;
    return e;
  }

  /** The node's entry for a block, or NONE: a walk of the block's holders. */
  private entryOf(nodeSlot: number, block: number): number {
    if (block === NONE) return NONE;
    let e = this.bFirst[block]!;
    while (e !== NONE && this.eNode[e] !== nodeSlot) e = this.eSibling[e]!;
    return e;
  }

  private appendLru(node: NodeBlocks, e: number): void {
    this.ePrev[e] = node.tail;
    this.eNext[e] = NONE;
    if (node.tail === NONE) node.head = e;
    else this.eNext[node.tail] = e;
    node.tail = e;
  }

  private unlinkLru(node: NodeBlocks, e: number): void {
    const prev = this.ePrev[e]!;
    const next = this.eNext[e]!;
    if (prev === NONE) node.head = next;
    else this.eNext[prev] = next;
    if (next === NONE) node.tail = prev;
    else this.ePrev[next] = prev;
  }

  /** Takes an entry off its block's holder list, freeing the block if it was the last. */
  private unlinkHolder(e: number): void {
    const block = this.eBlock[e]!;
    const next = this.eSibling[e]!;
    let p = this.bFirst[block]!;
    if (p === e) {
      this.bFirst[block] = next;
      if (next === NONE) this.dropBlock(block);
      return;
    }
    while (this.eSibling[p] !== e) p = this.eSibling[p]!;
    this.eSibling[p] = next;
  }

  private releaseEntry(e: number): void {
    this.eNext[e] = this.freeEntry;
    this.freeEntry = e;
  }

  /** Drops every entry of a node (its held count is the caller's). */
  private dropAll(node: NodeBlocks): void {
    for (let e = node.head; e !== NONE;) {
      const next = this.eNext[e]!;
      this.unlinkHolder(e);
      this.releaseEntry(e);
      e = next;
    }
    this.entries -= node.count;
    node.count = 0;
    node.head = NONE;
    node.tail = NONE;
  }

  /** Drops least recently used blocks until the node is within its capacity and its share of entries. */
  private evict(node: NodeBlocks): void {
    while ((node.held > node.capacityBlocks || node.count > node.entryLimit) && node.head !== NONE) {
      this.forgetEntry(node, node.head);
      this.evictedEntries++;
    }
  }

  private forgetEntry(node: NodeBlocks, e: number): void {
    this.unlinkLru(node, e);
    node.count--;
    node.held -= weightOf(this.eValue[e]!);
    this.entries--;
    this.unlinkHolder(e);
    this.releaseEntry(e);
  }

  /** Shares the global cap out in proportion to capacity, when the capacities exceed it. */
  private rebalanceLimits(): void {
    let total = 0;
    for (const n of this.nodes.values()) total += n.capacityBlocks;
    const scale = total > this.maxEntries ? this.maxEntries / total : 1;
    for (const n of this.nodes.values()) {
      n.entryLimit = Math.max(1, Math.floor(n.capacityBlocks * scale));
      this.evict(n);
    }
  }
}
