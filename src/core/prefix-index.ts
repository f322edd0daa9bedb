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
 * - an entry (node, block) is one slot of seven parallel arrays, 29 bytes: block, node, LRU
 *   previous and next (a doubly linked list per node: a touch and an eviction are O(1) and the
 *   order is exactly the old Map's insertion order), the next holder of the same block (a list
 *   per block, walked to find a node's entry: most blocks have one holder or a few), the touch
 *   sequence packed with the size, as before, and (one byte, issue 24) how many requests in flight
 *   claim it while the node has not confirmed it (see {@link PrefixIndex.speculate}).
 *
 * Measured (bench/ROUTE_COST.md, before the claims byte): 49 bytes per entry at 10^6 entries,
 * 62-71 at 10^4-10^5 (the arrays grow by half ahead of the entries) and 56 at the default cap (its
 * table just doubled), with every block on one node (the worst case: a block shared by several
 * nodes costs its block part once). Routing got faster too: matchDepths marks a block's holders once and tests each
 * still-matching node in O(1), where the old holder array's `includes` was O(holders) per node,
 * and the p99 no longer pays for collecting Map garbage (at 10^6 entries and 64 nodes, 22 µs
 * median and 43 µs p99 against 30 and 131 before, on the same machine).
 *
 * Hard bound: the arrays grow by half up to the cap plus {@link GROWTH_SLACK} and no further,
 * since the entries never exceed the cap after a call and one insert adds at most a prompt's
 * blocks (2,048 by default) before it evicts. So {@link indexMemoryBound} holds whatever the
 * traffic: 14.4 MiB at the default cap of 262,144 entries, 47.3 MiB (49.6 MB) at 10^6 (a growth
 * holds the old arrays too for a moment, at most 2/3 of the new). One exception to the cap: a
 * node whose proportional share of it rounds below one entry still keeps one (rebalanceLimits),
 * so the cap can be passed by one entry per such node (nodes more than `cap` times smaller than
 * the fleet's total). And one addition, while requests are in flight: the ghosts a rollback may
 * take back ({@link PrefixIndex.speculate}) are entry slots too, beyond the cap. A node keeps no
 * more than its unconfirmed entries could free and its share of the cap could hold again: at most
 * the cap in all (if every entry were a request in flight's), in practice the new blocks of the
 * requests in flight, and none once they are answered.
 */

import { baseBlocksBefore, blockWeight } from "./block-layout.ts";
import { HASH_HEX_CHARS } from "./hash.ts";

/** Default hard cap on node-block entries across the whole index. */
export const DEFAULT_MAX_INDEX_ENTRIES = 262_144;

/**
 * Entries one insert may add beyond the cap before it evicts (a prompt's new blocks; at most
 * 2,048 with the default prefix settings). The arrays are sized to the cap plus this.
 */
export const GROWTH_SLACK = 4096;

/** Bytes per entry slot: block, node, LRU previous, LRU next, next holder (Int32), touch+size (Float64), claims (Uint8). */
const ENTRY_BYTES = 5 * 4 + 8 + 1;
/**
 * The most requests in flight one unconfirmed entry counts (a Uint8): a block claimed by more is
 * taken as confirmed (so never rolled back), as every speculative block was before rollbacks.
 */
const MAX_CLAIMS = 255;
/** Bytes per block slot: the hash's two words and the holder list's head (Int32). */
const BLOCK_BYTES = 3 * 4;

/**
 * The most the index's arrays take with a cap of `maxEntries`, in bytes, when no insert adds
 * more than {@link GROWTH_SLACK} new blocks and every key is a 16-character hex hash: entry
 * arrays and block arrays for the cap plus the slack (distinct blocks never exceed entries) and
 * a hash table of the next power of two at or above twice that. About 49.6 MB at 10^6 entries.
 * Not counted: the ghosts of requests in flight (see the module's comment).
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
  return s.length === 16 && parseHexAt(s, 0);
}

/** {@link parseHex} of the 16 characters of `s` from `at` (a ticket's joined hashes: no string is cut). */
function parseHexAt(s: string, at: number): boolean {
  let hi = 0;
  let lo = 0;
  for (let i = at; i < at + 8; i++) {
    const c = s.charCodeAt(i);
    const v = c < 128 ? NIBBLE[c]! : -1;
    if (v < 0) return false;
    hi = (hi << 4) | v;
  }
  for (let i = at + 8; i < at + 16; i++) {
    const c = s.charCodeAt(i);
    const v = c < 128 ? NIBBLE[c]! : -1;
    if (v < 0) return false;
    lo = (lo << 4) | v;
  }
  keyHi = hi;
  keyLo = lo;
  return true;
}

function grow<T extends Int32Array | Float64Array | Uint8Array>(a: T, size: number): T {
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
  /** Unconfirmed entries (claims > 0: inserted by requests the node has not accepted yet), and their base blocks. */
  specCount: number;
  specWeight: number;
  /**
   * Ghosts: entries evicted while some of the node's entries were unconfirmed, kept for a rollback
   * to take back (see {@link PrefixIndex.speculate}). Each stays in its block's holder list under
   * the node's ghost slot (which no lookup asks for, so matches never see it) and in the node's
   * ghost list, linked as the LRU list is, oldest first; the number of ghosts and their base blocks.
   */
  ghostSlot: number;
  ghostHead: number;
  ghostTail: number;
  ghostCount: number;
  ghostWeight: number;
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
  /**
   * Requests in flight that inserted the entry speculatively and are not resolved yet; 0 for a
   * confirmed entry (held by the node as far as the router knows). See {@link speculate}.
   */
  private eClaims = new Uint8Array(0);
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
  /** The first block the last {@link put} claimed (its `hashes.length` if none). */
  private claimedFrom = 0;

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
      const slot = this.newNodeSlot();
      const ghostSlot = this.newNodeSlot();
      this.nodes.set(nodeId, {
        slot,
        head: NONE,
        tail: NONE,
        count: 0,
        held: 0,
        capacityBlocks: cap,
        entryLimit: cap,
        specCount: 0,
        specWeight: 0,
        ghostSlot,
        ghostHead: NONE,
        ghostTail: NONE,
        ghostCount: 0,
        ghostWeight: 0,
      });
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
    this.freeNodes.push(node.slot, node.ghostSlot);
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
   * Records that `nodeId` now holds `hashes` (it computed this prompt), marking them most recently
   * used: confirmed, as {@link speculate} then {@link confirm} would. Blocks are touched
   * last-to-first so that, when the node's LRU overflows, a prompt's tail is evicted before its
   * head, as in an engine's prefix cache.
   *
   * A prompt the node cannot hold whole (more base blocks than its capacity, or more blocks than
   * its share of the cap) is inserted from its start only as far as it fits. The part a later
   * request can match is a prefix, and what survives of it on the node is its head: an engine
   * frees a finished request's blocks tail first (vLLM returns them to its free queue in reverse
   * order, as this index touches them). Inserted whole, it would evict all else the node holds
   * before evicting its own tail; and over the node's context it is not cached at all: vLLM
   * refuses it outright (it will not even start with a context its KV cache cannot hold), and the
   * router rolls it back.
   */
  insert(nodeId: string, hashes: readonly string[]): void {
    const node = this.nodes.get(nodeId);
    if (node) this.put(node, hashes, false);
  }

  /**
   * Speculation and rollback (issue 24). The router inserts a prompt for the node it dispatches it
   * to before the node has answered, and the insert evicts the node's least recently used blocks
   * at once. A node that refuses the request (an over-long prompt) or fails it before its first
   * byte computed nothing and evicted nothing, and the index must come back to what it was: one
   * refused 900k-token prompt used to take a node's believed blocks from 22 to 0, and the next
   * request on that warm prefix went elsewhere.
   *
   * Of the two ways there, deferring the eviction until the first byte or evicting at once and
   * taking back what was evicted, this index does the second, and keeps what it evicted as ghosts:
   * - It is what the node does. vLLM evicts when its scheduler allocates the request's blocks, at
   *   the start of the prefill, not at the first byte. Deferring would keep believing, for the whole
   *   queue and prefill of every request in flight (2.03 s mean TTFT on Mooncake at heavy load,
   *   bench quick), blocks the node has already dropped, for every request routed meanwhile. Evicting
   *   at once leaves every success path as it was: the quick benchmark, where no node refuses, gives
   *   byte-identical results (only a prompt longer than its node can hold goes in differently, cut:
   *   see {@link insert}).
   * - Its memory is bounded by the cap. Deferred entries would sit above their node's capacity until
   *   their first byte: up to max_inflight_per_node x a prompt's blocks (256 x 2,048 = 524,288
   *   entries) on one node, twice the default cap. A ghost is an entry, and a node keeps no more
   *   ghosts than its unconfirmed entries could free, nor than its share of the cap could hold again
   *   (trimGhosts): at most the cap's worth, in practice the new blocks of the requests in flight.
   * - It is exact with requests in flight together, because ghosts are kept per node, in eviction
   *   order, which is LRU order, rather than per request. When A's insert pushes out X and B's
   *   insert, dispatched after it, pushes out Y (which would have stayed but for A), a rollback of A
   *   frees A's blocks and takes back the most recently evicted ghosts that fit in what it freed: Y,
   *   then X, the LRU as if A had never been sent, whether B has had its first byte or not. A record
   *   of what A's own insert evicted would bring back X and lose Y. Every ghost is older than every
   *   entry its node holds (an LRU evicts its oldest first), so ghosts taken back go to the old end
   *   of the node's list, in their order. A ghost stays its block's holder (under the node's ghost
   *   slot, which no match asks for), so a block inserted again meanwhile takes its ghost back as
   *   its entry instead of leaving a stale one to count against the bound.
   *   (test/core/prefix-index.model.test.ts checks it against the index replayed without the
   *   rolled-back requests, over random interleavings.)
   *
   * So that a rollback forgets only what no one else vouches for, the entries a speculative insert
   * adds are unconfirmed: every request in flight that inserted or re-touched one claims it, the
   * first of them the node accepts confirms it ({@link confirm}: a first byte, or a computed
   * completion), and a rollback releases its claims and forgets the entries no request still claims.
   * Two requests in flight sharing a new prefix, one refused and one served, leave it believed.
   * Not undone: the touch of entries already confirmed (the request's cached prefix moves to the
   * recent end: the node held it, and may have touched it too), and unconfirmed entries evicted
   * before their request was resolved (not kept as ghosts: whether the node holds them is unknown).
   * Both need the node's cache to turn over within one prefill to matter, as does the one way a
   * rollback can err: it finds its entries by hash, so an entry of its claimed range that the index
   * dropped and another request in flight inserted again meanwhile is taken for its own.
   *
   * Returns the part of `hashes` the request claimed, `[from, to)` (`to` is where a prompt longer
   * than the node can hold was cut, see {@link insert}): what {@link confirm} or {@link rollback}
   * is then given. Empty when the node is unknown or the whole prompt was confirmed already.
   */
  speculate(nodeId: string, hashes: readonly string[]): { from: number; to: number } {
    const node = this.nodes.get(nodeId);
    if (!node) return { from: 0, to: 0 };
    const to = this.put(node, hashes, true);
    return { from: Math.min(this.claimedFrom, to), to };
  }

  /**
   * The node accepted a request inserted by {@link speculate} (its first byte came, or it completed
   * having computed the prompt): the entries of its claimed blocks `[from, to)` are confirmed,
   * whatever other requests claim them. `chain` is the prompt's hashes joined, 16 characters each,
   * as the router keeps them for a request in flight (read in place: confirming a long prompt cuts
   * no strings).
   */
  confirm(nodeId: string, chain: string, from: number, to: number): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    for (let k = from; k < to; k++) {
      const e = this.entryOf(node.slot, this.blockAt(chain, k));
      if (e !== NONE && this.eClaims[e]! > 0) this.unclaim(node, e);
    }
    this.trimGhosts(node);
  }

  /**
   * The node refused a request inserted by {@link speculate}, or failed it before its first byte:
   * it computed none of it. Releases the request's claims on its claimed blocks `[from, to)` of
   * `chain` (joined, as for {@link confirm}), forgets the entries no other request in flight still
   * claims, and takes back the node's most recently evicted ghosts that fit in what that freed (the
   * design and why: {@link speculate}).
   */
  rollback(nodeId: string, chain: string, from: number, to: number): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    let freed = 0;
    for (let k = from; k < to; k++) {
      const e = this.entryOf(node.slot, this.blockAt(chain, k));
      if (e === NONE) continue;
      const claims = this.eClaims[e]!;
      if (claims === 0) continue;
      if (claims > 1) {
        this.eClaims[e] = claims - 1;
        continue;
      }
      freed += weightOf(this.eValue[e]!);
      this.forgetEntry(node, e);
    }
    this.restoreGhosts(node, freed);
    this.trimGhosts(node);
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
   * Forgets `hashes[from..]` on `nodeId`. (A speculative insert the node turned out not to hold is
   * undone by {@link rollback}, which also takes back what it evicted.)
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
    // The ghosts are older still: those touched no later are gone from the node too.
    while (node.ghostHead !== NONE && seqOf(this.eValue[node.ghostHead]!) <= seq) this.dropGhost(node, node.ghostHead);
    this.trimGhosts(node);
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

  /** Entries evicted for capacity so far (not counting those forgotten on a node's evidence, nor those a rollback took back). */
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

  /** Unconfirmed entries of a node (inserted by requests it has not accepted yet) and its ghosts, for tests. */
  speculationOf(nodeId: string): { unconfirmed: number; unconfirmedBlocks: number; ghosts: number; ghostBlocks: number } {
    const n = this.nodes.get(nodeId);
    return {
      unconfirmed: n?.specCount ?? 0,
      unconfirmedBlocks: n?.specWeight ?? 0,
      ghosts: n?.ghostCount ?? 0,
      ghostBlocks: n?.ghostWeight ?? 0,
    };
  }

  /**
   * Inserts the part of `hashes` the node can hold (see {@link insert}), last to first, then evicts
   * to the node's capacity. Speculative: new entries are unconfirmed, claimed by this request, and
   * so are unconfirmed entries it touches (their first claimed block is left in
   * {@link claimedFrom}); else every entry it touches is confirmed. Returns how many blocks went in.
   */
  private put(node: NodeBlocks, hashes: readonly string[], speculative: boolean): number {
    const to = this.fitting(node, hashes.length);
    let from = to;
    for (let i = to - 1; i >= 0; i--) {
      const weight = blockWeight(i);
      const value = pack(++this.seq, weight);
      const block = this.blockOf(hashes[i]!, true);
      let e = this.entryOf(node.slot, block);
      if (e !== NONE) {
        const claims = this.eClaims[e]!;
        if (claims > 0) {
          if (!speculative || claims === MAX_CLAIMS) {
            this.unclaim(node, e);
          } else {
            this.eClaims[e] = claims + 1;
            node.specWeight += weight - weightOf(this.eValue[e]!);
            from = i;
          }
        }
        // A touch: most recently used now (its size is the new one, `held` unchanged, as always).
        this.eValue[e] = value;
        if (e !== node.tail) {
          this.unlinkLru(node, e);
          this.appendLru(node, e);
        }
        continue;
      }
      // Back on the node: if it was a ghost there, that ghost becomes the entry (already a holder).
      e = node.ghostCount > 0 ? this.entryOf(node.ghostSlot, block) : NONE;
      if (e !== NONE) {
        this.unlinkGhost(node, e);
      } else {
        e = this.newEntry();
        this.eBlock[e] = block;
        this.eSibling[e] = this.bFirst[block]!;
        this.bFirst[block] = e;
      }
      this.eNode[e] = node.slot;
      this.eValue[e] = value;
      this.appendLru(node, e);
      node.count++;
      node.held += weight;
      this.entries++;
      if (speculative) {
        this.eClaims[e] = 1;
        node.specCount++;
        node.specWeight += weight;
        from = i;
      }
    }
    this.claimedFrom = from;
    this.evict(node);
    return to;
  }

  /** How many blocks of a prompt of `length` the node can hold: its capacity in base blocks, its share of the cap in entries. */
  private fitting(node: NodeBlocks, length: number): number {
    const limit = Math.min(length, node.entryLimit);
    if (baseBlocksBefore(limit) <= node.capacityBlocks) return limit;
    let k = 0;
    for (let weight = 0; k < limit && weight + blockWeight(k) <= node.capacityBlocks; k++) weight += blockWeight(k);
    return k;
  }

  /** The entry is no longer unconfirmed: confirmed, or about to be forgotten. */
  private unclaim(node: NodeBlocks, e: number): void {
    this.eClaims[e] = 0;
    node.specCount--;
    node.specWeight -= weightOf(this.eValue[e]!);
  }

  /**
   * Takes back the node's most recently evicted ghosts, newest first, while they fit in `budget`
   * base blocks (what a rollback freed) and in the node's capacity and share of the cap. They go
   * to the old end of the node's LRU list, each older than the last.
   */
  private restoreGhosts(node: NodeBlocks, budget: number): void {
    let left = budget;
    for (let e = node.ghostTail; e !== NONE; e = node.ghostTail) {
      const weight = weightOf(this.eValue[e]!);
      if (weight > left || node.held + weight > node.capacityBlocks || node.count >= node.entryLimit) break;
      left -= weight;
      this.unlinkGhost(node, e);
      this.eNode[e] = node.slot;
      this.prependLru(node, e);
      node.count++;
      node.held += weight;
      this.entries++;
      // Its eviction is undone.
      this.evictedEntries--;
    }
  }

  /** Turns an entry the node's LRU evicts into a ghost: off its LRU list, onto the new end of its ghost list, still its block's holder. */
  private toGhost(node: NodeBlocks, e: number): void {
    this.unlinkLru(node, e);
    node.count--;
    node.held -= weightOf(this.eValue[e]!);
    this.entries--;
    this.eNode[e] = node.ghostSlot;
    this.ePrev[e] = node.ghostTail;
    this.eNext[e] = NONE;
    if (node.ghostTail === NONE) node.ghostHead = e;
    else this.eNext[node.ghostTail] = e;
    node.ghostTail = e;
    node.ghostCount++;
    node.ghostWeight += weightOf(this.eValue[e]!);
  }

  private unlinkGhost(node: NodeBlocks, e: number): void {
    const prev = this.ePrev[e]!;
    const next = this.eNext[e]!;
    if (prev === NONE) node.ghostHead = next;
    else this.eNext[prev] = next;
    if (next === NONE) node.ghostTail = prev;
    else this.ePrev[next] = prev;
    node.ghostCount--;
    node.ghostWeight -= weightOf(this.eValue[e]!);
  }

  private dropGhost(node: NodeBlocks, e: number): void {
    this.unlinkGhost(node, e);
    this.unlinkHolder(e);
    this.releaseEntry(e);
  }

  /**
   * Bounds a node's ghosts by what rollbacks could take back, dropping the oldest first: no more
   * base blocks than its unconfirmed entries hold (a rollback takes back at most what it frees),
   * and no more entries than its share of the cap could hold beside its confirmed ones. So the
   * ghosts of all nodes never outnumber the cap, and none are kept once nothing is in flight.
   */
  private trimGhosts(node: NodeBlocks): void {
    const room = node.entryLimit - (node.count - node.specCount);
    while (node.ghostHead !== NONE && (node.ghostWeight > node.specWeight || node.ghostCount > room)) this.dropGhost(node, node.ghostHead);
  }

  private newNodeSlot(): number {
    const slot = this.freeNodes.pop() ?? this.nodeTop++;
    if (slot >= this.mark.length) this.mark = grow(this.mark, Math.max(64, 2 * this.mark.length));
    return slot;
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

  /** The slot of block `k` of joined hashes (16 characters each), NONE if unknown. */
  private blockAt(chain: string, k: number): number {
    const at = k * HASH_HEX_CHARS;
    if (!parseHexAt(chain, at)) return this.blockOf(chain.slice(at, at + HASH_HEX_CHARS), false);
    const { table, bHi, bLo } = this;
    const mask = table.length - 1;
    if (mask < 0) return NONE;
    for (let t = this.home(keyHi, keyLo) & mask; ; t = (t + 1) & mask) {
      const b = table[t]!;
      if (b === NONE || (bHi[b] === keyHi && bLo[b] === keyLo)) return b;
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
    } else {
      if (this.entryTop === this.entrySlots) {
        const n = this.grownSlots(this.entrySlots);
        this.eBlock = grow(this.eBlock, n);
        this.eNode = grow(this.eNode, n);
        this.ePrev = grow(this.ePrev, n);
        this.eNext = grow(this.eNext, n);
        this.eSibling = grow(this.eSibling, n);
        this.eValue = grow(this.eValue, n);
        this.eClaims = grow(this.eClaims, n);
        this.entrySlots = n;
      }
      e = this.entryTop++;
    }
    this.eClaims[e] = 0;
    return e;
  }

  /** The node's entry for a block, or NONE: a walk of the block's holders. */
  private entryOf(nodeSlot: number, block: number): number {
    if (block === NONE) return NONE;
    let e = this.bFirst[block]!;
    while (e !== NONE && this.eNode[e] !== nodeSlot) e = this.eSibling[e]!;
    return e;
  }

  private prependLru(node: NodeBlocks, e: number): void {
    this.ePrev[e] = NONE;
    this.eNext[e] = node.head;
    if (node.head === NONE) node.tail = e;
    else this.ePrev[node.head] = e;
    node.head = e;
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
    node.specCount = 0;
    node.specWeight = 0;
    while (node.ghostHead !== NONE) this.dropGhost(node, node.ghostHead);
  }

  /**
   * Drops least recently used blocks until the node is within its capacity and its share of
   * entries, keeping the confirmed ones as ghosts while the node has unconfirmed entries.
   */
  private evict(node: NodeBlocks): void {
    while ((node.held > node.capacityBlocks || node.count > node.entryLimit) && node.head !== NONE) {
      const e = node.head;
      if (node.specCount > 0 && this.eClaims[e] === 0) this.toGhost(node, e);
      else this.forgetEntry(node, e);
      this.evictedEntries++;
    }
    this.trimGhosts(node);
  }

  private forgetEntry(node: NodeBlocks, e: number): void {
    if (this.eClaims[e]! > 0) this.unclaim(node, e);
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
