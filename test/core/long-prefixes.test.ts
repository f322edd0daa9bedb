import { describe, expect, it } from "vitest";
import { DEFAULT_REGION_SETTINGS, RegionRouter } from "../../src/core/region/index.ts";
import { DIGEST_MAX_ENTRIES, LONG_PREFIX_TOKENS, LongPrefixes, checkpoints } from "../../src/core/region/long-prefixes.ts";
import { baseBlocksBefore } from "../../src/core/block-layout.ts";

const BLOCK_TOKENS = 128;
const chain = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}-${i}`.padEnd(16, "0"));

describe("checkpoints", () => {
  it("marks where a prompt first reaches 4k, 8k, 16k... tokens, and its last block", () => {
    const blocks = 200;
    const tokens = baseBlocksBefore(blocks) * BLOCK_TOKENS;
    const marks = checkpoints(blocks, tokens, BLOCK_TOKENS);
    expect(marks.at(-1)).toBe(blocks - 1);
    const depths = marks.slice(0, -1).map((i) => baseBlocksBefore(i + 1) * BLOCK_TOKENS);
    expect(depths[0]).toBeGreaterThanOrEqual(LONG_PREFIX_TOKENS);
    for (let k = 1; k < depths.length; k++) expect(depths[k]!).toBeGreaterThanOrEqual(2 * depths[k - 1]!);
    expect(marks.length).toBeLessThan(12);
  });

  it("has none for a prompt shorter than a long prefix", () => {
    expect(checkpoints(10, 1_280, BLOCK_TOKENS)).toEqual([]);
  });
});

describe("LongPrefixes", () => {
  it("keeps the most recently used checkpoints still held, bounded", () => {
    const lp = new LongPrefixes(BLOCK_TOKENS);
    for (let d = 0; d < 400; d++) lp.record(chain(`doc${d}`, 40), 40 * BLOCK_TOKENS);
    lp.record(chain("short", 10), 1_280); // never recorded
    const all = lp.digest(() => true);
    expect(all.length).toBe(DIGEST_MAX_ENTRIES);
    expect(all[0]!.hash.startsWith("doc399")).toBe(true);
    expect(all.some((e) => e.hash.startsWith("short"))).toBe(false);
    expect(lp.digest((h) => !h.startsWith("doc399")).some((e) => e.hash.startsWith("doc399"))).toBe(false);
  });
});

describe("RegionRouter.digest", () => {
  it("lists a long prompt it placed while a node holds it, and forgets it with the node", () => {
    const r = new RegionRouter({ ...DEFAULT_REGION_SETTINGS, name: "r", blockTokens: BLOCK_TOKENS });
    r.upsertNode({ id: "a", url: "http://a", models: ["m"], kvCapacityTokens: 1_000_000, static: false, lastSeen: 0 }, 0);
    const hashes = chain("doc", 60);
    const placed = r.route({ requestId: "1", model: "m", hashes, promptTokens: 60 * BLOCK_TOKENS }, 0);
    expect(placed.ok).toBe(true);
    const d = r.digest();
    expect(d.region).toBe("r");
    expect(d.prefillTokensPerSecond).toBe(DEFAULT_REGION_SETTINGS.prefillTokensPerSecond);
    expect(d.entries[0]).toEqual({ hash: hashes[59], tokens: 60 * BLOCK_TOKENS });
    r.removeNode("a");
    expect(r.digest().entries).toEqual([]);
  });
});
