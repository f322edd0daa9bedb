/**
 * NVIDIA Dynamo's KV router cost: the cost-model baseline.
 *
 * Source: ai-dynamo/dynamo, lib/kv-router/src/scheduling/selector/default.rs and
 * scheduling/config.rs at 07a6c9ce3bb096cfaf353fe69ee578e105c6a512 (`KvRouterConfig::default`),
 * with the active-sequence bookkeeping of lib/kv-router/src/sequences/ (single.rs at 04df1c42,
 * prefill_tracker.rs at 0b6b9200). Per worker, in blocks, lowest wins:
 *
 *   cost = prefill_load_scale x max(0, (active_prefill_tokens + prompt_tokens) / block - overlap_blocks)
 *        + active_blocks + new_blocks
 *
 * - active prefill tokens: the uncached prompt tokens of the requests sent to the worker that have
 *   not yet produced their first token (no credit for progress);
 * - overlap blocks: the request's cached prefix on the worker (overlap_score_credit 1.0; the
 *   credit decay is 0 by default, so it is undiscounted);
 * - active blocks: the distinct prompt blocks of the worker's requests in flight (released at the
 *   request's end; router_assume_kv_reuse = true, so a block shared by several is counted once);
 *   new blocks: the request's blocks not already among them. Output blocks are not counted
 *   (router_track_output_blocks = false), nor is the active request count (its weight is 0).
 * - temperature 0: the minimum, exact ties broken uniformly at random.
 * Defaults: prefill_load_scale 1.0, overlap credit 1.0, temperature 0.
 *
 * One difference, the same for every policy in warmpath: Dynamo's default indexer learns the
 * overlap from the engines' KV events, which an edge router does not receive; here, as in
 * Dynamo's approximate mode (use_kv_events = false), it comes from the router's own decisions
 * (warmpath's prefix index, bounded by each node's KV capacity). Blocks are warmpath's base
 * blocks (the unit cancels: every term is in blocks).
 */
import { z } from "zod";
import type { PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const dynamoKvOptionsSchema = z.strictObject({
  name: z.literal("dynamo-kv"),
  prefill_load_scale: z
    .number()
    .min(0)
    .default(1)
    .describe("Weight of the prefill blocks (queued plus this request's uncached) against the active KV blocks."),
});

type DynamoKvOptions = z.output<typeof dynamoKvOptionsSchema>;

class DynamoKvPolicy implements RoutingPolicy {
  readonly name = "dynamo-kv";
  readonly tracksActiveBlocks = true;
  private readonly prefillLoadScale: number;
  constructor(options: DynamoKvOptions) {
    this.prefillLoadScale = options.prefill_load_scale;
  }
  choose({ candidates, request, random }: PolicyInput): PolicyChoice {
    const bt = Math.max(1, request.blockTokens);
    const requestBlocks = request.promptTokens / bt;
    let min = Infinity;
    let tied: number[] = [];
    candidates.forEach((c, i) => {
      const prefill = Math.max(0, (c.queuedPrefillTokens + request.promptTokens) / bt - c.matchTokens / bt);
      const newBlocks = Math.max(0, requestBlocks - c.activeMatchBlocks);
      const cost = this.prefillLoadScale * prefill + c.activeBlocks + newBlocks;
      if (cost < min) {
        min = cost;
        tied = [i];
      } else if (cost === min) tied.push(i);
    });
    const index = tied.length === 1 ? tied[0]! : tied[Math.floor(random() * tied.length)]!;
    const best = Math.max(...candidates.map((c) => c.matchBlocks));
    const chosen = candidates[index]!.matchBlocks;
    return { index, decision: best === 0 ? "cold-spread" : chosen === best ? "prefix-hit" : "hot-spill" };
  }
}

export const dynamoKv: PolicyDefinition<DynamoKvOptions> = {
  options: dynamoKvOptionsSchema,
  create: (options) => new DynamoKvPolicy(options),
};
