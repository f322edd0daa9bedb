import { describe, expect, it } from "vitest";
import { DEFAULT_PREFIX_SETTINGS } from "../../src/core/prefix.ts";
import { DEFAULT_MAX_INDEX_ENTRIES, GROWTH_SLACK, indexMemoryBound, PrefixIndex } from "../../src/core/prefix-index.ts";

const chain = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}${i}`.padEnd(16, "0"));
/** Like chain, without collisions for long chains (chain's "x1" and "x10" pad to the same key). */
const longChain = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}:${String(i).padStart(5, "0")}`.padEnd(16, "0"));

describe("PrefixIndex", () => {
  it("finds the longest believed prefix per node", () => {
    const index = new PrefixIndex();
    index.setNode("a", 100);
    index.setNode("b", 100);
    index.insert("a", chain("x", 5));
    index.insert("b", chain("x", 2));
    expect(index.matchDepths(chain("x", 8), ["a", "b", "c"])).toEqual([5, 2, 0]);
    expect(index.matchDepths(chain("y", 8), ["a", "b"])).toEqual([0, 0]);
  });

  it("forgets least recently used blocks at a node's capacity, tail first", () => {
    const index = new PrefixIndex();
    index.setNode("a", 6);
    index.insert("a", chain("p", 4));
    index.insert("a", chain("q", 4)); // 8 blocks > 6: p's two last blocks go first
    expect(index.blocksOf("a")).toBe(6);
    expect(index.evictions).toBe(2);
    expect(index.matchDepths(chain("p", 4), ["a"])).toEqual([2]);
    expect(index.matchDepths(chain("q", 4), ["a"])).toEqual([4]);
    // Touching p again makes q the older prompt.
    index.insert("a", chain("p", 4));
    expect(index.matchDepths(chain("q", 4), ["a"])).toEqual([2]);
  });

  it("resizes a batch of nodes at once: a shrink evicts, a growth forgets nothing back, unknown ids are ignored", () => {
    const index = new PrefixIndex();
    index.setNode("a", 8);
    index.setNode("b", 8);
    index.insert("a", chain("p", 4));
    index.insert("a", chain("q", 4));
    index.insert("b", chain("r", 8));
    index.resizeNodes([
      ["a", 4.9],
      ["b", 8],
      ["gone", 100],
    ]);
    expect(index.capacityOf("a")).toBe(4);
    expect(index.capacityOf("gone")).toBe(0);
    expect(index.matchDepths(chain("p", 4), ["a"])).toEqual([0]);
    expect(index.matchDepths(chain("q", 4), ["a"])).toEqual([4]);
    expect(index.matchDepths(chain("r", 8), ["b"])).toEqual([8]);
    index.resizeNodes([["a", 8]]);
    expect(index.matchDepths(chain("p", 4), ["a"])).toEqual([0]);
    expect(index.blocksOf("a")).toBe(4);
  });

  it("counts a long prompt's deep blocks by the base blocks they span", () => {
    const index = new PrefixIndex();
    // 1,024 blocks: 512 of weight 1, 256 of weight 2, 256 of weight 4 = 2,048 base blocks.
    index.setNode("a", 3000);
    index.insert("a", longChain("long", 1024));
    expect(index.blocksOf("a")).toBe(512 + 256 * 2 + 256 * 4);
    // Another 1,024-block prompt overflows the 3,000-base-block capacity: the first prompt's tail
    // (its heavy blocks) goes first, by weight, not by count.
    index.insert("a", longChain("other", 1024));
    expect(index.blocksOf("a")).toBeLessThanOrEqual(3000);
    const [depth] = index.matchDepths(longChain("long", 1024), ["a"]);
    expect(depth).toBeGreaterThan(512);
    expect(depth).toBeLessThan(1024);
  });

  it("holds a hard memory bound across nodes, shared in proportion to capacity", () => {
    const index = new PrefixIndex(100);
    index.setNode("big", 1000);
    index.setNode("small", 250);
    for (let i = 0; i < 50; i++) {
      index.insert("big", chain(`b${i}-`, 10));
      index.insert("small", chain(`s${i}-`, 10));
    }
    expect(index.size).toBeLessThanOrEqual(100);
    expect(index.blocksOf("big")).toBe(80);
    expect(index.blocksOf("small")).toBe(20);
  });

  it("never holds more entries than its cap, however far past it the traffic goes", () => {
    const cap = 5_000;
    const index = new PrefixIndex(cap);
    // Nodes whose KV capacities add up to 12x the cap, added while the index is filling.
    index.setNode("a", 20_000);
    index.setNode("b", 10_000);
    const hex = (n: number) => n.toString(16).padStart(16, "0");
    let next = 0;
    let peak = 0;
    for (let i = 0; i < 2_000; i++) {
      if (i === 300) index.setNode("c", 30_000);
      if (i === 900) index.setNode("b", 5_000);
      // Mostly new prompts (up to 600 blocks, some of weight 2), some repeated, some sharing a head.
      const length = 1 + ((i * 37) % 600);
      const start = i % 7 === 0 ? 0 : next;
      const hashes = Array.from({ length }, (_, b) => hex(start + b));
      next += length;
      index.insert(["a", "b", "c"][i % 3]!, hashes);
      peak = Math.max(peak, index.size);
      expect(index.size).toBeLessThanOrEqual(cap);
    }
    expect(peak).toBeGreaterThan(cap * 0.9);
    expect(index.evictions).toBeGreaterThan(10 * cap);
    // The memory bound: the arrays never grew past the cap plus one prompt's blocks.
    expect(index.arrayBytes).toBeLessThanOrEqual(indexMemoryBound(cap));
  });

  it("states a memory bound within a Durable Object's 128 MB at 10^6 entries", () => {
    // The bound assumes one insert adds at most GROWTH_SLACK entries: a prompt's most blocks.
    expect(GROWTH_SLACK).toBeGreaterThanOrEqual(DEFAULT_PREFIX_SETTINGS.maxBlocks);
    expect(indexMemoryBound(DEFAULT_MAX_INDEX_ENTRIES)).toBeLessThan(16 * 2 ** 20);
    expect(indexMemoryBound(1_000_000)).toBeLessThan(50e6);
  });

  it("removes and clears nodes completely", () => {
    const index = new PrefixIndex();
    index.setNode("a", 100);
    index.setNode("b", 100);
    index.insert("a", chain("z", 3));
    index.insert("b", chain("z", 3));
    index.clearNode("a");
    expect(index.matchDepths(chain("z", 3), ["a", "b"])).toEqual([0, 3]);
    index.removeNode("b");
    expect(index.size).toBe(0);
    expect(index.distinctBlocks).toBe(0);
    expect(index.hasNode("b")).toBe(false);
  });
});

