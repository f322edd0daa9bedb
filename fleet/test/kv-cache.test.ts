import { test } from "node:test";
import assert from "node:assert/strict";
import { PrefixCache } from "../kv-cache.ts";

const chain = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}${i}`);

test("longest prefix: a block counts only while every block before it is held", () => {
  const c = new PrefixCache(16 * 10);
  const a = chain("a", 4);
  assert.equal(c.commit(a, 0), 4);
  c.release(a, 4);
  assert.equal(c.matchLength(a), 4);
  assert.equal(c.matchLength(["a0", "a1", "zz", "a3"]), 2, "stops at the first missing block");
  assert.equal(c.matchLength(["zz", "a1", "a2"]), 0, "later blocks are useless without the first");
  assert.equal(c.matchLength(a, 3), 3, "limit caps the lookup");
});

test("LRU eviction at capacity, evicting a finished request's tail before its head", () => {
  const c = new PrefixCache(16 * 6); // 6 blocks
  const a = chain("a", 4);
  c.commit(a, 0);
  c.release(a, 4);
  const b = chain("b", 4);
  assert.equal(c.commit(b, 0), 4, "room is made by evicting unpinned blocks");
  assert.equal(c.heldBlocks, 6);
  assert.equal(c.evictions, 2);
  // a's tail (a3, a2) went first, so a's first two blocks are still a usable prefix.
  assert.equal(c.matchLength(a), 2);
  c.release(b, 4);
  // a0/a1 are now least recently used: the next insert evicts them before b.
  c.commit(["c0", "c1"], 0);
  assert.equal(c.matchLength(a), 0);
  assert.equal(c.matchLength(b), 4);
});

test("blocks pinned by running requests are never evicted; usage counts pinned blocks only", () => {
  const c = new PrefixCache(16 * 4);
  const a = chain("a", 3);
  c.commit(a, 0); // pinned (running)
  assert.equal(c.usage(), 0.75);
  assert.equal(c.canAllocate(["x0", "x1"], 0, 2), false);
  assert.equal(c.commit(["x0", "x1"], 0), 1, "only one free block; the rest is not cached");
  assert.equal(c.matchLength(a), 3);
  c.release(a, 3);
  assert.equal(c.usage(), 0.25, "finished requests' blocks stay cached but are not usage");
  assert.equal(c.matchLength(a), 3);
  assert.equal(c.canAllocate(["x0", "x1"], 0, 3), true, "cached-but-free blocks are evictable");
});

test("shared blocks are reference counted", () => {
  const c = new PrefixCache(16 * 8);
  const a = chain("a", 2);
  c.commit(a, 0);
  c.pin(a, 2); // a second request hits both blocks
  c.release(a, 2);
  assert.equal(c.pinnedBlocks, 2, "still pinned by the first request");
  c.release(a, 2);
  assert.equal(c.pinnedBlocks, 0);
  c.clear();
  assert.equal(c.heldBlocks, 0);
});

test("a prefix-cache reset drops every unpinned block and keeps those running requests hold", () => {
  const c = new PrefixCache(16 * 10);
  const done = chain("d", 3);
  c.commit(done, 0);
  c.release(done, 3);
  const running = chain("r", 2);
  c.commit(running, 0);
  assert.equal(c.reset(), 3);
  assert.equal(c.matchLength(done), 0);
  assert.equal(c.matchLength(running), 2, "a running request's blocks survive the reset");
  c.release(running, 2);
  assert.equal(c.heldBlocks, 2);
});
