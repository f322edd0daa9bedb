/** Random: the load-balancing baseline that spreads uniformly, ignoring caches and load. */
import { z } from "zod";
import type { PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const randomOptionsSchema = z.strictObject({ name: z.literal("random") });

type RandomOptions = z.output<typeof randomOptionsSchema>;

/** Picks a node uniformly at random. */
class RandomPolicy implements RoutingPolicy {
  readonly name = "random";
  choose({ candidates, random }: PolicyInput): PolicyChoice {
    return { index: Math.floor(random() * candidates.length), decision: "balance" };
  }
}

export const randomPolicy: PolicyDefinition<RandomOptions> = {
  options: randomOptionsSchema,
  create: () => new RandomPolicy(),
};
