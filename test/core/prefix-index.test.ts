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
