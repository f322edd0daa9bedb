/**
 * The load model: a node's work ahead, measured in uncached prefill tokens.
 *
 * Request counts are a poor load signal for an LLM server: a node decoding thirty short answers
 * can start a new prefill almost at once, while a node that has just been sent one 100,000-token
 * cold prompt cannot start anything for seconds. What delays a new request's first token is the
 * prefill work queued ahead of it, so the router models each node as a FIFO prefill server:
 *
 * - at dispatch, the request's *uncached* tokens (prompt minus the believed cached prefix) join
 *   the node's queue of requests before their first byte;
 * - the head of that queue started its prefill when the previous first byte came back (or at its
 *   dispatch, if later), so its progress is known; what is ahead of a new request is the rest of
 *   the head's prefill plus every queued request's uncached tokens;
 * - when the first byte of an answer comes back, its request leaves the queue, and its measured
 *   prefill time re-estimates the node's prefill rate;
 * - the node's own load reports bound the model when they show work this router did not send;
 * - a node that runs at most `maxRunning` requests at once (its engine's `max_num_seqs`, SGLang's
 *   `max_running_requests`, llama.cpp's `--parallel` slots), when that is known, starts a request
 *   only once one of those it runs has finished: while this router has that many in flight there,
 *   a new request also waits for completions ({@link NodeLoad.slotWaitMs}).
 *
 * Why an explicit queue (bench/RESULTS.md; `npm run bench`): a single virtual "backlog end"
 * time, corrected at each first byte by the prediction error, is exact only for exact
 * predictions. When a prefill overruns, such a backlog drains in the model while the node is
 * still busy, new dispatches are rebased on "now", and the later correction double-counts the
 * overrun. Keeping the queue explicitly (requests are known to the caller anyway) costs one Map
 * entry per request before its first byte and makes the model exact for a router that sends all
 * of a node's traffic, and robust when prefill times are noisy.
 *
 * Pure state: every method takes `now` (ms), so the same code runs in the Durable Object and in
 * the benchmark's simulated time.
 */

import { PrefillRate, type RateEvidence } from "./prefill-rate.ts";
import { expectedResidual } from "./residual.ts";
import { decay } from "./stats.ts";

/**
 * What one shard of a sharded region (src/core/shard.ts) tells the others about a node: the
 * uncached prefill it has queued there and its recent prefill (both in tokens).
 */
export interface ShardLoad {
  queued: number;
  recent: number;
  /** Its requests in flight on the node, for a node whose places are known ({@link NodeLoad.slotWaitMs}); absent: none said. */
  inflight?: number | undefined;
}

/** The last load report a node pushed. */
export interface LoadReport {
  running: number;
  waiting: number;
  /** KV cache usage, 0..1. */
  kvUsage: number;
  /** When the report was received (ms). */
  at: number;
}

/** Weight of a new sample in the request-size moving average. */
const EWMA_WEIGHT = 0.2;

/**
 * Weight of a new sample in the moving average of how long a request holds its place on the node
 * after its first byte (decoding): answers vary in length by orders of magnitude, so it averages
 * over the last ~20 rather than the last ~5.
 */
const DECODE_EWMA_WEIGHT = 0.05;

/**
 * Time constant of the node's recent prefill work (ms): long enough to see who has been given the
 * long sessions and cold prompts lately, short enough to forget a burst within minutes.
 */
export const RECENT_WORK_TAU_MS = 60_000;

/** What the model keeps per request before its first byte. */
interface Pending {
  dispatchedAt: number;
  uncachedTokens: number;
}

export class NodeLoad {
  /** Estimated prefill throughput, tokens per second. */
  prefillRate: number;
  /** Requests dispatched by this router and not yet completed. */
  inflight = 0;
  /** Requests dispatched and still before their first byte. */
  prefilling = 0;
  /** Prompt tokens of the requests in flight: their KV footprint on the node. */
  activeTokens = 0;
  /** Moving average of uncached tokens per request, to price a reported queue. */
  private meanUncached: number;
  lastReport: LoadReport | undefined;
  /**
   * The most requests the node runs at once (prefill and decode), when its configuration or its
   * reports say; undefined: not known, and no wait for a place is modelled.
   */
  maxRunning: number | undefined;
  /** Moving average of how long a request ran after its first byte (ms); undefined before the first such completion. */
  meanDecodeMs: number | undefined;
  /** Bumped by {@link reset} (the node restarted): requests dispatched before it no longer count here. */
  generation = 0;