describe("PrefixIndex: speculative inserts, confirmed or rolled back (issue 24)", () => {
  /** A speculative insert's claim (the joined hashes and the claimed blocks), to hand to confirm or rollback. */
  const speculate = (index: PrefixIndex, id: string, hashes: string[]) => {
    const { from, to } = index.speculate(id, hashes);
    return [hashes.join(""), from, to] as const;
  };

  it("a prompt larger than the node is inserted from its start as far as it fits, not whole", () => {
    const index = new PrefixIndex();
    index.setNode("a", 10);
    index.insert("a", longChain("p", 4));
    index.insert("a", longChain("big", 30));
    expect(index.matchDepths(longChain("big", 30), ["a"])).toEqual([10]);
    // Only what the node held went out for it, not 20 of its own blocks as well.
    expect(index.evictions).toBe(4);
    expect(index.speculate("a", longChain("big2", 30))).toEqual({ from: 0, to: 10 });
    // Deep blocks weigh more: 600 blocks of a long prompt on a node of 520 base blocks are its first 516 blocks (512 + 4 x 2).
    index.setNode("b", 520);
    expect(index.speculate("b", longChain("long", 600))).toEqual({ from: 0, to: 516 });
    expect(index.blocksOf("b")).toBe(520);
  });

  it("a rollback forgets what the request added and takes back what its insert evicted", () => {
    const index = new PrefixIndex();
    index.setNode("a", 30);
    index.insert("a", longChain("w", 22));
    const huge = speculate(index, "a", longChain("huge", 1_000));
    expect(huge.slice(1)).toEqual([0, 30]);
    expect(index.matchDepths(longChain("w", 22), ["a"])).toEqual([0]);
    expect(index.speculationOf("a")).toMatchObject({ unconfirmed: 30, ghosts: 22 });
    index.rollback("a", ...huge);
    expect(index.blocksOf("a")).toBe(22);
    expect(index.matchDepths(longChain("w", 22), ["a"])).toEqual([22]);
    expect(index.matchDepths(longChain("huge", 1_000), ["a"])).toEqual([0]);
    expect(index.speculationOf("a")).toEqual({ unconfirmed: 0, unconfirmedBlocks: 0, ghosts: 0, ghostBlocks: 0 });
  });

  it("a confirmed request's evictions stand, and no ghost is kept once nothing is in flight", () => {
    const index = new PrefixIndex();
    index.setNode("a", 10);
    index.insert("a", longChain("x", 6));
    const y = speculate(index, "a", longChain("y", 6));
    expect(index.speculationOf("a")).toMatchObject({ unconfirmed: 6, ghosts: 2 });
    index.confirm("a", ...y);
    expect(index.speculationOf("a")).toEqual({ unconfirmed: 0, unconfirmedBlocks: 0, ghosts: 0, ghostBlocks: 0 });
    index.rollback("a", ...y); // too late: confirmed
    expect(index.matchDepths(longChain("y", 6), ["a"])).toEqual([6]);
    expect(index.matchDepths(longChain("x", 6), ["a"])).toEqual([4]);
  });

  it("with requests in flight together, the LRU is as if the rolled-back request had never been sent", () => {
    const index = new PrefixIndex();
    index.setNode("a", 10);
    index.insert("a", longChain("x", 4)); // the oldest
    index.insert("a", longChain("y", 4));
    const a = speculate(index, "a", longChain("A", 4)); // evicts x's last two blocks
    const b = speculate(index, "a", longChain("B", 2)); // evicts x's first two: they would have stayed but for A
    expect(index.matchDepths(longChain("x", 4), ["a"])).toEqual([0]);
    index.confirm("a", ...b); // B's first byte before A's refusal
    index.rollback("a", ...a);
    // x, y, B: 10 blocks, as without A. (A record of what A's own insert evicted would bring back
    // x's last two blocks without its first two: a prefix of 0.)
    expect(index.matchDepths(longChain("x", 4), ["a"])).toEqual([4]);
    expect(index.matchDepths(longChain("B", 2), ["a"])).toEqual([2]);
    expect(index.blocksOf("a")).toBe(10);
    // And in LRU order: x is still the oldest, its tail first.
    index.insert("a", longChain("z", 1));
    expect(index.matchDepths(longChain("x", 4), ["a"])).toEqual([3]);
    expect(index.matchDepths(longChain("y", 4), ["a"])).toEqual([4]);
  });

  it("a rollback forgets only what no other request in flight still claims", () => {
    const index = new PrefixIndex();
    index.setNode("a", 100);
    const first = speculate(index, "a", longChain("p", 5));
    const second = speculate(index, "a", longChain("p", 7)); // the same prefix and two blocks more
    expect(second.slice(1)).toEqual([0, 7]); // it claims the first's unconfirmed blocks too
    index.rollback("a", ...first);
    expect(index.matchDepths(longChain("p", 7), ["a"])).toEqual([7]);
    index.rollback("a", ...second);
    expect(index.matchDepths(longChain("p", 7), ["a"])).toEqual([0]);
    expect(index.size).toBe(0);
    // One confirmed: the other's rollback leaves it.
    const third = speculate(index, "a", longChain("q", 5));
    const fourth = speculate(index, "a", longChain("q", 5));
    index.confirm("a", ...fourth);
    index.rollback("a", ...third);
    expect(index.matchDepths(longChain("q", 5), ["a"])).toEqual([5]);
    // A confirmed prefix is claimed by no one: a speculative request on it claims only its new blocks.
    expect(index.speculate("a", longChain("q", 8))).toEqual({ from: 5, to: 8 });
  });

  it("ghosts go with what the node is found to have lost", () => {
    const index = new PrefixIndex();
    index.setNode("a", 10);
    index.insert("a", longChain("x", 6));
    index.insert("a", longChain("y", 4));
    const seq = index.touchedAt("a", longChain("y", 4)[0]!)!;
    const z = speculate(index, "a", longChain("z", 4)); // evicts x's last 4 blocks
    // The node reports it lost y (and so everything older): x's ghosts are gone too.
    index.forgetOlderThan("a", seq);
    expect(index.speculationOf("a").ghosts).toBe(0);
    index.rollback("a", ...z);
    expect(index.blocksOf("a")).toBe(0);
    // A cleared node (a restart) keeps no ghosts either.
    index.insert("a", longChain("x", 10));
    speculate(index, "a", longChain("w", 4));
    index.clearNode("a");
    expect(index.speculationOf("a")).toEqual({ unconfirmed: 0, unconfirmedBlocks: 0, ghosts: 0, ghostBlocks: 0 });
  });

  it("keeps no more ghosts than its unconfirmed blocks could free, and stays within its cap", () => {
    const index = new PrefixIndex(50);
    index.setNode("a", 40);
    index.setNode("b", 60); // entry limits 20 and 30
    index.insert("a", longChain("x", 20));
    const small = speculate(index, "a", longChain("s", 3));
    expect(index.speculationOf("a")).toMatchObject({ unconfirmed: 3, ghosts: 3 });
    // More confirmed traffic while it is in flight: still 3 ghosts, the most recently evicted.
    index.insert("a", longChain("y", 10));
    expect(index.speculationOf("a")).toMatchObject({ unconfirmed: 3, ghosts: 3 });
    index.rollback("a", ...small);
    expect(index.size).toBeLessThanOrEqual(50);
    expect(index.blocksOf("a")).toBe(20);
    expect(index.matchDepths(longChain("x", 20), ["a"])).toEqual([10]); // x's first 10 blocks: 3 of them taken back
  });
});
