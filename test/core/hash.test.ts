import { describe, expect, it } from "vitest";
import { hashBlock, hashToHex, seedHash } from "../../src/core/hash.ts";
import { DEFAULT_PREFIX_SETTINGS, hashCanonicalText, prefixKey } from "../../src/core/prefix.ts";

const settings = { ...DEFAULT_PREFIX_SETTINGS, blockChars: 8 };

describe("chained block hashing", () => {
  it("is stable: same text and seed, same hashes (pinned values)", () => {
    const a = hashCanonicalText("The quick brown fox jumps over", "seed", settings);
    const b = hashCanonicalText("The quick brown fox jumps over", "seed", settings);
    expect(a.hashes).toEqual(b.hashes);
    expect(a.hashes).toHaveLength(4);
    // Pinned so that an accidental change to the hash (which would orphan every index) fails here.
    expect(hashToHex(hashBlock(seedHash(""), "warmpath", 0, 8))).toMatchInlineSnapshot(`"d88855ee723e7d37"`);
    for (const h of a.hashes) expect(h).toMatch(/^[0-9a-f]{16}$/);
  });

  it("chains: a block's hash names the whole prefix up to it", () => {
    const base = hashCanonicalText("AAAAAAAABBBBBBBBCCCCCCCC", "s", settings).hashes;
    const sameTail = hashCanonicalText("XAAAAAAABBBBBBBBCCCCCCCC", "s", settings).hashes;
    // Only the first block differs in text, but every later hash changes with it.
    expect(sameTail[0]).not.toBe(base[0]);
    expect(sameTail[1]).not.toBe(base[1]);
    expect(sameTail[2]).not.toBe(base[2]);
    // A later difference keeps the earlier hashes.
    const lateChange = hashCanonicalText("AAAAAAAABBBBBBBBCCCCCCCX", "s", settings).hashes;
    expect(lateChange.slice(0, 2)).toEqual(base.slice(0, 2));
    expect(lateChange[2]).not.toBe(base[2]);
    // Identical blocks at different positions hash differently.
    const repeated = hashCanonicalText("AAAAAAAAAAAAAAAA", "s", settings).hashes;
    expect(repeated[0]).not.toBe(repeated[1]);
  });

  it("an extended prompt keeps every full block of the shorter one", () => {
    const short = hashCanonicalText("0123456789abcdef", "s", settings).hashes;
    const long = hashCanonicalText("0123456789abcdefghij", "s", settings).hashes;
    expect(long.slice(0, 2)).toEqual(short);
  });

  it("separates namespaces: same prompt, different tenant/model/salt, no shared hash", () => {
    const prompt = { kind: "chat" as const, messages: [{ role: "user", content: "x".repeat(4000) }] };
    const a = prefixKey(prompt, { model: "m", namespace: "tenant:a" }, DEFAULT_PREFIX_SETTINGS).hashes;
    const b = prefixKey(prompt, { model: "m", namespace: "tenant:b" }, DEFAULT_PREFIX_SETTINGS).hashes;
    const c = prefixKey(prompt, { model: "m2", namespace: "tenant:a" }, DEFAULT_PREFIX_SETTINGS).hashes;
    const d = prefixKey(prompt, { model: "m", namespace: "tenant:a", cacheSalt: "salt" }, DEFAULT_PREFIX_SETTINGS).hashes;
    const all = [a, b, c, d].flat();
    expect(new Set(all).size).toBe(all.length);
  });

  it("is bounded by max_blocks and estimates tokens from characters", () => {
    const key = hashCanonicalText("x".repeat(1000), "s", { blockChars: 8, maxBlocks: 10, charsPerToken: 4 });
    expect(key.hashes).toHaveLength(10);
    expect(key.promptChars).toBe(1000);
    expect(key.promptTokens).toBe(250);
    expect(key.blockTokens).toBe(2);
  });
});
