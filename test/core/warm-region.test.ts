import { describe, expect, it } from "vitest";
import { LONG_PREFIX_TOKENS } from "../../src/core/region/long-prefixes.ts";
import { WARM_MIN_GAIN_MS, heldTokens, warmestRegion, type WarmOption } from "../../src/core/warm-region.ts";

const hashes = Array.from({ length: 40 }, (_, i) => `h${i}`.padEnd(16, "0"));
const digest = (entries: Array<[number, number]>) => new Map(entries.map(([i, tokens]) => [hashes[i]!, tokens]));
const option = (roundTripMs: number | undefined, d?: Map<string, number>, rate = 10_000): WarmOption => ({
  roundTripMs,
  digest: d,
  prefillTokensPerSecond: rate,
});

describe("heldTokens", () => {
  it("is the deepest checkpoint of the prompt in the digest", () => {
    expect(
      heldTokens(
        hashes,
        digest([
          [5, 4_096],
          [20, 16_384],
          [39, 20_000],
        ]),
      ),
    ).toBe(20_000);
    expect(
      heldTokens(
        hashes.slice(0, 25),
        digest([
          [5, 4_096],
          [20, 16_384],
          [39, 20_000],
        ]),
      ),
    ).toBe(16_384);
    expect(heldTokens(hashes, undefined)).toBe(0);
  });
});

describe("warmestRegion", () => {
  const far = digest([[39, 40_000]]); // 4 s of prefill at 10,000 tokens/s

  it("sends a long prompt to the farther region that holds its prefix when the saving beats the round trip", () => {
    const choice = warmestRegion([option(10, new Map()), option(90, far)], hashes, 41_000);
    expect(choice).toEqual({ index: 1, heldTokens: 40_000, nearestHeldTokens: 0, savedMs: 4_000, extraRoundTripMs: 80 });
  });

  it("keeps the nearest region for a short prompt, without looking anything up", () => {
    expect(warmestRegion([option(10, new Map()), option(90, far)], hashes, LONG_PREFIX_TOKENS - 1)).toBeUndefined();
  });

  it("keeps the nearest region when it holds as much, or when the saving does not clear the margin", () => {
    expect(warmestRegion([option(10, far), option(90, far)], hashes, 41_000)).toBeUndefined();
    // 500 tokens more: 50 ms saved, against 2 x 80 ms + 50 ms.
    expect(warmestRegion([option(10, digest([[39, 39_500]])), option(90, far)], hashes, 41_000)).toBeUndefined();
    // A fast far region saves less per token held: 4,000 tokens at 20,000 tokens/s are 200 ms.
    expect(warmestRegion([option(10, new Map()), option(90, digest([[39, 4_000]]), 20_000)], hashes, 41_000)).toBeUndefined();
    expect(WARM_MIN_GAIN_MS).toBeGreaterThan(0);
  });

  it("makes no trade-off without the client's round trips, or without a digest", () => {
    expect(warmestRegion([option(undefined, new Map()), option(undefined, far)], hashes, 41_000)).toBeUndefined();
    expect(warmestRegion([option(10, new Map()), option(90)], hashes, 41_000)).toBeUndefined();
  });

  it("picks the region with the largest net gain", () => {
    const choice = warmestRegion(
      [option(10, new Map()), option(200, digest([[39, 30_000]])), option(60, digest([[30, 25_000]]))],
      hashes,
      41_000,
    );
    expect(choice?.index).toBe(1); // 3,000 ms saved less 190 ms of extra round trip beats 2,500 less 50
  });
});
