/** NVIDIA Dynamo's KV router cost: the cost-model baseline. */
import { z } from "zod";
import { hash32 } from "../hash.ts";
import type { PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const dynamoKvOptionsSchema = z.strictObject({
  name: z.literal("dynamo-kv"),
  overlap_weight: z
    .number()
    .min(0)
    .default(1)
    .describe("Weight of the blocks a node would have to prefill against the KV blocks already active on it."),
});

export type DynamoKvOptions = z.output<typeof dynamoKvOptionsSchema>;

/**
 * NVIDIA Dynamo's KV router cost: `overlap_weight x prefill blocks + decode blocks`, where prefill
 * blocks are the request's blocks not covered by the worker's cached overlap and decode blocks are
 * the KV blocks active on the worker (its in-flight requests' prompts). Temperature 0: lowest cost
 * wins, ties broken by a hash of the request so they do not all fall on the first worker.
 */
export class DynamoKvPolicy implements RoutingPolicy {
  readonly name = "dynamo-kv";
  private readonly overlapWeight: number;
  constructor(options: DynamoKvOptions) {
    this.overlapWeight = options.overlap_weight;
  }
  choose({ candidates, request }: PolicyInput): PolicyChoice {
    const bt = Math.max(1, request.blockTokens);
    const costs = candidates.map((c) => this.overlapWeight * (c.uncachedTokens / bt) + (c.activeTokens + request.promptTokens) / bt);
    const min = Math.min(...costs);
    const tied = costs.flatMap((c, i) => (c === min ? [i] : []));
    const index = tied[hash32(request.hashes[0] ?? "") % tied.length]!;
    const best = Math.max(...candidates.map((c) => c.matchBlocks));
    const chosen = candidates[index]!.matchBlocks;
    return { index, decision: best === 0 ? "cold-spread" : chosen === best ? "prefix-hit" : "hot-spill" };
  }
}

export const dynamoKv: PolicyDefinition<DynamoKvOptions> = {
  options: dynamoKvOptionsSchema,
  create: (options) => new DynamoKvPolicy(options),
};
