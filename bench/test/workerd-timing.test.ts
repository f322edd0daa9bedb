/**
 * bench/workerd/timing.ts: the arithmetic that turns whole-batch wall times into a cost per call.
 * Every workerd figure depends on it, so its subtraction and its batch sizing are checked on timings
 * whose answer is known (its medians and percentiles, src/core/stats.ts's, in test/core/stats.test.ts).
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { batchSizeFor, MAX_BATCH_CALLS, perCallFromBatches } from "../workerd/timing.ts";

describe("perCallFromBatches", () => {
  test("subtracts the empty batch's median overhead and divides by K", () => {
    // 1,000 calls of 20 µs = 20 ms of work, on top of 0.5 ms of request overhead.
    const r = perCallFromBatches([20.5, 20.5, 20.5], [0.5, 0.5, 0.5], 1_000);
    assert.equal(r.overheadMs, 0.5);
    assert.ok(Math.abs(r.medianUs - 20) < 1e-9);
    assert.ok(Math.abs(r.p99Us - 20) < 1e-9);
    assert.equal(r.k, 1_000);
    assert.equal(r.batches, 3);
  });

  test("one slow empty batch does not move the result (medians, not means)", () => {
    const r = perCallFromBatches([10.4, 10.6, 10.5], [0.5, 0.5, 9.0], 100);
    assert.equal(r.overheadMs, 0.5);
    assert.ok(Math.abs(r.medianUs - 100) < 1e-9);
  });

  test("a slow batch shows in the p99, not in the median", () => {
    const full = [...Array.from({ length: 99 }, () => 10.5), 60.5];
    const r = perCallFromBatches(full, [0.5], 1_000);
    assert.ok(Math.abs(r.medianUs - 10) < 1e-9);
    assert.ok(Math.abs(r.p99Us - 10) < 1e-9, "99 of 100 batches are fast: their 99th percentile is fast");
    const r2 = perCallFromBatches([...full, 60.5], [0.5], 1_000);
    assert.ok(Math.abs(r2.p99Us - 60) < 1e-9, "2 of 101 are slow: past the 99th percentile");
  });

  test("refuses what it cannot divide", () => {
    assert.throws(() => perCallFromBatches([1], [0], 0), RangeError);
    assert.throws(() => perCallFromBatches([], [0], 10), RangeError);
    assert.throws(() => perCallFromBatches([1], [], 10), RangeError);
  });
});

describe("batchSizeFor", () => {
  test("scales the calibration batch to the target duration, to two significant digits", () => {
    // 64 calls took 4 ms: 16 calls/ms, so 25 ms is 400 calls.
    assert.equal(batchSizeFor(4, 64, 25), 400);
    // 1,024 calls took 5.3 ms: 25 ms is 4,830 calls, shown as 4,800.
    assert.equal(batchSizeFor(5.3, 1_024, 25), 4_800);
  });

  test("stays within bounds: at least one call, at most MAX_BATCH_CALLS", () => {
    assert.equal(batchSizeFor(100, 1, 25), 1);
    assert.equal(batchSizeFor(1e-6, 1_000, 25), MAX_BATCH_CALLS);
    assert.equal(batchSizeFor(0, 10, 25), MAX_BATCH_CALLS);
  });
});
