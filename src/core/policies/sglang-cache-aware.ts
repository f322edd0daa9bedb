/**
 * SGLang Model Gateway's cache-aware policy, current generation: the cache-aware baseline.
 *
 * Source: lightseekorg/smg, model_gateway/src/policies/cache_aware.rs (`select_worker`), commit
 * 73da68ca9472bbc0ff5f63d31a8a21fbb8696359 (identical at tag v1.9.0); defaults from the gateway's
 * CLI (model_gateway/src/main.rs, v1.9.0): cache_threshold 0.3, balance_abs_threshold 64,
 * balance_rel_threshold 1.5, max_tree_size 2^26 characters per worker, eviction every 120 s. (The
 * Rust `Default` impl in policies/mod.rs has 0.5 / 32 / 1.1 / 10,000: those apply only to a
 * policy hint a worker supplies, not to a gateway started as documented.)
 *
 * Its HTTP mode (approximate: the tree learns from the gateway's own routing, as here):
 * - load is the gateway's in-flight requests per worker;
 * - imbalanced (max - min > abs threshold AND max > rel threshold x min): the least loaded
 *   worker, ties to fewer processed requests, then the lower index;
 * - otherwise the longest prefix match in the tree: matched characters / request characters
 *   above `cache_threshold` (strictly) goes to the worker holding the deepest match, load not
 *   consulted (with several holders, the tree's `last_tenant` of that node: here the holder most
 *   recently sent a request);
 * - a miss goes to the least loaded worker, with the same tie-break (since smg v1.0.1; before it,
 *   the smallest tree: the `sglang-smallest-tree` variant).
 * The tree is warmpath's prefix index (block granularity instead of characters), bounded as
 * SGLang bounds it: max_tree_size characters per worker, not the worker's KV capacity, so it keeps
 * believing in prefixes long after the engine evicted them.
 */
import { z } from "zod";
import { DEFAULT_PREFIX_SETTINGS } from "../prefix.ts";
import type { Candidate, PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const sglangThresholds = {
  cache_threshold: z
    .number()
    .min(0)
    .max(1)
    .default(0.3)
    .describe("Matched fraction of the prompt above which the request follows the cache."),
  balance_abs_threshold: z
    .number()
    .int()
    .min(0)
    .default(64)
    .describe("Imbalance: the spread of requests in flight (max - min) must exceed this, with the relative threshold also exceeded."),
  balance_rel_threshold: z
    .number()
    .min(1)
    .default(1.5)
    .describe(
      "Imbalance: the most requests in flight must exceed this multiple of the fewest; an imbalanced fleet sends to the least loaded node.",
    ),
  max_tree_size: z
    .number()
    .int()
    .positive()
    .default(2 ** 26)
    .describe("Characters of prompt text the approximate tree keeps per node (SGLang's bound; not the node's KV capacity)."),
};

export const sglangCacheAwareOptionsSchema = z.strictObject({ name: z.literal("sglang-cache-aware"), ...sglangThresholds });

type SglangCacheAwareOptions = z.output<typeof sglangCacheAwareOptionsSchema>;
type SglangThresholds = Omit<SglangCacheAwareOptions, "name">;

/** SGLang's least-loaded worker: fewest in flight, then fewest processed, then the lower index. */
function sglangLeastLoaded(candidates: readonly Candidate[]): number {
  let best = 0;
  for (let i = 1; i < candidates.length; i++) {
    const a = candidates[i]!;
    const b = candidates[best]!;
    if (a.inflight < b.inflight || (a.inflight === b.inflight && a.dispatched < b.dispatched)) best = i;
  }
  return best;
}

/**
 * The steps both generations share: the imbalance check, then the cache match. Returns the
 * choice, or undefined for a cache miss (which each generation resolves its own way).
 */
export function sglangHitOrBalance(
  candidates: readonly Candidate[],
  promptTokens: number,
  o: SglangThresholds,
  leastLoaded: (candidates: readonly Candidate[]) => number = sglangLeastLoaded,
): PolicyChoice | undefined {
  let max = -Infinity;
  let min = Infinity;
  for (const c of candidates) {
    max = Math.max(max, c.inflight);
    min = Math.min(min, c.inflight);
  }
  if (max - min > o.balance_abs_threshold && max > o.balance_rel_threshold * min) {
    return { index: leastLoaded(candidates), decision: "balance" };
  }
  let best = 0;
  for (let i = 1; i < candidates.length; i++) {
    const a = candidates[i]!;
    const b = candidates[best]!;
    if (a.matchBlocks > b.matchBlocks || (a.matchBlocks === b.matchBlocks && a.lastDispatchAt > b.lastDispatchAt)) best = i;
  }
  const rate = candidates[best]!.matchTokens / Math.max(1, promptTokens);
  return rate > o.cache_threshold ? { index: best, decision: "prefix-hit" } : undefined;
}

/** max_tree_size characters as tokens, at warmpath's characters-per-token estimate. */
export function sglangTreeTokens(maxTreeChars: number): number {
  return maxTreeChars / DEFAULT_PREFIX_SETTINGS.charsPerToken;
}

class SglangCacheAwarePolicy implements RoutingPolicy {
  readonly name: string = "sglang-cache-aware";
  protected readonly options: SglangThresholds;
  constructor(options: SglangThresholds) {
    this.options = options;
  }
  choose({ candidates, request }: PolicyInput): PolicyChoice {
    return (
      sglangHitOrBalance(candidates, request.promptTokens, this.options) ?? {
        index: sglangLeastLoaded(candidates),
        decision: "cold-spread",
      }
    );
  }
  indexCapacityTokens(): number {
    return sglangTreeTokens(this.options.max_tree_size);
  }
}

export const sglangCacheAware: PolicyDefinition<SglangCacheAwareOptions> = {
  options: sglangCacheAwareOptionsSchema,
  create: (options) => new SglangCacheAwarePolicy(options),
};
