/**
 * The prefix index's hard memory bound at the scale of issue 13 (10^6 entries), in plain Node
 * (the workerd tests in test/core/prefix-index.test.ts check it at a small cap): filled well past
 * its cap, the index never holds more entries than the cap, and its arrays stay within
 * indexMemoryBound, under 50 MB. Behavioural, not a timing test.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { hashToHex } from "../../src/core/hash.ts";
import { indexMemoryBound, PrefixIndex } from "../../src/core/prefix-index.ts";

test("an index capped at 10^6 entries stays within its cap and its memory bound", () => {
  const cap = 1_000_000;
  const index = new PrefixIndex(cap);
  // 64 nodes whose capacities add up to twice the cap, so the cap is what binds.
  for (let n = 0; n < 64; n++) index.setNode(`node-${n}`, (2 * cap) / 64);
  let peak = 0;
  // 1.5x the cap in distinct 100-block prompts, then a few long ones (up to 2,048 blocks, some of weight 2 and 4).
  for (let i = 0; i < (1.5 * cap) / 100 + 40; i++) {
    const length = i < (1.5 * cap) / 100 ? 100 : 2048;
    const hashes = Array.from({ length }, (_, b) => hashToHex({ hi: i, lo: b }));
    index.insert(`node-${i % 64}`, hashes);
    peak = Math.max(peak, index.size);
    if (index.size > cap) assert.fail(`${index.size} entries after insert ${i}, over the cap of ${cap}`);
  }
  assert.ok(peak > 0.99 * cap, `the index filled (${peak} entries)`);
  assert.ok(index.evictions > 0.4 * cap);
  assert.ok(index.arrayBytes <= indexMemoryBound(cap), `${index.arrayBytes} bytes of arrays`);
  assert.ok(indexMemoryBound(cap) < 50e6);
});
