/** Least loaded: the load-aware, cache-blind baseline. */
import { z } from "zod";
import type { PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const leastLoadedOptionsSchema = z.strictObject({ name: z.literal("least-loaded") });

type LeastLoadedOptions = z.output<typeof leastLoadedOptionsSchema>;

/**
 * Least loaded with the power of two choices (Mitzenmacher): sample two distinct nodes, take the
 * one with fewer requests in flight. Nearly as good as the global minimum, without herding.
 */
class LeastLoadedPolicy implements RoutingPolicy {
  readonly name = "least-loaded";
  choose({ candidates, random }: PolicyInput): PolicyChoice {
    const n = candidates.length;
    if (n === 1) return { index: 0, decision: "balance" };
    const a = Math.floor(random() * n);
    let b = Math.floor(random() * (n - 1));
    if (b >= a) b++;
    const index = candidates[b]!.inflight < candidates[a]!.inflight ? b : a;
    return { index, decision: "balance" };
  }
}

export const leastLoaded: PolicyDefinition<LeastLoadedOptions> = {
  options: leastLoadedOptionsSchema,
  create: () => new LeastLoadedPolicy(),
};
