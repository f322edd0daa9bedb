/**
 * The live goodput benchmark's workload: a slice of the Mooncake conversation trace (read in place
 * from ../shared/traces, never copied into the repository) as streamed OpenAI chat completions,
 * each request's prompt tokens as the simulated fleet counts them, its objective, and the fleet's
 * capacity on these requests (what "1x" means).
 *
 * Text: every hash id becomes the same deterministic 2,048-character block the simulated-time
 * benchmarks use (bench/text.ts `entityText(KIND.traceBlock, id)`, as bench/workloads/mooncake.ts
 * builds the router's view), the last one cut to the request's input_length (4 characters a
 * token). Block 0, which every request of the trace starts with, is the system message (a
 * fleet-wide system prompt); the rest is the user message. Two requests therefore share a text
 * prefix exactly as far as their hash ids agree, and the fleet's nodes (16-token KV blocks over the
 * rendered chat template) cache what the trace says is shared.
 *
 * Deterministic: the same slice always gives the same requests, byte for byte.
 */
import { readFileSync } from "node:fs";
import { countTokens, renderChat } from "../../fleet/prompt.ts";
import type { FleetConfig as SimFleetConfig } from "../fleet.ts";
import { capacitySpeed, runOne } from "../goodput/harness.ts";
import { entityText, KIND } from "../text.ts";
import { loadMooncake } from "../workloads/mooncake.ts";
import type { Workload } from "../workloads/types.ts";

export { DEFAULT_TRACE } from "../workloads/load.ts";

/** Tokens per trace hash id, and characters per token (the fleet's and the router's estimate). */
const TRACE_BLOCK_TOKENS = 512;
const CHARS_PER_TOKEN = 4;
const BLOCK_CHARS = TRACE_BLOCK_TOKENS * CHARS_PER_TOKEN;

interface TraceLine {
  timestamp: number;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}

export interface SliceOptions {
  trace: string;
  /** Index (0-based line) of the slice's first request in the trace. */
  start: number;
  /** Requests in the slice. */
  count: number;
  model: string;
  /** The fleet's answer cap (`default_max_tokens`): a request's `max_tokens` is its trace output, at most this. */
  maxAnswerTokens: number;
}

/** One request of the slice. */
export interface LiveRequest {
  /** Index in the slice (arrival order). */
  id: number;
  /** Line of the trace it comes from (0-based). */
  traceLine: number;
  /** Arrival in trace ms from the slice's first request (x1: the trace's own timing). */
  arrivalMs: number;
  /** The chat completion body, serialised (streamed, with usage). */
  body: string;
  /** Prompt tokens as the fleet counts them: the rendered chat template at 4 characters a token (its usage.prompt_tokens). */
  promptTokens: number;
  /** The conversation: the trace's first two hash ids (block 0 is shared by every request). */
  conversation: string;
  /** The request's trace hash ids (the fleet's true blocks at 512 tokens, for the capacity simulation). */
  hashIds: number[];
  /** Answer tokens the fleet will generate: min(trace output, the fleet's cap). */
  answerTokens: number;
}

/** Reads lines [start, start + count) of the trace. */
function traceLines(path: string, start: number, count: number): TraceLine[] {
  const lines = readFileSync(path, "utf8").split("\n");
  const out: TraceLine[] = [];
  for (let i = 0, seen = 0; i < lines.length && out.length < count; i++) {
    if (lines[i]!.trim() === "") continue;
    if (seen++ >= start) out.push(JSON.parse(lines[i]!) as TraceLine);
  }
  if (out.length < count) throw new Error(`the trace has ${start + out.length} requests; the slice asks for ${start + count}`);
  return out;
}

