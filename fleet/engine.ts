/**
 * The timing model of one inference node: a scheduler in the shape of vLLM's, with costs that
 * follow LLM serving.
 *
 * - A request waits (FCFS) until one of `maxRunning` batch slots is free: vLLM's
 *   num_requests_waiting vs num_requests_running.
 * - Admitted requests are prefilled one at a time, first come first served. Prefill costs the
 *   *uncached* prompt tokens at `prefillTokensPerSecond`: the cached prefix is looked up when the
 *   request's prefill starts (so it sees blocks computed by earlier prefills), as vLLM does when it
 *   schedules a request. If the KV pool cannot hold the new blocks beside the pinned blocks of
 *   running requests, the head of the prefill queue waits for one to finish.
 * - The first token comes out at the end of prefill; then every running request decodes
 *   concurrently at `decodeTokensPerSecond`.
 * - Every duration is divided by `timeFactor` (10 = ten times faster than the modelled GPU); a
 *   prefill's is multiplied by `prefillSlowdown` (a degraded GPU, for fault injection).
 *
 * Callback-driven with plain setTimeout (no promises), so tests can drive it with mock timers.
 */
import { PrefixCache } from "./kv-cache.ts";

export interface EngineOptions {
  kvCapacityTokens: number;
  prefillTokensPerSecond: number;
  decodeTokensPerSecond: number;
  maxRunning: number;
  timeFactor: number;
  /** Tokens per KV block. Default 16 (vLLM's default block size). */
  blockTokens?: number;
  /** Clock in ms; defaults to performance.now. Injected by tests that mock time. */
  now?: () => number;
  /** Multiplies each prefill's duration, read when it starts (the node's `prefill_slowdown` fault). Default 1. */
  prefillSlowdown?: () => number;
}

export interface PrefillInfo {
  /** Prompt tokens whose KV was really held by this node: vLLM's cached_tokens. */
  cachedTokens: number;
  /** Time spent waiting for a slot and for the prefill queue (wall ms). */
  queuedMs: number;
  /** Prefill duration (wall ms, after time factor). */
  prefillMs: number;
}

export interface JobSpec {
  /** Chained hashes of the prompt's full blocks. */
  hashes: readonly string[];
  promptTokens: number;
  /** Tokens to generate, at least 1. */
  completionTokens: number;
  /** Prefill done; onToken(0) follows immediately. */
  onPrefilled?: (info: PrefillInfo) => void;
  onToken: (index: number) => void;
  onDone: () => void;
}

export type JobState = "waiting" | "queued-prefill" | "prefill" | "decode" | "done" | "cancelled";

export interface JobHandle {
  readonly state: JobState;
  /** The client went away: free the slot and the KV pins. No further callbacks. */
  cancel(): void;
}

interface Job {
  spec: JobSpec;
  state: JobState;
  arrivedAt: number;
  /** Leading blocks this job has pinned in the cache. */
  pinned: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  decodeStart: number;
  nextToken: number;
}

/** Cumulative counters, as vLLM exports them. */
export interface EngineCounters {
  promptTokens: number;
  generationTokens: number;
  prefixQueryTokens: number;
  prefixHitTokens: number;
  finished: number;
  cancelled: number;
}

export class Engine {
  readonly options: Required<EngineOptions>;
  readonly cache: PrefixCache;
  readonly counters: EngineCounters = {
    promptTokens: 0,
    generationTokens: 0,
    prefixQueryTokens: 0,
    prefixHitTokens: 0,
    finished: 0,
    cancelled: 0,
  };
  private readonly waiting: Job[] = [];
  private readonly prefillQueue: Job[] = [];
  private readonly running = new Set<Job>();
  private prefilling: Job | undefined;
  private stopped = false;

  constructor(options: EngineOptions) {
    this.options = { blockTokens: 16, now: () => performance.now(), prefillSlowdown: () => 1, ...options };
    this.cache = new PrefixCache(options.kvCapacityTokens, this.options.blockTokens);
  }

  /** Requests holding a batch slot (prefilling, queued for prefill or decoding). */
  get numRunning(): number {
    return this.running.size;
  }

  /** Requests waiting for a batch slot. */
  get numWaiting(): number {
    return this.waiting.length;
  }

  submit(spec: JobSpec): JobHandle {
    const job: Job = {
      spec,
      state: "waiting",
      arrivedAt: this.options.now(),
      pinned: 0,
      timer: undefined,
      decodeStart: 0,
      nextToken: 0,
    };
    if (this.stopped) throw new Error("engine stopped");
    this.waiting.push(job);
    this.pump();
    return {
      get state() {
        return job.state;
      },
      cancel: () => this.cancel(job),
    };
  }

