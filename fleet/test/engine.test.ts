/**
 * The timing model under mocked time: every assertion is an exact simulated duration.
 */
import { test, mock, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { Engine, type EngineOptions, type PrefillInfo } from "../engine.ts";

beforeEach(() => mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 }));
afterEach(() => mock.timers.reset());

const BASE: EngineOptions = {
  kvCapacityTokens: 16_000,
  prefillTokensPerSecond: 1_000,
  decodeTokensPerSecond: 100,
  maxRunning: 4,
  timeFactor: 1,
  now: () => Date.now(),
};

/** Advances mocked time 1 ms at a time, so timers set by callbacks fire at their own instant. */
function tick(ms: number) {
  for (let i = 0; i < ms; i++) mock.timers.tick(1);
}

/** A request whose prompt is `blocks` full blocks (16 tokens each) plus `extra` tokens. */
function submit(e: Engine, prefix: string, blocks: number, completionTokens = 1, extra = 4) {
  const r = { prefill: undefined as PrefillInfo | undefined, tokens: [] as number[], done: -1 };
  const handle = e.submit({
    hashes: Array.from({ length: blocks }, (_, i) => `${prefix}${i}`),
    promptTokens: blocks * 16 + extra,
    completionTokens,
    onPrefilled: (info) => (r.prefill = info),
    onToken: () => r.tokens.push(Date.now()),
    onDone: () => (r.done = Date.now()),
  });
  return Object.assign(r, { handle });
}

test("prefill time is proportional to uncached tokens, scaled by the time factor", () => {
  const e = new Engine({ ...BASE, timeFactor: 10 });
  const cold = submit(e, "p", 62, 1, 8); // 1000 tokens at 1000 tok/s / 10 = 100 ms
  tick(99);
  assert.equal(cold.tokens.length, 0);
  tick(1);
  assert.deepEqual(cold.tokens, [100]);
  assert.equal(cold.prefill?.cachedTokens, 0);

  const warm = submit(e, "p", 62, 1, 8); // 992 tokens cached: 8 left = 0.8 ms
  tick(1);
  assert.equal(warm.prefill?.cachedTokens, 992);
  assert.equal(warm.done, 101);
  assert.equal(e.counters.prefixQueryTokens, 2000);
  assert.equal(e.counters.prefixHitTokens, 992);
});

test("an identical prompt never hits its last token (vLLM recomputes it)", () => {
  const e = new Engine(BASE);
  submit(e, "q", 4, 1, 0); // exactly 64 tokens, 4 full blocks
  tick(64);
  const again = submit(e, "q", 4, 1, 0);
  tick(100);
  assert.equal(again.prefill?.cachedTokens, 48, "the block holding the last token is recomputed");
});

test("decode streams one token per interval, concurrently across requests", () => {
  const e = new Engine(BASE); // 100 tok/s = 10 ms a token
  const a = submit(e, "a", 1, 3, 4); // 20 tokens -> 20 ms prefill
  const b = submit(e, "b", 1, 3, 4); // prefilled after a: 20..40 ms
  tick(200);
  assert.deepEqual(a.tokens, [20, 30, 40]);
  assert.deepEqual(b.tokens, [40, 50, 60], "b's prefill waited for a's (one at a time, FCFS)");
  assert.equal(b.prefill?.queuedMs, 20);
  assert.equal(e.counters.generationTokens, 6);
});

test("requests wait when every batch slot is taken, and start when one frees", () => {
  const e = new Engine({ ...BASE, maxRunning: 2 });
  const jobs = [submit(e, "a", 0, 5, 10), submit(e, "b", 0, 5, 10), submit(e, "c", 0, 5, 10)]; // 10 ms prefill, 40 ms more decode
  assert.equal(e.numRunning, 2);
  assert.equal(e.numWaiting, 1);
  assert.equal(jobs[2]!.handle.state, "waiting");
  tick(49);
  assert.equal(jobs[0]!.done, -1);
  tick(1); // a finishes at 50 ms: c takes its slot
  assert.equal(jobs[0]!.done, 50);
  assert.equal(e.numWaiting, 0);
  tick(10);
  assert.deepEqual(jobs[2]!.tokens.slice(0, 1), [60], "c prefilled 50..60 ms");
  assert.equal(jobs[2]!.prefill?.queuedMs, 50);
});

test("a cancelled request frees its slot for the next waiting one", () => {
  const e = new Engine({ ...BASE, maxRunning: 1 });
  const a = submit(e, "a", 0, 50, 10);
  const b = submit(e, "b", 0, 1, 10);
  tick(15);
  a.handle.cancel();
  assert.equal(e.numRunning, 1);
  tick(10);
  assert.deepEqual(b.tokens, [25]);
  assert.equal(e.counters.cancelled, 1);
});

test("the head of the prefill queue waits while the KV pool is full of running requests", () => {
  const e = new Engine({ ...BASE, kvCapacityTokens: 16 * 10 });
  const a = submit(e, "a", 8, 10, 0); // 128 tokens: prefill 128 ms, decode 90 ms more
  const b = submit(e, "b", 8, 1, 0); // needs 8 blocks; only 2 free while a runs
  tick(200);
  assert.equal(b.prefill, undefined);
  tick(18); // a done at 218 ms
  assert.equal(a.done, 218);
  tick(128);
  assert.equal(b.done, 346);
  assert.equal(e.cache.matchLength(Array.from({ length: 8 }, (_, i) => `a${i}`)), 2, "b evicted a's tail first");
});

test("a new engine (a restarted node) has lost the cache", () => {
  const e = new Engine(BASE);
  submit(e, "r", 10, 1);
  tick(1000);
  e.stop();
  const fresh = new Engine(BASE);
  const r = submit(fresh, "r", 10, 1);
  tick(1000);
  assert.equal(r.prefill?.cachedTokens, 0);
});

test("the prefill slowdown multiplies each prefill's duration, as it stands when the prefill starts", () => {
  let slowdown = 10;
  const e = new Engine({ ...BASE, timeFactor: 10, prefillSlowdown: () => slowdown });
  const slow = submit(e, "s", 62, 1, 8); // 1000 tokens: 100 ms, x10 = 1000 ms
  const next = submit(e, "n", 62, 1, 8); // queued behind it: its prefill starts after the fault is gone
  tick(500);
  slowdown = 1;
  tick(499);
  assert.equal(slow.tokens.length, 0);
  tick(1);
  assert.deepEqual(slow.tokens, [1000]);
  assert.equal(slow.prefill?.prefillMs, 1000);
  tick(100);
  assert.deepEqual(next.tokens, [1100], "prefilled at the normal rate");
});
