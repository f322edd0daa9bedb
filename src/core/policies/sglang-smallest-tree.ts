/**
 * SGLang router's cache-aware policy, older generation: a cache miss goes to the worker with the
 * smallest tree. A named variant of `sglang-cache-aware`, for comparison with deployments that
 * still run it.
 *
 * Source: the sglang-router / sgl-model-gateway line before smg v1.0.1, e.g.
 * sgl-model-gateway 0.2.3 `src/policies/cache_aware.rs` and `src/tree.rs` (`get_smallest_tenant`,
 * the smallest character count, first minimum wins), in lightseekorg/smg's history at
 * a7cede98bcf9159b8d046a034620b4c026d2b401; replaced by the least-loaded miss in
 * 6fe82758a70402c87920d1defaf5087a975a32cd ("cache-aware router should pick min load instead of
 * min tenant size", #14650). Defaults of that line from 0.1.9 on: 0.3 / 64 / 1.5, max_tree_size
 * 2^26 characters per worker (the same as the current generation's).
 *
 * Why it is weak: once every worker's tree has reached max_tree_size the trees are all the same
 * size, so misses fall on the first worker until the imbalance check fires (64 requests apart),
 * and that worker runs a deep queue.
 */
import { z } from "zod";
import { argMin } from "./placement.ts";
import { sglangHitOrBalance, sglangThresholds, sglangTreeTokens } from "./sglang-cache-aware.ts";
import type { PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const sglangSmallestTreeOptionsSchema = z.strictObject({ name: z.literal("sglang-smallest-tree"), ...sglangThresholds });

type SglangSmallestTreeOptions = z.output<typeof sglangSmallestTreeOptionsSchema>;

class SglangSmallestTreePolicy implements RoutingPolicy {
  readonly name = "sglang-smallest-tree";
  private readonly options: SglangSmallestTreeOptions;
  constructor(options: SglangSmallestTreeOptions) {
    this.options = options;
  }
  choose({ candidates, request }: PolicyInput): PolicyChoice {
    return (
      // The imbalanced path of that generation: the smallest running queue, first minimum.
      sglangHitOrBalance(candidates, request.promptTokens, this.options, (cs) => argMin(cs.map((c) => c.inflight))) ?? {
        index: argMin(candidates.map((c) => c.indexBlocks)),
        decision: "cold-spread",
      }
    );
  }
  indexCapacityTokens(): number {
    return sglangTreeTokens(this.options.max_tree_size);
  }
}

export const sglangSmallestTree: PolicyDefinition<SglangSmallestTreeOptions> = {
  options: sglangSmallestTreeOptionsSchema,
  create: (options) => new SglangSmallestTreePolicy(options),
};
