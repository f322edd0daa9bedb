/**
 * Everything a simulated node holds that changes while it runs, in one object the HTTP handlers
 * and the lifecycle (node.ts) share: the faults in force and the port (kept across restarts), and
 * the current process — engine, boot id, metrics, server, reporter, timers — replaced on restart.
 * Handlers read these fields when they need them, so they always see the current process.
 */
import type { Server } from "node:http";
import { randomBytes } from "node:crypto";
import { Engine } from "./engine.ts";
import { NO_FAULTS, type Faults, type NodeEngine } from "./config.ts";
import { FirstByteTags } from "./first-bytes.ts";
import { Histogram, TTFT_BUCKETS } from "./metrics.ts";
import type { LoadReport, Reporter } from "./report.ts";
import { ResponseStore } from "./response-store.ts";

export interface NodeOptions {
  id: string;
  region: string;
  /** The engine the node says it runs in its reports. Default "vllm". */
  engine?: NodeEngine;
  models: string[];
  kvCapacityTokens: number;
  prefillTokensPerSecond: number;
  decodeTokensPerSecond: number;
  maxRunning: number;
  /** Say `maxRunning` in its load reports (`max_running_requests`). Default false. */
  reportMaxRunning?: boolean;
  timeFactor: number;
  /** 0 = ephemeral; a restart reuses the port first bound. */
  port?: number;
  defaultMaxTokens?: number;
  forceIncludeUsage?: boolean;
  faults?: Partial<Faults>;
  /** Where and how to push load reports; omitted = standalone node. */
  router?: { url: string; token: string; intervalMs?: number };
  log?: (event: Record<string, unknown>) => void;
}

/** The body of GET /admin/state. */
export interface NodeState {
  node_id: string;
  region: string;
  url: string;
  up: boolean;
  boot_id: string;
  engine: NodeEngine;
  models: string[];
  kv_capacity_tokens: number;
  running: number;
  waiting: number;
  kv_usage: number;
  cached_blocks: number;
  cached_tokens: number;
  faults: Faults;
  /** First bytes sent, by request tag (first-bytes.ts), across restarts; continuations not counted. */
  first_byte_tags: Record<string, number>;
  /** First bytes sent by continuations of an interrupted answer, by request tag, across restarts. */
  continued_tags: Record<string, number>;
  /** Streams cut by each `*_after_tokens` fault, across restarts. */
  injected_faults: Record<string, number>;
  /** Engine queue wait (ms) of each tagged request, for the fault runner's flood measurement. */
  queue_waits_ms: Record<string, number>;
  /** Responses API responses the current process stores (response-store.ts). */
  stored_responses: number;
}

export const HOST = "127.0.0.1";
/** Longest prompt + answer accepted, like vLLM's max_model_len (capped by the KV pool). */
const MAX_MODEL_LEN = 131_072;

export class NodeRuntime {
  readonly o: NodeOptions;
  readonly defaultMaxTokens: number;
  readonly maxModelLen: number;
  /** The model named in metrics labels. */
  readonly model: string;
  readonly engineName: NodeEngine;
  faults: Faults;
  port: number;
  /** Kept across restarts, like the faults: the record is the test's, not the process's. */
  readonly firstBytes = new FirstByteTags();
  /** First bytes of continuations (a chat `continue_final_message`, or a prompt ending in an answer's start), by tag. */
  readonly continuedBytes = new FirstByteTags();
  /** Streams cut by each `*_after_tokens` fault (kept across restarts, like the tags). */
  readonly injectedFaults: Record<string, number> = {};
  server: Server | undefined;
  reporter: Reporter | undefined;
  engine!: Engine;
  bootId = "";
  up = false;
  /** Timers of the current process (latency faults): cleared on crash. */
  readonly timers = new Set<ReturnType<typeof setTimeout>>();
  autoRestart: ReturnType<typeof setTimeout> | undefined;
  ttft!: Histogram;
  queueTime!: Histogram;
  success!: Record<string, number>;
  /** The current process's stored Responses API responses: lost on restart, as a process's memory. */
  responses!: ResponseStore;

  constructor(o: NodeOptions) {
    this.o = o;
    this.defaultMaxTokens = o.defaultMaxTokens ?? 64;
    this.maxModelLen = Math.min(MAX_MODEL_LEN, o.kvCapacityTokens);
    this.model = o.models[0]!;
    this.engineName = o.engine ?? "vllm";
    this.faults = { ...NO_FAULTS, ...o.faults };
    this.port = o.port ?? 0;
  }

  url(): string {
    return `http://${HOST}:${this.port}`;
  }

  /** A fresh process: empty cache, new boot id, zeroed metrics. */
  newProcess(): void {
    const o = this.o;
    this.engine = new Engine({
      kvCapacityTokens: o.kvCapacityTokens,
      prefillTokensPerSecond: o.prefillTokensPerSecond,
      decodeTokensPerSecond: o.decodeTokensPerSecond,
      maxRunning: o.maxRunning,
      timeFactor: o.timeFactor,
      prefillSlowdown: () => this.faults.prefill_slowdown,
    });
    this.bootId = randomBytes(8).toString("hex");
    this.ttft = new Histogram(TTFT_BUCKETS);
    this.queueTime = new Histogram(TTFT_BUCKETS);
    this.success = { stop: 0, length: 0, abort: 0 };
    this.responses = new ResponseStore();
  }

  state(): NodeState {
    const engine = this.engine;
    return {
      node_id: this.o.id,
      region: this.o.region,
      url: this.url(),
      up: this.up,
      boot_id: this.bootId,
      engine: this.engineName,
      models: this.o.models,
      kv_capacity_tokens: this.o.kvCapacityTokens,
      running: engine.numRunning,
      waiting: engine.numWaiting,
      kv_usage: engine.cache.usage(),
      cached_blocks: engine.cache.heldBlocks,
      cached_tokens: engine.cache.heldBlocks * engine.cache.blockTokens,
      faults: this.faults,
      first_byte_tags: this.firstBytes.toJSON(),
      continued_tags: this.continuedBytes.toJSON(),
      injected_faults: { ...this.injectedFaults },
      queue_waits_ms: this.firstBytes.waitsJSON(),
      stored_responses: this.responses.size,
    };
  }

  report(): LoadReport {
    const engine = this.engine;
    return {
      node_id: this.o.id,
      region: this.o.region,
      url: this.url(),
      models: this.o.models,
      kv_capacity_tokens: this.o.kvCapacityTokens,
      running: engine.numRunning,
      waiting: engine.numWaiting,
      kv_usage: engine.cache.usage(),
      boot_id: this.bootId,
      engine: this.engineName,
      ...(this.o.reportMaxRunning ? { max_running_requests: this.o.maxRunning } : {}),
    };
  }

  /** Waits `ms` wall milliseconds, unless the process dies first (then never resolves). */
  sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        resolve();
      }, ms);
      this.timers.add(t);
    });
  }

  setFaults(f: Partial<Faults>): Faults {
    this.faults = { ...this.faults, ...f };
    this.o.log?.({ event: "faults", region: this.o.region, node_id: this.o.id, faults: this.faults });
    return this.faults;
  }

  clearAutoRestart(): void {
    if (this.autoRestart) clearTimeout(this.autoRestart);
    this.autoRestart = undefined;
  }
}
