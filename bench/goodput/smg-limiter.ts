/**
 * SGLang Model Gateway's opt-in overload protection, `--max-concurrent-requests`, in front of its
 * cache-aware policy (src/core/policies/sglang-cache-aware.ts).
 *
 * Source: lightseekorg/smg at 73da68ca9472bbc0ff5f63d31a8a21fbb8696359 (v1.9.0-48; the same
 * semantics at tag v1.9.0, whose concurrency.rs differs only in how the permit is carried):
 * - model_gateway/src/middleware/concurrency.rs (`concurrency_limit_middleware`, `QueueProcessor`);
 * - model_gateway/src/middleware/token_bucket.rs (`TokenBucket`);
 * - model_gateway/src/app_context.rs (`maybe_rate_limiter`): the bucket's capacity is
 *   `max_concurrent_requests` (N) and its refill rate `rate_limit_tokens_per_second`, which when not
 *   set is N tokens per second;
 * - model_gateway/src/main.rs (CLI defaults): `--max-concurrent-requests -1` (off), `--queue-size
 *   100`, `--queue-timeout-secs 60`, `--rate-limit-tokens-per-second` unset.
 *
 * What is counted: a token is taken per request and returned when the response body has been fully
 * sent (TokenGuardBody: here, at the end of decode); besides, the bucket refills continuously at
 * its rate, capped at N, so with the default refill it bounds bursts more than concurrency. A
 * request that finds a token goes straight to the policy (placed at once on a node, whose own
 * queue it then waits in). One that finds none is sent to the bounded channel (`queue_size`); when
 * `try_send` fails (channel full, or queueing disabled with queue_size 0) the answer is 429 at once.
 * The QueueProcessor takes each queued request off the channel as soon as it arrives and waits for
 * a token in a task of its own, so the channel itself almost never holds anything: with
 * queue_size > 0 the waiters are in effect unbounded (modelled so: `maxWaiters` Infinity), and each
 * is bounded by time instead. A waiter gets 408 when `queue_timeout` passes without a token; with
 * a refill rate > 0, `TokenBucket::acquire` also gives up after the time the refill needs to
 * produce the missing token (`(1 - tokens) / rate`), so a waiter that loses that race to another
 * gets 408 long before the queue timeout. Waiters are woken together (Notify::notify_waiters) and
 * race for tokens; here they are served first come first served, and a new arrival's
 * `try_acquire` may take a token before them, as in the source.
 */
import type { Decided, Dispatcher, Fleet, Live, Placement, SimNode } from "../fleet.ts";
import type { PlacingDispatcher } from "./routers.ts";

export interface SmgLimiterConfig {
  /** `--max-concurrent-requests`: the bucket's capacity. */
  maxConcurrent: number;
  /** `--rate-limit-tokens-per-second` (tokens/s); the source's default when unset is `maxConcurrent`. */
  refillPerSecond: number;
  /** `--queue-size` (default 100): 0 refuses at once (429) when no token is free. */
  queueSize: number;
  /** `--queue-timeout-secs` (default 60), in ms. */
  queueTimeoutMs: number;
  /**
   * Waiters held at most: the channel is drained into per-request tasks at once, so Infinity is the
   * source's behaviour (see above); a finite bound is for tests.
   */
  maxWaiters: number;
}

/** The CLI's defaults for a given `--max-concurrent-requests`. */
export function smgDefaults(maxConcurrent: number): SmgLimiterConfig {
  return { maxConcurrent, refillPerSecond: maxConcurrent, queueSize: 100, queueTimeoutMs: 60_000, maxWaiters: Infinity };
}

/** Tolerance on the bucket's fractional tokens (a refill computed to the millisecond). */
const EPS = 1e-9;

interface Waiter {
  live: Live;
  /** When it gets 408: its queue timeout, or sooner when the refill race window closes. */
  deadline: number;
}

export class SmgLimiter implements Dispatcher {
  readonly name: string;
  private readonly inner: PlacingDispatcher;
  private readonly cfg: SmgLimiterConfig;
  private tokens: number;
  private lastRefill = 0;
  private readonly waiters: Waiter[] = [];
  private head = 0;
  /** Requests holding a token, until their answer ends. */
  private readonly holding = new Set<Live>();
  /** Refusals by reason, for the report. */
  readonly refusalReasons = new Map<string, number>();

