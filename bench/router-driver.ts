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
import type { RouteRequest, RouteResult } from "../src/contracts/routing.ts";
import type { Decided, Dispatcher, Fleet, Live, Placement, SimNode } from "./fleet.ts";

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
  return withAdmission(
    {
      ...productionRegionSettings(policy, prefillRate, learnFromUsage),
      // One region has nowhere to fail over to: a "saturated" answer would only hide latency, so
      // every request is placed and past saturation its queueing shows up in TTFT.
      maxQueueSeconds: Infinity,
      maxInflightPerNode: Infinity,
    },
    // Pure placement: no admission by objective, no region queue (what every anchor does by
    // default), so `npm run bench` measures placement alone. bench/goodput.ts measures admission.
    false,
  );
}

/**
 * The region's settings as production ships them (DEFAULT_REGION_SETTINGS: admission on, the 30 s
 * saturation bound, 256 in flight per node), with the bench's policy, block size and the fleet's
 * nominal prefill rate: what bench/goodput.ts runs warmpath with.
 */
export function productionRegionSettings(
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
  };
}

/** `settings` with admission by objective (src/core/region/admission.ts) turned on or off, its other settings as they are. */
export function withAdmission(settings: RegionSettings, enabled: boolean): RegionSettings {
  return { ...settings, admission: { ...settings.admission, enabled } };
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
  /**
   * @param options.settings the region's settings instead of {@link benchRegionSettings} (bench/goodput.ts
   *   runs warmpath with {@link productionRegionSettings})
   * @param options.tenancy send each request's tenant, class and tenant objective (warmpath's
   *   admission reads them); off, every request is the same tenant's, as for the anchors, which
   *   have no tenants
   * @param options.refusals record the router's refusals (bench/goodput.ts) instead of failing the run
   * @param options.commitments each tenant's committed prompt tokens a minute, sent with its requests
   *   (with `tenancy`), as the worker sends the configured `committed_prompt_tokens_per_minute`
   * @param options.tellPlaces tell the router each node's places (the fleet's `slots`), as a node's
   *   configured or reported `max_running_requests` does (default: not told, as a configuration
   *   that does not say)
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
      settings?: (policy: PolicySpec, prefillRate: number) => RegionSettings;
      tenancy?: boolean;
      refusals?: boolean;
      commitments?: Readonly<Record<string, number>> | undefined;
      tellPlaces?: boolean | undefined;
    } = {},
  ) {
    this.name = label;
    const spec = parsePolicySpec(policy);
    this.settings = options.settings ? options.settings(spec, prefillRate) : benchRegionSettings(spec, prefillRate, options.learnFromUsage);
    if (options.minCacheShare !== undefined) this.settings.minCacheShare = options.minCacheShare;
    this.capacityFactor = options.capacityFactor ?? 1;
    this.serves = options.nodes ?? (() => true);
    this.tenancy = options.tenancy ?? false;
    this.refusals = options.refusals ?? false;
    this.commitments = options.commitments;
    this.tellPlaces = options.tellPlaces ?? false;
  }

  private readonly tellPlaces: boolean;

  private readonly tenancy: boolean;
  private readonly commitments: Readonly<Record<string, number>> | undefined;
  private readonly refusals: boolean;
  /** Requests held in the router's queue, by queue id. */
  private readonly queued = new Map<string, Live>();
  /** Refusals by reason (`shed:objective`, `saturated`, ...), for the report. */
  readonly refusalReasons = new Map<string, number>();

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
      this.router.configureNode(
        {
          id: n.id,
          url: `http://${n.id}`,
          models: [MODEL],
          kvCapacityTokens: this.toldCapacity(fleet),
          static: true,
          lastSeen: 0,
          ...(this.tellPlaces ? { maxRunning: fleet.cfg.slots } : {}),
        },
        0,
      );
    }
  }

  route(r: Live, now: number): number {
    const p = this.decide(r, now);
    if (typeof p !== "number") throw new Error(`router did not place request ${r.req.id}: ${JSON.stringify(p)}`);
    return p;
  }

  /**
   * The router's answer for `r` as the simulation takes it: a node, a refusal (with `refusals`) or
   * "queued" (admission on; {@link drain} decides it later). `exclude`: nodes it must not use.
   */
  decide(r: Live, now: number, exclude?: string[]): Placement {
    const req: RouteRequest = {
      requestId: String(r.req.id),
      model: MODEL,
      hashes: r.req.hashes,
      promptTokens: r.req.promptTokens,
      sessionKey: r.req.sessionKey,
    };
    if (exclude !== undefined && exclude.length > 0) req.exclude = exclude;
    if (this.tenancy) Object.assign(req, tenancyOf(r, this.commitments));
    // With admission off (the main bench, the anchors), admit is route: placed at once or refused.
    const res = this.router.admit(req, now);
    if (res.ok === "queued") {
      this.queued.set(res.queueId, r);
      return "queued";
    }
    return this.outcome(r, res);
  }

  /** A placement or refusal answered by the router, as the simulation takes it. */
  private outcome(r: Live, res: RouteResult): Placement {
    if (!res.ok) {
      if (!this.refusals) throw new Error(`router refused request ${r.req.id}: ${res.message}`);
      const reason = res.shed !== undefined ? `${res.reason}:${res.shed}` : res.reason;
      this.refusalReasons.set(reason, (this.refusalReasons.get(reason) ?? 0) + 1);
      return { refused: reason };
    }
    r.ticket = res.ticket;
    r.predictedCachedTokens = res.predictedCachedTokens;
    return this.indexOf.get(res.nodeId)!;
  }

  drain(now: number): Decided[] {
    if (this.queued.size === 0) return [];
    const out: Decided[] = [];
    for (const { queueId, result } of this.router.drainQueue(now)) {
      const live = this.queued.get(queueId);
      if (live === undefined) throw new Error(`router drained an unknown queue id ${queueId}`);
      this.queued.delete(queueId);
      const p = this.outcome(live, result);
      out.push(typeof p === "number" ? { live, node: p } : { live, refused: (p as { refused: string }).refused });
    }
    return out;
  }

  wakeAt(now: number): number | undefined {
    return this.queued.size === 0 ? undefined : this.router.queueWakeAt(now);
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
        ...(this.tellPlaces ? { max_running_requests: cfg.slots } : {}),
      },
      now,
    );
  }
}

/**
 * What warmpath's admission reads of a request (RouteRequest's tenant, priority, objectiveMs and
 * commitment): the tenant's class, configured objective and commitment, as the worker would send
 * them from configuration. Absent fields are left out, so a workload without tenants routes
 * exactly as before.
 */
function tenancyOf(
  r: Live,
  commitments: Readonly<Record<string, number>> | undefined,
): Pick<RouteRequest, "tenant" | "priority" | "objectiveMs" | "committedTokensPerMinute"> {
  const out: Pick<RouteRequest, "tenant" | "priority" | "objectiveMs" | "committedTokensPerMinute"> = {};
  if (r.req.tenant !== undefined) out.tenant = r.req.tenant;
  const committed = r.req.tenant === undefined ? undefined : commitments?.[r.req.tenant];
  if (committed !== undefined) out.committedTokensPerMinute = committed;
  if (r.req.priority !== undefined) out.priority = r.req.priority;
  if (r.req.objectiveMs !== undefined) out.objectiveMs = Math.round(r.req.objectiveMs);
  return out;
}
