/**
 * The baseline policies users compare warmpath against, on the same interfaces and information.
 * Each is a faithful, minimal version of what the named system does.
 */
import { hash32 } from "../hash.ts";
import { argMin, boundedLoadChoice, rendezvousOrder } from "./placement.ts";
import type { PolicyChoice, PolicyInput, RoutingPolicy } from "./types.ts";

/** Cycles through the nodes in order. */
export class RoundRobinPolicy implements RoutingPolicy {
  readonly name = "round-robin";
  private next = 0;
  choose({ candidates }: PolicyInput): PolicyChoice {
    const index = this.next++ % candidates.length;
    return { index, decision: "balance" };
  }
}

/** Picks a node uniformly at random. */
export class RandomPolicy implements RoutingPolicy {
  readonly name = "random";
  choose({ candidates, random }: PolicyInput): PolicyChoice {
    return { index: Math.floor(random() * candidates.length), decision: "balance" };
  }
}

/**
 * Least loaded with the power of two choices (Mitzenmacher): sample two distinct nodes, take the
 * one with fewer requests in flight. Nearly as good as the global minimum, without herding.
 */
export class LeastLoadedPolicy implements RoutingPolicy {
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

/**
 * Sticky sessions: the session (or user) key hashed to a node, whatever its load or cache. The
 * policy warmpath exists to beat: it keeps one user's turns together but cannot share a prefix
 * across users, and it cannot move a hot user off a busy node. Requests without a key are hashed
 * on their first block.
 */
export class StickySessionPolicy implements RoutingPolicy {
  readonly name = "sticky";
  choose({ candidates, request }: PolicyInput): PolicyChoice {
    const key = request.sessionKey ?? request.hashes[0] ?? "";
    return { index: rendezvousOrder(candidates, "sticky:" + key)[0]!, decision: "session" };
  }
}

/**
 * Consistent hashing with bounded loads keyed on the first block, load counted in requests in
 * flight (the classic form, as in HAProxy and Envoy's ring hash with a load bound).
 */
export class ConsistentHashPolicy implements RoutingPolicy {
  readonly name = "consistent-hash";
  private readonly loadFactor: number;
  /** @param loadFactor bound on a node's load relative to the mean (default 1.25) */
  constructor(loadFactor = 1.25) {
    this.loadFactor = loadFactor;
  }
  choose({ candidates, request }: PolicyInput): PolicyChoice {
    const key = request.hashes[0] ?? request.sessionKey ?? "";
    const loads = candidates.map((c) => c.inflight);
    const { index, firstChoice } = boundedLoadChoice(candidates, key, loads, 1, this.loadFactor);
    const hit = candidates[index]!.matchBlocks > 0;
    return { index, decision: firstChoice ? (hit ? "prefix-hit" : "cold-spread") : "hot-spill" };
  }
}

/** Parameters of {@link SglangCacheAwarePolicy}; defaults are SGLang router's current ones. */
export interface SglangCacheAwareOptions {
  /** Minimum matched fraction of the prompt to follow the cache. Default 0.3. */
  cacheThreshold: number;
  /** Imbalance needs max - min in-flight above this. Default 64. */
  balanceAbsThreshold: number;
  /** ...and max above this multiple of min. Default 1.5. */
  balanceRelThreshold: number;
}

export const SGLANG_DEFAULTS: SglangCacheAwareOptions = {
  cacheThreshold: 0.3,
  balanceAbsThreshold: 64,
  balanceRelThreshold: 1.5,
};

/**
 * SGLang router's cache-aware policy. Load is requests in flight per worker. When the fleet is
 * imbalanced (max - min > abs threshold AND max > rel threshold x min) the request goes to the
 * least loaded worker. Otherwise it goes to the worker with the longest prefix match in the
 * router's approximate tree if the match covers more than `cacheThreshold` of the prompt, else to
 * the worker with the smallest tree (the most free cache). The approximate tree is warmpath's
 * prefix index, which likewise learns from the router's own decisions.
 */
export class SglangCacheAwarePolicy implements RoutingPolicy {
  readonly name = "sglang-cache-aware";
  private readonly options: SglangCacheAwareOptions;
  constructor(options: SglangCacheAwareOptions = SGLANG_DEFAULTS) {
    this.options = options;
  }
  choose({ candidates, request }: PolicyInput): PolicyChoice {
    const loads = candidates.map((c) => c.inflight);
    const max = Math.max(...loads);
    const min = Math.min(...loads);
    const { cacheThreshold, balanceAbsThreshold, balanceRelThreshold } = this.options;
    if (max - min > balanceAbsThreshold && max > balanceRelThreshold * min) {
      return { index: argMin(loads), decision: "balance" };
    }
    let best = 0;
    for (let i = 1; i < candidates.length; i++) {
      if (candidates[i]!.matchTokens > candidates[best]!.matchTokens) best = i;
    }
    const rate = candidates[best]!.matchTokens / Math.max(1, request.promptTokens);
    if (rate > cacheThreshold) return { index: best, decision: "prefix-hit" };
    return { index: argMin(candidates.map((c) => c.indexBlocks)), decision: "cold-spread" };
  }
}

/**
 * NVIDIA Dynamo's KV router cost: `overlapWeight x prefill blocks + decode blocks`, where prefill
 * blocks are the request's blocks not covered by the worker's cached overlap and decode blocks are
 * the KV blocks active on the worker (its in-flight requests' prompts). Temperature 0: lowest cost
 * wins, ties broken by a hash of the request so they do not all fall on the first worker.
 */
export class DynamoKvPolicy implements RoutingPolicy {
  readonly name = "dynamo-kv";
  private readonly overlapWeight: number;
  /** @param overlapWeight weight of prefill blocks against decode blocks (Dynamo's default 1) */
  constructor(overlapWeight = 1) {
    this.overlapWeight = overlapWeight;
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
