/**
 * Boot ids, and telling an engine restart from what its `/metrics` says.
 *
 * The router forgets a node's cache when its `boot_id` changes, so the id must change whenever
 * the engine's cache may be gone, and only then. The agent mints a new id when it starts, after
 * it deregistered the node for an outage, and when the engine's own markers show a restart, which
 * also catches an engine that restarted between two scrapes, before any scrape failed:
 *
 * - a process start marker changed: `process_start_time_seconds` (prometheus_client's process
 *   collector, when the engine's registry has it; vLLM's multiprocess mode does not), or
 *   llama.cpp's `Process-Start-Time-Unix` header. Compared for equality, not order: it is an
 *   identity of the process, and clocks are not trusted to be comparable.
 * - a monotonic counter went backwards (`vllm:prompt_tokens_total`, ...): counters count from
 *   zero in a new process. A restart that has already counted past the old value is not seen
 *   this way, hence several counters, and the start marker first.
 *
 * A restart that neither shows is still found by the router itself (docs/API.md, "The default policy": three answers in a
 * row with nothing cached for recently used prefixes).
 */
import { randomUUID } from "node:crypto";
import { series, sumValues } from "./prometheus.ts";
import type { Engine, EngineScrape } from "./engines/types.ts";

/** What identifies one run of the engine, from one scrape. */
export interface BootMarkers {
  engine: string;
  /** The process start, as the engine wrote it; undefined when it writes none. */
  start: string | undefined;
  /** Each restart counter, summed over its label sets, when present. */
  counters: Readonly<Record<string, number>>;
}

export const PROCESS_START_METRIC = "process_start_time_seconds";

export function bootMarkers(engine: Engine, scrape: EngineScrape): BootMarkers {
  let start: string | undefined;
  if (engine.startHeader) {
    const h = scrape.headers[engine.startHeader];
    start = Array.isArray(h) ? h[0] : h;
  }
  if (start === undefined) {
    const v = sumValues(series(scrape.samples, PROCESS_START_METRIC));
    if (v !== undefined) start = String(v);
  }
  const counters: Record<string, number> = {};
  for (const name of engine.restartCounters) {
    const v = sumValues(series(scrape.samples, name));
    if (v !== undefined) counters[name] = v;
  }
  return { engine: engine.name, start, counters };
}

/** Why `next` is a new run of the engine compared with `prev`, or undefined if it is the same. */
export function restartReason(prev: BootMarkers | undefined, next: BootMarkers): string | undefined {
  if (!prev) return undefined;
  if (prev.engine !== next.engine) return `the engine changed from ${prev.engine} to ${next.engine}`;
  if (prev.start !== undefined && next.start !== undefined && prev.start !== next.start) {
    return `the engine's process start changed (${prev.start} -> ${next.start})`;
  }
  for (const [name, value] of Object.entries(next.counters)) {
    const before = prev.counters[name];
    if (before !== undefined && value < before) return `${name} went backwards (${before} -> ${value})`;
  }
  return undefined;
}

/** A fresh boot id (the contract allows up to 128 characters). */
export function newBootId(): string {
  return randomUUID();
}
