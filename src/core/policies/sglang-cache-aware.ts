/** SGLang router's cache-aware policy, with SGLang's defaults: the cache-aware baseline. */
import { z } from "zod";
import { argMin } from "./placement.ts";
import type { PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const sglangCacheAwareOptionsSchema = z.strictObject({
  name: z.literal("sglang-cache-aware"),
  cache_threshold: z
    .number()
    .min(0)
    .max(1)
    .default(0.3)
    .describe("Minimum matched fraction of the prompt for the request to follow the cache."),
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
});

export type SglangCacheAwareOptions = z.output<typeof sglangCacheAwareOptionsSchema>;

/**
 * SGLang router's cache-aware policy. Load is requests in flight per worker. When the fleet is
 * imbalanced (max - min > abs threshold AND max > rel threshold x min) the request goes to the
 * least loaded worker. Otherwise it goes to the worker with the longest prefix match in the
 * router's approximate tree if the match covers more than `cache_threshold` of the prompt, else to
 * the worker with the smallest tree (the most free cache). The approximate tree is warmpath's
 * prefix index, which likewise learns from the router's own decisions.
 */
export class SglangCacheAwarePolicy implements RoutingPolicy {
  readonly name = "sglang-cache-aware";
  private readonly options: SglangCacheAwareOptions;
  constructor(options: SglangCacheAwareOptions) {
    this.options = options;
  }
  choose({ candidates, request }: PolicyInput): PolicyChoice {
    const loads = candidates.map((c) => c.inflight);
    const max = Math.max(...loads);
    const min = Math.min(...loads);
    const { cache_threshold, balance_abs_threshold, balance_rel_threshold } = this.options;
    if (max - min > balance_abs_threshold && max > balance_rel_threshold * min) {
      return { index: argMin(loads), decision: "balance" };
    }
    let best = 0;
    for (let i = 1; i < candidates.length; i++) {
      if (candidates[i]!.matchTokens > candidates[best]!.matchTokens) best = i;
    }
    const rate = candidates[best]!.matchTokens / Math.max(1, request.promptTokens);
    if (rate > cache_threshold) return { index: best, decision: "prefix-hit" };
    return { index: argMin(candidates.map((c) => c.indexBlocks)), decision: "cold-spread" };
  }
}

export const sglangCacheAware: PolicyDefinition<SglangCacheAwareOptions> = {
  options: sglangCacheAwareOptionsSchema,
  create: (options) => new SglangCacheAwarePolicy(options),
};
