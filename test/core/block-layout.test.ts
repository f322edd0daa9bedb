import { describe, expect, it } from "vitest";
import { BLOCKS_PER_DOUBLING, FINE_BLOCKS, baseBlocksBefore, blockWeight } from "../../src/core/block-layout.ts";
import { hashCanonicalText } from "../../src/core/prefix.ts";

describe("block layout: fixed blocks, then doubling", () => {
  it("keeps base-size blocks for the first FINE_BLOCKS, then doubles every BLOCKS_PER_DOUBLING", () => {
    expect(blockWeight(0)).toBe(1);
    expect(blockWeight(FINE_BLOCKS - 1)).toBe(1);
    expect(blockWeight(FINE_BLOCKS)).toBe(2);
    expect(blockWeight(FINE_BLOCKS + BLOCKS_PER_DOUBLING - 1)).toBe(2);
    expect(blockWeight(FINE_BLOCKS + BLOCKS_PER_DOUBLING)).toBe(4);
  });

  it("baseBlocksBefore is the running sum of the weights", () => {
    let sum = 0;
    for (let k = 0; k < FINE_BLOCKS + 5 * BLOCKS_PER_DOUBLING + 17; k++) {
      expect(baseBlocksBefore(k)).toBe(sum);
      sum += blockWeight(k);
    }
  });

  it("keeps every block within 1/BLOCKS_PER_DOUBLING of its position past the fine blocks", () => {
    for (let k = FINE_BLOCKS; k < FINE_BLOCKS + 8 * BLOCKS_PER_DOUBLING; k++) {
      expect(blockWeight(k) / baseBlocksBefore(k)).toBeLessThanOrEqual(1 / BLOCKS_PER_DOUBLING);
    }
  });

  it("hashes a 1M-token prompt in about 1,500 blocks, and a prefix shared to 300k tokens matches that deep", () => {
    const settings = { blockChars: 512, maxBlocks: 2048, charsPerToken: 4 };
    const shared = "a".repeat(1_200_000) + "b".repeat(1_200_000); // 600k tokens, not periodic at block size
    const a = hashCanonicalText(shared + "x".repeat(1_600_000), "s", settings);
    const b = hashCanonicalText(shared.slice(0, 1_200_000) + "c".repeat(2_800_000), "s", settings);
    expect(a.hashes.length).toBeGreaterThan(1400);
    expect(a.hashes.length).toBeLessThan(1600);
    let common = 0;
    while (a.hashes[common] === b.hashes[common]) common++;
    // The shared 1,200,000 characters are matched to within one block (0.4%) of their length.
    const matchedChars = baseBlocksBefore(common) * 512;
    expect(matchedChars).toBeLessThanOrEqual(1_200_000);
    expect(matchedChars).toBeGreaterThan(1_200_000 * (1 - 1 / BLOCKS_PER_DOUBLING));
  });
});