  /** The prefill rate and spread, measured at each first byte (prefill-rate.ts); `prefillRate` is its rate in use. */
  private readonly rate: PrefillRate;
  /**
   * Requests before their first byte, in dispatch (= service) order, keyed by the object
   * {@link dispatch} returned, which the caller hands back to firstByte / releaseBeforeFirstByte.
   */
  private readonly queue = new Map<object, Pending>();
  /** Sum of the queue's uncached tokens: prefill sent and not yet answered, with no credit for progress. */
  queuedTokens = 0;
  /** Requests dispatched since the node joined, and when the last one was. */
  dispatched = 0;
  lastDispatchAt = -Infinity;
  /** When the last first byte arrived: the earliest the current head could have started prefill. */
  private lastFirstByteAt = -Infinity;
  /** A floor on the backlog from a report that showed work this router did not send (ms). */
  private floorEnd = 0;
  /** Uncached tokens dispatched lately, decaying with RECENT_WORK_TAU_MS, and when it was last updated. */
  private recentWork = 0;
  private recentAt = 0;

  constructor(configuredRate: number) {
    this.rate = new PrefillRate(configuredRate);
    this.prefillRate = configuredRate;
    this.meanUncached = configuredRate / 4;
  }

  /**
   * Work other objects of a sharded region had queued on this node when they last shared it
   * (tokens), and when (ms): a shard dispatches only part of a node's traffic (src/core/shard.ts).
   */
  private foreignTokens = 0;
  /** The other shards' recent prefill on the node (tokens, decayed as {@link recentPrefill}), as last shared. */
  private foreignRecent = 0;
  /** The other shards' requests in flight on the node, as last shared: they hold its places too. */
  private foreignInflight = 0;
  private foreignAt = 0;

  /** Uncached prefill tokens ahead of a request arriving now: this router's, the other shards', or a report's floor. */
  workAhead(now: number): number {
    return Math.max(this.prefillWorkAhead(now), (this.slotWaitMs() * this.prefillRate) / 1000);
  }

  /**
   * The prefill alone ahead of a request arriving now (without the wait for a place): what drains
   * with time, where the wait for a place changes only when a request ends (the region's queue
   * sets its timer by this: queued-admission.ts wakeAt).
   */
  prefillWorkAhead(now: number): number {
    const foreign = Math.max(0, this.foreignTokens - (Math.max(0, now - this.foreignAt) * this.prefillRate) / 1000);
    const floorTokens = (Math.max(0, this.floorEnd - now) * this.prefillRate) / 1000;
    return Math.max(0, this.ownWorkAhead(now) + foreign, floorTokens);
  }

  /**
   * How long a request sent now waits for a place on the node (ms), in tokens of prefill at its
   * rate for {@link workAhead}: 0 while this router has fewer than `maxRunning` requests in flight
   * there. Past that, each request in flight beyond the places must see one finish first, and
   * with every place taken one finishes every `meanDecodeMs / maxRunning` on average (the running
   * requests' remaining times taken as their mean: how far along each is, the router cannot see).
   * Without it an engine whose places are full holds the request in its own waiting queue while
   * the model sees no prefill ahead: on bench:goodput's Mooncake trace with 16 places a node and
   * answers at 20 tokens/s (bench/FLEETS.md), 51.5% of requests in time at 1x not told, 85.7%
   * told. Undefined `maxRunning` or no completion measured yet: 0.
   */
  slotWaitMs(): number {
    const places = this.maxRunning;
    const decodeMs = this.meanDecodeMs;
    if (places === undefined || decodeMs === undefined) return 0;
    // A sharded region's other objects send the node requests too (as last shared: shareForeign).
    const completionsNeeded = this.inflight + this.foreignInflight + 1 - places;
    return completionsNeeded > 0 ? (completionsNeeded * decodeMs) / places : 0;
  }

