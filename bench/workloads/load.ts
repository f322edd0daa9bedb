/**
 * A benchmark workload by name: the Mooncake trace (read in place from ../shared/traces, never
 * copied into the repository) or one of the generated ones. Shared by the trace-replay benchmark
 * (bench/run.ts) and the shard benchmark (bench/shards.ts), so both replay the same requests.
 */
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadMooncake } from "./mooncake.ts";
import { generate, GENERATED } from "./generator.ts";
import { AGENTIC, generateAgentic } from "./agentic.ts";
import type { Workload } from "./types.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The Mooncake trace's place beside the repository (../shared/traces), never a copy in it. */
export const DEFAULT_TRACE = join(REPO, "..", "shared", "traces", "mooncake_conversation_trace.jsonl");

/** Every workload, in report order. */
export const WORKLOAD_NAMES = ["mooncake", "chat-heavy", "template-heavy", "agentic"];

/**
 * @param options.quick the CI slice: the trace's first 3,000 requests (~15 minutes of it), a
 *   quarter of each generated workload's duration
 */
export function loadWorkload(name: string, options: { trace?: string; quick?: boolean } = {}): Workload {
  const quick = options.quick ?? false;
  if (name === "mooncake") {
    const trace = options.trace ?? DEFAULT_TRACE;
    if (!existsSync(trace)) throw new Error(`Mooncake trace not found at ${trace} (use --trace)`);
    return loadMooncake({ path: trace, limit: quick ? 3000 : undefined });
  }
  if (name === AGENTIC.name) return generateAgentic(AGENTIC, { durationSeconds: quick ? AGENTIC.durationSeconds / 4 : undefined });
  const cfg = GENERATED[name as keyof typeof GENERATED];
  if (!cfg) throw new Error(`unknown workload ${name}`);
  return generate(cfg, { durationSeconds: quick ? cfg.durationSeconds / 4 : undefined });
}
