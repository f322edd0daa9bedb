/**
 * Batch timing: how bench/workerd turns wall-clock times of whole batches into a cost per call.
 *
 * Inside workerd a script cannot time one call: Cloudflare freezes `Date.now()` and
 * `performance.now()` during synchronous execution (a Spectre mitigation; they move only on I/O),
 * and the local runtime that does let them move ticks in whole milliseconds. So the driver times
 * from outside: it asks the worker to run a batch of K calls and measures the request's wall time,
 * and subtracts the median wall time of an empty batch (K = 0: the same request, the same RPC, no
 * calls), which is the HTTP and dispatch overhead. Batches are sized to take tens of milliseconds,
 * so the overhead's jitter (tenths of a millisecond) is a small part of each measurement.
 *
 * Pure functions, no runtime dependency: the driver (Node) uses them, and bench/test checks them.
 * Medians and percentiles are src/core/stats.ts's, as every benchmark's.
 */

import { median, percentileOf } from "../../src/core/stats.ts";

/** Cost per call derived from batch timings. */
export interface PerCall {
  /** Median µs per call: (median full batch - median empty batch) / K. */
  medianUs: number;
  /** 99th percentile over batches of each batch's µs per call (its time less the empty median, over K). */
  p99Us: number;
  /** Median wall time of an empty batch, ms: the overhead subtracted. */
  overheadMs: number;
  /** Calls per batch. */
  k: number;
  /** Full batches timed. */
  batches: number;
}

/**
 * Per-call cost from the wall times (ms) of `full` batches of `k` calls each and of `empty`
 * batches (K = 0). The median is taken of the batch times, not of the per-batch quotients, so
 * one slow empty batch cannot move it; the p99 is that of the per-batch means, the tail a batch
 * of K calls sees (a garbage collection inside a batch shows there), not of single calls.
 */
export function perCallFromBatches(full: readonly number[], empty: readonly number[], k: number): PerCall {
  if (k <= 0) throw new RangeError("k must be positive");
  if (full.length === 0 || empty.length === 0) throw new RangeError("need at least one full and one empty batch");
  const overheadMs = median(empty);
  const perBatchUs = full.map((ms) => ((ms - overheadMs) * 1000) / k);
  return {
    medianUs: ((median(full) - overheadMs) * 1000) / k,
    p99Us: percentileOf(perBatchUs, 0.99),
    overheadMs,
    k,
    batches: full.length,
  };
}

/** Bounds on the calls per batch: at least one call, and never so many that one batch runs for seconds. */
export const MIN_BATCH_CALLS = 1;
export const MAX_BATCH_CALLS = 200_000;

/**
 * Calls per batch so that a batch takes about `targetMs`, from a calibration batch of `k` calls
 * that took `calibrationMs` (overhead already subtracted). Rounded to two significant digits so
 * the tables show readable batch sizes.
 */
export function batchSizeFor(calibrationMs: number, k: number, targetMs: number): number {
  if (!(calibrationMs > 0)) return MAX_BATCH_CALLS;
  const raw = (targetMs / calibrationMs) * k;
  const magnitude = 10 ** Math.max(0, Math.floor(Math.log10(Math.max(1, raw))) - 1);
  const rounded = Math.round(raw / magnitude) * magnitude;
  return Math.min(MAX_BATCH_CALLS, Math.max(MIN_BATCH_CALLS, rounded));
}
