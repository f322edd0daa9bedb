/**
 * Which engine serves a `/metrics` page: the prefix of its metric names (`vllm:`, `sglang:`,
 * `llamacpp:`), unless `--engine` forced one.
 */
import type { Sample } from "../prometheus.ts";
import { llamacpp } from "./llamacpp.ts";
import { sglang } from "./sglang.ts";
import type { Engine, EngineName } from "./types.ts";
import { vllm } from "./vllm.ts";

export const ENGINES: Readonly<Record<EngineName, Engine>> = { vllm, sglang, llamacpp };

export const ENGINE_NAMES = Object.keys(ENGINES) as EngineName[];

export function isEngineName(s: string): s is EngineName {
  return (ENGINE_NAMES as string[]).includes(s);
}

/**
 * The engine whose prefix the page's metric names carry. Throws, naming what to do, when none
 * does (metrics not enabled, or not an inference server) or when more than one does.
 */
export function detectEngine(samples: readonly Sample[]): Engine {
  const found = Object.values(ENGINES).filter((e) => samples.some((s) => s.name.startsWith(e.prefix)));
  if (found.length === 1) return found[0]!;
  if (found.length > 1) {
    throw new Error(`metrics of several engines (${found.map((e) => e.name).join(", ")}) on one page; choose with --engine`);
  }
  throw new Error(
    "no vllm:, sglang: or llamacpp: metrics on the page (SGLang needs --enable-metrics, llama-server --metrics); or force --engine",
  );
}
