/** Round-robin: the load-balancing baseline that knows nothing about caches or load. */
import { z } from "zod";
import type { PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const roundRobinOptionsSchema = z.strictObject({ name: z.literal("round-robin") });

type RoundRobinOptions = z.output<typeof roundRobinOptionsSchema>;

/** Cycles through the nodes in order. */
class RoundRobinPolicy implements RoutingPolicy {
  readonly name = "round-robin";
  private next = 0;
  choose({ candidates }: PolicyInput): PolicyChoice {
    const index = this.next++ % candidates.length;
    return { index, decision: "balance" };
  }
}

export const roundRobin: PolicyDefinition<RoundRobinOptions> = {
  options: roundRobinOptionsSchema,
  create: () => new RoundRobinPolicy(),
};
