/**
 * Drives the production RegionRouter (the class the region Durable Object wraps) from the
 * simulation. The router learns only what it could learn in production:
 * - its own decisions (route: the prefix index and load model are credited at dispatch);
 * - the first byte of each answer (firstByte at the simulated end of prefill);
 * - each answer's usage, with the node's TRUE cached tokens (complete at the end of decode);
 * - periodic load reports (running, waiting, kvUsage), stale between reports.
 */
import { DEFAULT_REGION_SETTINGS, RegionRouter, type RegionSettings } from "../src/core/region/index.ts";
import { DEFAULT_PREFIX_SETTINGS } from "../src/core/prefix.ts";
import { createPolicy, parsePolicySpec, type PolicySpec, type PolicySpecInput } from "../src/core/policies/index.ts";
import type { Dispatcher, Fleet, Live, SimNode } from "./fleet.ts";

const MODEL = "bench-model";

/**
 * @param learnFromUsage correct the index from the nodes' reported cached tokens. Default: only
 * for warmpath's policy. The baselines' anchors learn only from their own routing (SGLang's
 * approximate tree, Dynamo's approximate mode), so giving them warmpath's correction would make
 * them something their sources are not.
 */
export function benchRegionSettings(
  policy: PolicySpec,
  prefillRate: number,
  learnFromUsage: boolean = policy.name === "warmpath",
): RegionSettings {
  return {
    ...DEFAULT_REGION_SETTINGS,
    learnFromUsage,
    name: "bench",
    policy,
    blockTokens: DEFAULT_PREFIX_SETTINGS.blockChars / DEFAULT_PREFIX_SETTINGS.charsPerToken,
    // The operator configures the nodes' nominal prefill rate; the router refines it from first bytes.
    prefillTokensPerSecond: prefillRate,
    // One region has nowhere to fail over to: a "saturated" answer would only hide latency, so
    // every request is placed and past saturation its queueing shows up in TTFT.
    maxQueueSeconds: Infinity,
    maxInflightPerNode: Infinity,
  };
}

export class RouterDispatcher implements Dispatcher {
  readonly name: string;
  private readonly settings: RegionSettings;
  /** Built in init, once the fleet (and so the baseline's index bound) is known. */
  private router!: RegionRouter;
  /** The router driven (a sharded region's driver exchanges load between its shards' routers). */
  get regionRouter(): RegionRouter {
    return this.router;
  }
  private readonly indexOf = new Map<string, number>();
  private fleet: Fleet | undefined;

  private readonly capacityFactor: number;

  /**
   * @param policy a policy spec as configured; unset options take the policy's defaults
   * @param options.learnFromUsage see {@link benchRegionSettings}
   * @param options.capacityFactor the router is told each node's KV capacity times this (default
   *   1): above 1, the nodes evict what the router's own LRU still believes they hold
   * @param options.nodes the nodes this router knows (default: the whole fleet)
   * @param options.minCacheShare a shard's least believed part of a node's cache (default: the router's)
   */
  constructor(
    label: string,
    policy: PolicySpecInput,
    prefillRate: number,
    options: {
      learnFromUsage?: boolean | undefined;
      capacityFactor?: number;
      nodes?: (node: SimNode) => boolean;
      minCacheShare?: number | undefined;
    } = {},
  ) {
    this.name = label;
    this.settings = benchRegionSettings(parsePolicySpec(policy), prefillRate, options.learnFromUsage);
    if (options.minCacheShare !== undefined) this.settings.minCacheShare = options.minCacheShare;
    this.capacityFactor = options.capacityFactor ?? 1;
    this.serves = options.nodes ?? (() => true);
  }

  /** The fleet's nodes this router knows (a region's, when the fleet stands for several regions). */
  private readonly serves: (node: SimNode) => boolean;

  init(fleet: Fleet): void {
    this.fleet = fleet;
    // A baseline whose own index is bounded otherwise than by KV capacity (SGLang's tree, by
    // characters per worker) is not held to warmpath's global memory cap either: that cap is a
    // bound of warmpath's Durable Object, not of the system the baseline stands for.
    const bound = createPolicy(this.settings.policy).indexCapacityTokens?.(fleet.cfg.capacityTokens);
    const entries = bound === undefined ? 0 : Math.ceil((fleet.nodes.length * bound) / this.settings.blockTokens);
    this.router = new RegionRouter({ ...this.settings, maxIndexEntries: Math.max(this.settings.maxIndexEntries, entries) });
    for (const n of fleet.nodes) {
      if (!this.serves(n)) continue;
      this.indexOf.set(n.id, n.index);
      this.router.upsertNode(
        { id: n.id, url: `http://${n.id}`, models: [MODEL], kvCapacityTokens: this.toldCapacity(fleet), static: true, lastSeen: 0 },
        0,
      );
    }
  }

  route(r: Live, now: number): number {
    const res = this.router.route(
      { requestId: String(r.req.id), model: MODEL, hashes: r.req.hashes, promptTokens: r.req.promptTokens, sessionKey: r.req.sessionKey },
      now,
    );
    if (!res.ok) throw new Error(`router refused request ${r.req.id}: ${res.message}`);
    r.ticket = res.ticket;
    r.predictedCachedTokens = res.predictedCachedTokens;
    return this.indexOf.get(res.nodeId)!;
  }

  private toldCapacity(fleet: Fleet): number {
    return Math.round(fleet.cfg.capacityTokens * this.capacityFactor);
  }

  firstToken(r: Live, now: number): void {
    this.router.firstByte(r.ticket, now);
  }

  complete(r: Live, now: number): void {
    this.router.complete(
      r.ticket,
      {
        status: "ok",
        usage: { promptTokens: r.req.promptTokens, cachedTokens: r.cachedTokens, completionTokens: r.req.outputTokens },
      },
      now,
    );
  }

  report(node: SimNode, now: number): void {
    const cfg = this.fleet!.cfg;
    this.router.report(
      {
        node_id: node.id,
        region: "bench",
        url: `http://${node.id}`,
        models: [MODEL],
        kv_capacity_tokens: this.toldCapacity(this.fleet!),
        running: node.running,
        waiting: node.waiting,
        kv_usage: Math.min(1, node.activeKvTokens / cfg.capacityTokens),
      },
      now,
    );
  }
}