/** The text of a trace request: its hash ids' blocks, the last cut to input_length (bench/workloads/mooncake.ts's synthesis). */
function blockTexts(r: TraceLine, unique: number): string[] {
  const parts: string[] = [];
  let left = r.input_length * CHARS_PER_TOKEN;
  for (const id of r.hash_ids) {
    if (left <= 0) break;
    const n = Math.min(BLOCK_CHARS, left);
    parts.push(entityText(KIND.traceBlock, id, n));
    left -= n;
  }
  if (left > 0) parts.push(entityText(KIND.answer, 1_000_000_000 + unique, left));
  return parts;
}

/** The slice as chat requests. */
export function loadSlice(o: SliceOptions): LiveRequest[] {
  const lines = traceLines(o.trace, o.start, o.count);
  const t0 = lines[0]!.timestamp;
  return lines.map((r, id) => {
    const parts = blockTexts(r, o.start + id);
    // Block 0 is the fleet-wide system prompt; a one-block request is a user message alone.
    const messages =
      parts.length > 1
        ? [
            { role: "system", content: parts[0]! },
            { role: "user", content: parts.slice(1).join("") },
          ]
        : [{ role: "user", content: parts.join("") }];
    const answerTokens = Math.max(1, Math.min(r.output_length, o.maxAnswerTokens));
    const body = {
      model: o.model,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: answerTokens,
      messages,
    };
    return {
      id,
      traceLine: o.start + id,
      arrivalMs: r.timestamp - t0,
      body: JSON.stringify(body),
      promptTokens: countTokens(renderChat(body)),
      conversation: r.hash_ids.length >= 2 ? `${r.hash_ids[0]}/${r.hash_ids[1]}` : `${r.hash_ids[0]}`,
      hashIds: r.hash_ids,
      answerTokens,
    };
  });
}

/**
 * A request's time-to-first-token objective in wall ms: issue 30's `max(1 s, 5 x its cold
 * prefill)`, the cold prefill being its whole prompt at the fleet's CONFIGURED prefill rate (model
 * tokens/s), all of it divided by the fleet's time factor (the replay runs `timeFactor` times
 * faster than model time; 1 by default, when model time is wall time).
 */
export function objectiveMs(promptTokens: number, prefillRate: number, timeFactor: number): number {
  return Math.max(1000, (5 * promptTokens * 1000) / prefillRate) / timeFactor;
}

/** The live fleet as the simulated-time fleet (bench/fleet.ts) models it. */
export interface FleetShape {
  nodes: number;
  kvCapacityTokens: number;
  prefillRate: number;
  decodeRate: number;
  maxRunning: number;
}

export function simFleet(f: FleetShape): SimFleetConfig {
  return {
    nodes: f.nodes,
    capacityTokens: f.kvCapacityTokens,
    prefillRate: f.prefillRate,
    decodeRate: f.decodeRate,
    slots: f.maxRunning,
    reportIntervalMs: 1000,
    noiseSigma: 0,
  };
}

/**
 * The same requests as the simulated-time benchmarks see them (bench/workloads/mooncake.ts: the
 * router's hashes of the same text, the trace's true blocks), renumbered from 0 with arrivals from
 * the slice's first, answers capped as the live fleet caps them: what bench:goodput's twin runs.
 */
export function twinWorkload(o: SliceOptions): Workload {
  const all = loadMooncake({ path: o.trace, limit: o.start + o.count });
  const slice = all.requests.slice(o.start);
  const t0 = slice[0]!.arrival;
  return {
    ...all,
    description: `Mooncake conversation trace, requests ${o.start}-${o.start + slice.length - 1}`,
    requests: slice.map((r, i) => ({ ...r, id: i, arrival: r.arrival - t0, outputTokens: Math.min(r.outputTokens, o.maxAnswerTokens) })),
  };
}

