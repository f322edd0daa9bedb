import { describe, expect, it } from "vitest";
import { loadExchangeName, shardKey, shardObjectName, shardOf } from "../../src/core/shard.ts";

const block = (i: number) => i.toString(16).padStart(16, "0");

describe("shardOf", () => {
  it("sends every prompt of an unsharded region, and a prompt without blocks, to shard 0", () => {
    expect(shardOf(block(7), 1)).toBe(0);
    expect(shardOf(undefined, 8)).toBe(0);
    expect(shardOf("", 8)).toBe(0);
  });

  it("is a function of the first block: every prefix has one shard, in range", () => {
    for (let i = 0; i < 200; i++) {
      const k = shardOf(block(i), 5);
      expect(k).toBeGreaterThanOrEqual(0);
      expect(k).toBeLessThan(5);
      expect(shardOf(block(i), 5)).toBe(k);
    }
  });

  it("spreads distinct first blocks evenly", () => {
    const counts = new Array<number>(4).fill(0);
    for (let i = 0; i < 4_000; i++) counts[shardOf(block(i * 7919), 4)]!++;
    for (const c of counts) expect(c).toBeGreaterThan(850); // 1,000 expected each
  });

  it("moves only the prefixes the new shard wins when a region grows (rendezvous, not modulo)", () => {
    let moved = 0;
    const n = 4_000;
    for (let i = 0; i < n; i++) {
      const before = shardOf(block(i), 4);
      const after = shardOf(block(i), 5);
      if (before !== after) {
        moved++;
        expect(after).toBe(4); // a prefix only ever moves to the new shard
      }
    }
    expect(moved / n).toBeGreaterThan(0.15);
    expect(moved / n).toBeLessThan(0.25); // 1/5 expected; a modulo would move ~4/5
  });
});

describe("shardKey and names", () => {
  it("takes the key block, or the last block of a shorter prompt", () => {
    expect(shardKey(["a", "b", "c"], 1)).toBe("a");
    expect(shardKey(["a", "b", "c"], 2)).toBe("b");
    expect(shardKey(["a", "b"], 4)).toBe("b");
    expect(shardKey([], 1)).toBeUndefined();
  });

  it("keeps the region's own object as shard 0 and names the others and the exchange apart", () => {
    expect(shardObjectName("us-east", 0)).toBe("us-east");
    expect(shardObjectName("us-east", 3)).toBe("us-east#shard-3");
    expect(loadExchangeName("us-east")).toBe("us-east#load");
  });
});
