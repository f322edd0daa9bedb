import { describe, expect, it } from "vitest";
import { PrefixIndex } from "../../src/core/prefix-index.ts";

const chain = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}${i}`.padEnd(16, "0"));

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
    expect(index.matchDepths(chain("p", 4), ["a"])).toEqual([2]);
    expect(index.matchDepths(chain("q", 4), ["a"])).toEqual([4]);
    // Touching p again makes q the older prompt.
    index.insert("a", chain("p", 4));
    expect(index.matchDepths(chain("q", 4), ["a"])).toEqual([2]);
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