  constructor(name: string, inner: PlacingDispatcher, cfg: SmgLimiterConfig) {
    this.name = name;
    this.inner = inner;
    this.cfg = cfg;
    this.tokens = cfg.maxConcurrent;
  }

  init(fleet: Fleet): void {
    this.inner.init(fleet);
  }

  private refill(now: number): void {
    if (this.cfg.refillPerSecond > 0) {
      this.tokens = Math.min(this.cfg.maxConcurrent, this.tokens + ((now - this.lastRefill) * this.cfg.refillPerSecond) / 1000);
    }
    this.lastRefill = now;
  }

  private refuse(reason: string): { refused: string } {
    this.refusalReasons.set(reason, (this.refusalReasons.get(reason) ?? 0) + 1);
    return { refused: reason };
  }

  private get waiting(): number {
    return this.waiters.length - this.head;
  }

  route(r: Live, now: number): Placement {
    this.refill(now);
    if (this.tokens >= 1 - EPS) return this.admit(r, now);
    if (this.cfg.queueSize <= 0 || this.waiting >= this.cfg.maxWaiters) return this.refuse("smg-429");
    // TokenBucket::acquire: with a refill rate it waits only as long as the refill needs to make
    // up the missing token; with none, until a token is returned. Either way at most the queue timeout.
    const refillWait = this.cfg.refillPerSecond > 0 ? ((1 - this.tokens) * 1000) / this.cfg.refillPerSecond : Infinity;
    this.waiters.push({ live: r, deadline: now + Math.min(this.cfg.queueTimeoutMs, refillWait) });
    return "queued";
  }

  private admit(r: Live, now: number): Placement {
    this.tokens -= 1;
    this.holding.add(r);
    const p = this.inner.decide(r, now);
    if (typeof p !== "number") throw new Error(`${this.name}: the policy behind the limiter must place every request`);
    return p;
  }

  firstToken(r: Live, now: number): void {
    this.inner.firstToken(r, now);
  }

  complete(r: Live, now: number): void {
    this.inner.complete(r, now);
    if (this.holding.delete(r)) {
      this.refill(now);
      this.tokens = Math.min(this.cfg.maxConcurrent, this.tokens + 1);
    }
  }

  report(node: SimNode, now: number): void {
    this.inner.report(node, now);
  }

  drain(now: number): Decided[] {
    this.refill(now);
    const out: Decided[] = [];
    // A token available at a waiter's deadline is still its (tokio polls the acquisition before the timeout).
    while (this.head < this.waiters.length) {
      const w = this.waiters[this.head]!;
      if (this.tokens >= 1 - EPS) {
        this.head++;
        out.push({ live: w.live, node: this.admit(w.live, now) as number });
      } else if (w.deadline <= now) {
        this.head++;
        out.push({ live: w.live, refused: this.refuse("smg-408").refused });
      } else break;
    }
    // Waiters behind the head whose own deadline passed (shorter refill windows) time out too.
    // Without a refill every deadline is its arrival plus the timeout, so none is before the head's.
    if (this.cfg.refillPerSecond <= 0) {
      if (this.head > 1024 && this.head * 2 > this.waiters.length) {
        this.waiters.splice(0, this.head);
        this.head = 0;
      }
    } else if (this.head < this.waiters.length) {
      const keep: Waiter[] = [];
      for (let i = this.head; i < this.waiters.length; i++) {
        const w = this.waiters[i]!;
        if (w.deadline <= now) out.push({ live: w.live, refused: this.refuse("smg-408").refused });
        else keep.push(w);
      }
      this.waiters.length = 0;
      this.waiters.push(...keep);
      this.head = 0;
    } else {
      this.waiters.length = 0;
      this.head = 0;
    }
    return out;
  }

  wakeAt(now: number): number | undefined {
    if (this.waiting === 0) return undefined;
    if (this.cfg.refillPerSecond <= 0) return this.waiters[this.head]!.deadline;
    let at = Infinity;
    for (let i = this.head; i < this.waiters.length; i++) at = Math.min(at, this.waiters[i]!.deadline);
    if (this.tokens < 1 - EPS) at = Math.min(at, now + ((1 - this.tokens) * 1000) / this.cfg.refillPerSecond);
    return at;
  }
}
