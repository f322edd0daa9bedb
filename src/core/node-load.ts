/**
 * The load model: a node's work ahead, measured in uncached prefill tokens.
 *
 * Request counts are a poor load signal for an LLM server: a node decoding thirty short answers
 * can start a new prefill almost at once, while a node that has just been sent one 100,000-token
 * cold prompt cannot start anything for seconds. What delays a new request's first token is the
 * prefill work queued ahead of it, so the router models each node as a FIFO prefill server:
 *
 * - at dispatch, the request's *uncached* tokens (prompt minus the believed cached prefix) are
 *   appended to the node's virtual backlog, which drains at the node's prefill rate;
 * - when the first byte of the answer comes back, the request's prefill is known to be done: the
 *   backlog is corrected by the difference between predicted and observed prefill end, and the
 *   node's prefill rate is re-estimated from requests that started on an empty backlog;
 * - the node's own load reports bound the model: a node reporting queued requests has at least
 *   that much work ahead, one reporting an empty queue cannot be far behind.
 *
 * Pure state: every method takes `now` (ms), so the same code runs in the Durable Object and in
 * the benchmark's simulated time.
 */

/** The last load report a node pushed. */
export interface LoadReport {
  running: number;
  waiting: number;
  /** KV cache usage, 0..1. */
  kvUsage: number;
  /** When the report was received (ms). */
  at: number;
}

/** Bounds on the learned prefill rate, relative to the configured one. */
const MIN_RATE_FACTOR = 0.1;
const MAX_RATE_FACTOR = 10;
/** Weight of a new sample in the prefill-rate and request-size moving averages. */
const EWMA_WEIGHT = 0.2;
/** Smallest uncached prefill (tokens) that is a trustworthy rate sample: shorter ones are dominated by network and scheduling latency. */
const MIN_RATE_SAMPLE_TOKENS = 2_000;

export class NodeLoad {
  /** Estimated prefill throughput, tokens per second. */
  prefillRate: number;
  /** When the modelled prefill backlog drains (ms). */
  private backlogEnd = 0;
  /** Requests dispatched by this router and not yet completed. */
  inflight = 0;
  /** Requests dispatched and still before their first byte. */
  prefilling = 0;
  /** Prompt tokens of the requests in flight: their KV footprint on the node. */
  activeTokens = 0;
  /** Moving average of uncached tokens per request, to price a reported queue. */
  private meanUncached: number;
  lastReport: LoadReport | undefined;

  private readonly configuredRate: number;

  constructor(configuredRate: number) {
    this.configuredRate = configuredRate;
    this.prefillRate = configuredRate;
    this.meanUncached = configuredRate / 4;
  }

  /** Uncached prefill tokens ahead of a request arriving now. */
  workAhead(now: number): number {
    return (Math.max(0, this.backlogEnd - now) * this.prefillRate) / 1000;
  }

  /** Seconds until a request with `uncachedTokens` of prefill would get its first token. */
  estimateTtftSeconds(now: number, uncachedTokens: number): number {
    return (this.workAhead(now) + uncachedTokens) / this.prefillRate;
  }

  /**
   * Credits a dispatch. Returns the modelled prefill start and end, which the caller keeps with
   * the request to correct the model when the first byte arrives.
   */
  dispatch(now: number, uncachedTokens: number, promptTokens: number): { startAt: number; prefillEnd: number } {
    const startAt = Math.max(now, this.backlogEnd);
    const prefillEnd = startAt + (uncachedTokens * 1000) / this.prefillRate;
    this.backlogEnd = prefillEnd;
    this.inflight++;
    this.prefilling++;
    this.activeTokens += promptTokens;
    this.meanUncached += EWMA_WEIGHT * (uncachedTokens - this.meanUncached);
    return { startAt, prefillEnd };
  }

  /**
   * The first byte of a dispatched request arrived at `now`: its prefill is done.
   * @param predicted the modelled start and end returned by {@link dispatch}
   */
  firstByte(
    now: number,
    dispatchedAt: number,
    predicted: { startAt: number; prefillEnd: number },
    uncachedTokens: number,
  ): void {
    this.prefilling = Math.max(0, this.prefilling - 1);
    // Everything queued behind this request shifts by the prediction error.
    const error = predicted.prefillEnd - now;
    if (this.backlogEnd > now) this.backlogEnd = Math.max(now, this.backlogEnd - error);
    if (this.prefilling === 0) this.backlogEnd = Math.min(this.backlogEnd, now);
    // A request that started on an empty backlog measures the node's prefill rate.
    const elapsed = now - dispatchedAt;
    if (predicted.startAt === dispatchedAt && uncachedTokens >= MIN_RATE_SAMPLE_TOKENS && elapsed > 0) {
      const sample = (uncachedTokens * 1000) / elapsed;
      const next = this.prefillRate + EWMA_WEIGHT * (sample - this.prefillRate);
      this.prefillRate = Math.min(
        this.configuredRate * MAX_RATE_FACTOR,
        Math.max(this.configuredRate * MIN_RATE_FACTOR, next),
      );
    }
  }

  /** A dispatched request finished (or failed) without a first byte having been seen. */
  releaseBeforeFirstByte(now: number, predicted: { prefillEnd: number }, uncachedTokens: number): void {
    this.prefilling = Math.max(0, this.prefilling - 1);
    // Its remaining prefill will not run: take it out of the backlog.
    const remainingMs = Math.min((uncachedTokens * 1000) / this.prefillRate, Math.max(0, predicted.prefillEnd - now));
    this.backlogEnd = Math.max(now, this.backlogEnd - remainingMs);
    if (this.prefilling === 0) this.backlogEnd = Math.min(this.backlogEnd, now);
  }

  /** A dispatched request of `promptTokens` completed. */
  complete(promptTokens: number): void {
    this.inflight = Math.max(0, this.inflight - 1);
    this.activeTokens = Math.max(0, this.activeTokens - promptTokens);
  }

  /**
   * Applies a load report: queued work this router did not send bounds the modelled backlog from below.
   *
   * Tuned with the benchmark (bench/RESULTS.md): the floor used to price *every* reported waiting
   * request at the moving-average request size. The router already models its own queued
   * requests exactly (it knows each one's uncached tokens), so re-pricing them at an average
   * only added error: on the Mooncake trace the modelled work ahead was off by ~11k tokens per
   * decision (~1 s of prefill) and heavy-load mean TTFT rose from 2.2 s to 4.7 s. Only when the node reports more waiting requests than this router has before their first byte
   * (another router's, or sent before a restart) does the floor apply: the router's model is
   * missing work, and the report is then the better evidence.
   */
  report(report: LoadReport): void {
    this.lastReport = report;
    if (report.waiting > this.prefilling) {
      const floorEnd = report.at + (report.waiting * this.meanUncached * 1000) / this.prefillRate;
      if (floorEnd > this.backlogEnd) this.backlogEnd = floorEnd;
    }
  }

  /** Forgets queued work (node restarted or was removed). */
  reset(now: number): void {
    this.backlogEnd = now;
    this.inflight = 0;
    this.prefilling = 0;
    this.activeTokens = 0;
  }
}
