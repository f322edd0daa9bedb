/**
 * What the agent knows of an inference engine: how to read its load, its KV capacity and the
 * counters that reveal a restart from one `/metrics` page (plus, for llama.cpp, `/props`).
 * Engine modules are pure functions of what was scraped; the I/O lives in agent/scrape.ts.
 */
import { MAX_REPORTED_REQUESTS } from "../limits.ts";
import type { Sample } from "../prometheus.ts";

export type EngineName = "vllm" | "sglang" | "llamacpp";

/**
 * How the node report's `engine` field names each engine: src/contracts/node.ts `NODE_ENGINES`
 * (agent/agent.ts builds the report as that contract's type, so a name it does not accept fails
 * the typecheck). Its `other` is never sent: the agent only reports an engine it recognises.
 */
export type ReportedEngine = "vllm" | "sglang" | "llama.cpp";

/** A node's load, as the router's report wants it. */
export interface EngineLoad {
  /** Requests being computed (prefill or decode). */
  running: number;
  /** Requests queued behind them. */
  waiting: number;
  /** Share of the KV cache in use, 0..1. */
  kvUsage: number;
}

/** Where the KV capacity came from, for the log line that states it. */
export interface Capacity {
  tokens: number;
  source: string;
}

/** What was read from the engine on one tick. */
export interface EngineScrape {
  samples: readonly Sample[];
  /** The `/metrics` response headers (lower-case names). */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** `GET /props` (llama.cpp), read once per engine boot; undefined for other engines. */
  props?: unknown;
}

export interface Engine {
  name: EngineName;
  /** Its name in the report's `engine` field (llama.cpp: `llama.cpp`, not the flag's `llamacpp`). */
  reportedAs: ReportedEngine;
  /** The prefix of its metric names, which identifies it (`vllm:`). */
  prefix: string;
  /** Extra JSON endpoint the capacity needs, read once per engine boot (llama.cpp: `/props`). */
  capacityEndpoint?: string;
  /** Reads the load; throws when the page has none of the engine's load metrics. */
  readLoad(scrape: EngineScrape): EngineLoad;
  /** The KV cache capacity in tokens, when the engine exposes it. */
  readCapacity(scrape: EngineScrape): Capacity | undefined;
  /** The most requests it runs at once, when the engine exposes it (llama.cpp: `/props` `total_slots`). */
  readMaxRunning?(scrape: EngineScrape): number | undefined;
  /**
   * Monotonic counters: each summed over its label sets; one going backwards means the counters
   * were reset, i.e. the engine restarted (even if it came back before the agent saw it down).
   */
  restartCounters: readonly string[];
  /** A response header of `/metrics` that names the process start (llama.cpp). */
  startHeader?: string;
}

/**
 * Clamps a count to an integer in 0..MAX_REPORTED_REQUESTS (the contract's `running` and `waiting`:
 * one figure past it would get the whole report refused). Unknown (absent, NaN, infinite) is 0.
 */
export function count(v: number | undefined): number {
  return v === undefined || !Number.isFinite(v) ? 0 : Math.min(MAX_REPORTED_REQUESTS, Math.max(0, Math.round(v)));
}

/** Clamps a ratio to 0..1 (the contract's `kv_usage`); unknown is 0. */
export function ratio(v: number | undefined): number {
  return v === undefined || !Number.isFinite(v) ? 0 : Math.min(1, Math.max(0, v));
}

/**
 * A label value or gauge as a positive safe integer, or undefined (`"None"`, `"0"`, `"abc"`, and
 * `"1e17"`: past 2^53-1 a count is no longer exact, and the contract refuses it).
 */
export function positiveInt(v: string | number | undefined): number | undefined {
  const n = typeof v === "number" ? v : v === undefined || v.trim() === "" ? NaN : Number(v);
  return safePositive(Number.isFinite(n) ? Math.floor(n) : NaN);
}

/** `n` if it is a positive safe integer (e.g. a capacity computed from several figures), else undefined. */
export function safePositive(n: number): number | undefined {
  return Number.isSafeInteger(n) && n >= 1 ? n : undefined;
}