export interface Capacity {
  /**
   * 1x, as a multiple of the trace's own speed: bench:goodput's definition (bench/goodput/harness.ts
   * `capacitySpeed`), the speed at which the greedy oracle (these nodes' separate caches, each
   * request placed where its first token comes earliest knowing every cache and queue) keeps the
   * fleet's prefill 100% busy.
   */
  speed: number;
  /** The oracle's prefill busy fraction at `speed` (close to 1 by construction). */
  oracleBusy: number;
  /** The same for one pooled node with all the cache and rate (an upper bound: no placement over separate caches reaches it). */
  pooledSpeed: number;
  /** Prompt tokens per second offered at 1x, and the share of them cached under ideal reuse (one unlimited cache). */
  promptTokensPerSecond: number;
  idealReuse: number;
  /** Requests per second at 1x. */
  requestsPerSecond: number;
}

/** The requests as the simulated fleet sees them (arrival, true blocks, prompt and answer tokens; no router hashes). */
function fleetView(requests: readonly LiveRequest[]): Workload {
  return {
    name: "mooncake-slice",
    description: "Mooncake conversation trace slice (fleet view)",
    trueBlockTokens: TRACE_BLOCK_TOKENS,
    requests: requests.map((r) => ({
      id: r.id,
      arrival: r.arrivalMs,
      sessionKey: r.conversation,
      hashes: [],
      promptTokens: r.promptTokens,
      trueBlocks: r.hashIds,
      outputTokens: r.answerTokens,
    })),
  };
}

/**
 * The fleet's capacity on these requests, in simulated time (model time: the fleet at time factor
 * 1): bench:goodput's `capacitySpeed` on the fleet's view of them. Pure and deterministic.
 */
export function capacity(requests: readonly LiveRequest[], fleet: FleetShape): Capacity {
  const c = capacitySpeed(fleetView(requests), simFleet(fleet));
  const spanS = (requests[requests.length - 1]!.arrivalMs - requests[0]!.arrivalMs) / 1000;
  const tokens = requests.reduce((n, r) => n + r.promptTokens, 0);
  return {
    speed: c.speed,
    oracleBusy: c.oracleBusy,
    pooledSpeed: c.pooledSpeed,
    promptTokensPerSecond: (tokens / spanS) * c.speed,
    idealReuse: idealReuse(requests),
    requestsPerSecond: (requests.length / spanS) * c.speed,
  };
}

/** The simulated-time twin's figures on the same requests at one load (bench:goodput's runs). */
export interface TwinFigures {
  router: string;
  goodput: number;
  tokenGoodput: number;
  refused: number;
  late: number;
  hitRate: number;
}

/**
 * bench:goodput's twin on these requests at `load`: the production RegionRouter (warmpath, admission
 * on), the SLO-aware greedy oracle (knows every true cache, queue and prefill time; refuses at
 * arrival what it predicts late) and SGLang's cache-aware policy with its defaults (unbounded
 * pass-through), in simulated time with an instantaneous network: what the live run is next to.
 */
export function twinFigures(twin: Workload, load: number, speed: number, fleet: FleetShape): TwinFigures[] {
  const entries = [
    { name: "warmpath", spec: { kind: "warmpath", admission: true } },
    { name: "slo-oracle", spec: { kind: "slo-oracle" } },
    { name: "sglang-cache-aware", spec: { kind: "anchor", policy: "sglang-cache-aware" } },
  ] as const;
  return entries.map((e) => {
    const r = runOne(twin, load, speed, simFleet(fleet), e);
    return {
      router: e.name,
      goodput: r.all.goodput,
      tokenGoodput: r.all.tokenGoodput,
      refused: r.all.refused,
      late: r.all.late,
      hitRate: r.hitRate,
    };
  });
}

/** The share of prompt tokens cached with one unlimited cache (the trace's own accounting: a cached block is 512 tokens, the last token always computed). */
export function idealReuse(requests: readonly LiveRequest[]): number {
  const seen = new Set<number>();
  let total = 0;
  let cached = 0;
  for (const r of requests) {
    let m = 0;
    while (m < r.hashIds.length && seen.has(r.hashIds[m]!)) m++;
    total += r.promptTokens;
    cached += Math.min(m * TRACE_BLOCK_TOKENS, r.promptTokens - 1);
    for (const h of r.hashIds) seen.add(h);
  }
  return cached / total;
}
