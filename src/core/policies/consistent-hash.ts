/** Consistent hashing with bounded loads: the classic prefix-affinity baseline. */
import { z } from "zod";
import { boundedLoadChoice } from "./placement.ts";
import type { PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const consistentHashOptionsSchema = z.strictObject({
  name: z.literal("consistent-hash"),
  load_factor: z
    .number()
    .min(1)
    .max(10)
    .default(1.25)
    .describe("Bound on a node's requests in flight, as a multiple of the mean (counting the new request)."),
});

type ConsistentHashOptions = z.output<typeof consistentHashOptionsSchema>;

/**
 * Consistent hashing with bounded loads keyed on the first block, load counted in requests in
 * flight (the classic form, as in HAProxy and Envoy's ring hash with a load bound).
 */
class ConsistentHashPolicy implements RoutingPolicy {
  readonly name = "consistent-hash";
  private readonly loadFactor: number;
  constructor(options: ConsistentHashOptions) {
    this.loadFactor = options.load_factor;
  }
  choose({ candidates, request }: PolicyInput): PolicyChoice {
    const key = request.hashes[0] ?? request.sessionKey ?? "";
    const loads = candidates.map((c) => c.inflight);
    const { index, firstChoice } = boundedLoadChoice(candidates, key, loads, 1, this.loadFactor);
    const hit = candidates[index]!.matchBlocks > 0;
    return { index, decision: firstChoice ? (hit ? "prefix-hit" : "cold-spread") : "hot-spill" };
  }
}

export const consistentHash: PolicyDefinition<ConsistentHashOptions> = {
  options: consistentHashOptionsSchema,
  create: (options) => new ConsistentHashPolicy(options),
};