  /**
   * The other shards' queued work on the node, as they last shared it: it is ahead of anything
   * this router sends now, and drains at the node's rate from the moment it was shared.
   */
  shareForeign(foreign: ShardLoad, now: number): void {
    this.foreignTokens = Math.max(0, foreign.queued);
    this.foreignRecent = Math.max(0, foreign.recent);
    this.foreignInflight = Math.max(0, foreign.inflight ?? 0);
    this.foreignAt = now;
  }

  /** Uncached prefill tokens this router sent that are still ahead of a request arriving now. */
  ownWorkAhead(now: number): number {
    let tokens = this.queuedTokens;
    const head = this.queue.values().next().value as Pending | undefined;
    if (head) {
      // The head has been prefilling since the previous first byte (FIFO). What is left of it is
      // its expected remainder given how long it has run (residual.ts): exact progress when
      // prefill times are predictable, a growing remainder for an overrun when they are not.
      const elapsedMs = Math.max(0, now - Math.max(head.dispatchedAt, this.lastFirstByteAt));
      const predictedMs = head.uncachedTokens * this.rate.msPerToken;
      const left = predictedMs > 0 ? head.uncachedTokens * expectedResidual(elapsedMs / predictedMs, this.spread()) : 0;
      tokens += left - head.uncachedTokens;
    }
    return Math.max(0, tokens);
  }

  /**
   * Prefill tokens dispatched to the node lately (exponentially decayed, time constant 60 s): what
   * spreads work between nodes that are equally good for a request right now.
   */
  recentPrefill(now: number): number {
    const foreign = decay(this.foreignRecent, this.foreignAt, now, RECENT_WORK_TAU_MS);
    return this.ownRecentPrefill(now) + foreign;
  }

  /** The part of {@link recentPrefill} this router dispatched itself. */
  ownRecentPrefill(now: number): number {
    return decay(this.recentWork, this.recentAt, now, RECENT_WORK_TAU_MS);
  }

  /** Spread (lognormal sigma) of real over predicted prefill times, as in use. */
  spread(): number {
    return this.rate.spread();
  }

  /** Seconds until a request with `uncachedTokens` of prefill would get its first token. */
  estimateTtftSeconds(now: number, uncachedTokens: number): number {
    return ttftSeconds(this.workAhead(now), uncachedTokens, this.prefillRate);
  }

  /**
   * Credits a dispatch. Returns the modelled prefill start and end, which the caller keeps with
   * the request and hands back when the first byte arrives (the object identifies the request).
   */
  dispatch(now: number, uncachedTokens: number, promptTokens: number): { startAt: number; prefillEnd: number } {
    const startAt = now + (this.workAhead(now) * 1000) / this.prefillRate;
    const prefillEnd = startAt + (uncachedTokens * 1000) / this.prefillRate;
    const predicted = { startAt, prefillEnd };
    if (this.queue.size === 0 && now > this.lastFirstByteAt) this.lastFirstByteAt = now;
    this.queue.set(predicted, { dispatchedAt: now, uncachedTokens });
    this.queuedTokens += uncachedTokens;
    this.dispatched++;
    this.lastDispatchAt = now;
    this.inflight++;
    this.prefilling++;
    this.activeTokens += promptTokens;
    this.meanUncached += EWMA_WEIGHT * (uncachedTokens - this.meanUncached);
    this.recentWork = this.ownRecentPrefill(now) + uncachedTokens;
    this.recentAt = now;
    return predicted;
  }