  /** Stops every timer; no callback fires again (the process "died"). */
  stop(): void {
    this.stopped = true;
    for (const job of [...this.waiting, ...this.running]) {
      if (job.timer) clearTimeout(job.timer);
      job.state = "cancelled";
    }
    this.waiting.length = 0;
    this.prefillQueue.length = 0;
    this.running.clear();
    this.prefilling = undefined;
  }

  /** Admits waiting requests into free slots, then starts the next prefill if none runs. */
  private pump(): void {
    if (this.stopped) return;
    while (this.running.size < this.options.maxRunning && this.waiting.length > 0) {
      const job = this.waiting.shift()!;
      job.state = "queued-prefill";
      this.running.add(job);
      this.prefillQueue.push(job);
    }
    if (!this.prefilling) this.startPrefill();
  }

  private startPrefill(): void {
    const job = this.prefillQueue[0];
    if (!job) return;
    const { hashes, promptTokens } = job.spec;
    const { blockTokens, prefillTokensPerSecond, timeFactor } = this.options;
    // vLLM always computes at least the last prompt token (it needs its logits), so a block can
    // only hit if it lies wholly within the first promptTokens - 1 tokens.
    const maxHit = Math.min(hashes.length, Math.floor((promptTokens - 1) / blockTokens));
    const matched = this.cache.matchLength(hashes, maxHit);
    const newBlocks = hashes.length - matched;
    if (!this.cache.canAllocate(hashes, matched, newBlocks) && this.cache.pinnedBlocks > 0) {
      return; // KV pool full of running requests' blocks: retried when one finishes.
    }
    this.prefillQueue.shift();
    this.prefilling = job;
    job.state = "prefill";
    this.cache.pin(hashes, matched);
    job.pinned = matched;
    const cachedTokens = matched * blockTokens;
    this.counters.prefixQueryTokens += promptTokens;
    this.counters.prefixHitTokens += cachedTokens;
    this.counters.promptTokens += promptTokens;
    const start = this.options.now();
    const prefillMs = ((((promptTokens - cachedTokens) / prefillTokensPerSecond) * 1000) / timeFactor) * this.options.prefillSlowdown();
    job.timer = setTimeout(() => {
      job.timer = undefined;
      this.prefilling = undefined;
      job.pinned = this.cache.commit(hashes, matched);
      job.state = "decode";
      job.decodeStart = this.options.now();
      job.spec.onPrefilled?.({ cachedTokens, queuedMs: start - job.arrivedAt, prefillMs });
      this.decodeTick(job);
      this.startPrefill();
    }, prefillMs);
  }

  /** Emits every token that is due (token i is due i decode intervals after prefill). */
  private decodeTick(job: Job): void {
    if (job.state !== "decode") return;
    const interval = 1000 / this.options.decodeTokensPerSecond / this.options.timeFactor;
    const now = this.options.now();
    const total = job.spec.completionTokens;
    while (job.nextToken < total && job.decodeStart + job.nextToken * interval <= now + 0.5) {
      const i = job.nextToken++;
      this.counters.generationTokens++;
      job.spec.onToken(i);
      if (job.state !== "decode") return; // cancelled from inside the callback
    }
    if (job.nextToken >= total) {
      this.finish(job);
      job.spec.onDone();
      return;
    }
    const due = job.decodeStart + job.nextToken * interval;
    job.timer = setTimeout(
      () => {
        job.timer = undefined;
        this.decodeTick(job);
      },
      Math.max(0, due - now),
    );
  }

  private finish(job: Job): void {
    job.state = "done";
    this.counters.finished++;
    this.cache.release(job.spec.hashes, job.pinned);
    job.pinned = 0;
    this.running.delete(job);
    this.pump();
  }

  private cancel(job: Job): void {
    if (job.state === "done" || job.state === "cancelled") return;
    if (job.timer) clearTimeout(job.timer);
    job.timer = undefined;
    const wasPrefilling = this.prefilling === job;
    if (wasPrefilling) this.prefilling = undefined;
    const w = this.waiting.indexOf(job);
    if (w >= 0) this.waiting.splice(w, 1);
    const q = this.prefillQueue.indexOf(job);
    if (q >= 0) this.prefillQueue.splice(q, 1);
    this.cache.release(job.spec.hashes, job.pinned);
    job.pinned = 0;
    job.state = "cancelled";
    this.counters.cancelled++;
    this.running.delete(job);
    this.pump();
  }
}