  /**
   * The first byte of a dispatched request arrived at `now`: its prefill is done.
   * @param predicted the object returned by {@link dispatch}
   * @returns whether it was a rate sample (the region then pools the nodes' rates again)
   */
  firstByte(now: number, dispatchedAt: number, predicted: { startAt: number; prefillEnd: number }, uncachedTokens: number): boolean {
    this.prefilling = Math.max(0, this.prefilling - 1);
    this.forget(predicted);
    // Every request measures the node's prefill rate (prefill-rate.ts). Benchmark-tuned: the
    // prefill started at the previous first byte or at dispatch, whichever is later, so a request
    // queued behind others is a sample too (before, only one the model believed started on an
    // empty backlog was, and under noise that belief was often wrong and the wait counted as prefill).
    const serviceStart = Math.max(dispatchedAt, this.lastFirstByteAt);
    if (now > this.lastFirstByteAt) this.lastFirstByteAt = now;
    const sampled = this.rate.sample(now - serviceStart, uncachedTokens);
    this.prefillRate = this.rate.tokensPerSecond;
    return sampled;
  }

  /** What the node's own measurements say (prefill-rate.ts): what the region pools (rate-pool.ts). */
  rateEvidence(): RateEvidence {
    return this.rate.evidence();
  }

  /** Sets the rate and spread in use (the region's estimate for this node), within the bounds around the configured rate. */
  useEstimate(msPerToken: number, spread: number): void {
    this.rate.use(msPerToken, spread);
    this.prefillRate = this.rate.tokensPerSecond;
  }

  /** A dispatched request finished (or failed) without a first byte having been seen. */
  releaseBeforeFirstByte(now: number, predicted: { prefillEnd: number }): void {
    this.prefilling = Math.max(0, this.prefilling - 1);
    // Its prefill will not run (or has ended unseen): the next request in line starts now.
    const wasHead = this.queue.keys().next().value === predicted;
    this.forget(predicted);
    if (wasHead && now > this.lastFirstByteAt) this.lastFirstByteAt = now;
  }

  /**
   * A dispatched request of `promptTokens` completed (or failed); `decodeMs`: how long it ran after
   * its first byte, when it had one (what {@link slotWaitMs} learns a place's turnover from).
   */
  complete(promptTokens: number, decodeMs?: number): void {
    this.inflight = Math.max(0, this.inflight - 1);
    this.activeTokens = Math.max(0, this.activeTokens - promptTokens);
    if (decodeMs !== undefined && decodeMs >= 0) {
      this.meanDecodeMs =
        this.meanDecodeMs === undefined ? decodeMs : this.meanDecodeMs + DECODE_EWMA_WEIGHT * (decodeMs - this.meanDecodeMs);
    }
  }

  /**
   * Applies a load report: queued work this router did not send bounds the backlog from below.
   *
   * Benchmark-tuned: the router already models its own queued requests exactly, so re-pricing
   * *every* reported waiting request at the moving-average request size only adds error (on the
   * Mooncake trace it put the modelled work ahead off by ~11k tokens, ~1 s of prefill, per
   * decision, and doubled heavy-load mean TTFT). Only when the node
   * reports more waiting requests than this router has before their first byte (another router's,
   * or sent before a restart) does the floor apply: then the report is the better evidence.
   */
  report(report: LoadReport): void {
    this.lastReport = report;
    if (report.waiting > this.prefilling) {
      this.floorEnd = Math.max(this.floorEnd, report.at + (report.waiting * this.meanUncached * 1000) / this.prefillRate);
    }
  }

  /** Forgets queued work (node restarted or was removed). */
  reset(now: number): void {
    this.queue.clear();
    this.queuedTokens = 0;
    this.floorEnd = now;
    this.foreignTokens = 0;
    this.foreignRecent = 0;
    this.foreignInflight = 0;
    this.lastFirstByteAt = now;
    this.inflight = 0;
    this.prefilling = 0;
    this.activeTokens = 0;
    this.recentWork = 0;
    this.generation++;
  }

  private forget(predicted: object): void {
    const p = this.queue.get(predicted);
    if (!p) return;
    this.queue.delete(predicted);
    this.queuedTokens -= p.uncachedTokens;
    if (this.queue.size === 0) this.queuedTokens = 0;
  }
}

/** The load model's time to first token: the work queued ahead plus the request's own prefill, at the node's rate. */
export function ttftSeconds(workAheadTokens: number, uncachedTokens: number, prefillRate: number): number {
  return (workAheadTokens + uncachedTokens) / prefillRate;
}
