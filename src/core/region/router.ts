/**
 * RegionRouter: one GPU region's routing state and decisions, with no I/O.
 *
 * It owns the node table, the prefix index, the load model and the routing policy, and turns
 * requests into decisions. The region Durable Object wraps one instance (and persists the node
 * table), and the benchmark drives the same class in simulated time, so every benchmark figure is
 * a figure of the production logic. Time is always passed in (`now`, ms).
 *
 * Request lifecycle: `route` (dispatch: the node is credited and the prefix recorded as held
 * there, speculatively) -> optionally `firstByte` (prefill done: the load model is corrected, the
 * prefix confirmed) -> `complete` (released; usage, if the answer carried it, is recorded as the
 * measured cache hit; a request the node refused or failed before its first byte is rolled back
 * out of the prefix index, which takes back what its insert evicted: PrefixIndex.speculate).
 */
import type { NodeReport } from "../../contracts/node.ts";
import type { CompletionOutcome, RouteRequest, RouteResult } from "../../contracts/routing.ts";
import { BoundedLru } from "../lru.ts";
import { createPolicy, type RoutingPolicy } from "../policies/index.ts";
import type { ShardLoad } from "../node-load.ts";
import { PrefixIndex } from "../prefix-index.ts";
import { ActiveBlocks } from "./active-blocks.ts";
import { ClassReserve } from "./class-reserve.ts";
import { FairShare } from "./fair-share.ts";
import { RegionLedger, type RegionHistoryView } from "./ledger.ts";
import { LongPrefixes, type RegionDigest } from "./long-prefixes.ts";
import { NodeTable, type NodeEntry, type NodeSpec } from "./node-table.ts";
import type { RegionParts } from "./parts.ts";
import { Placement } from "./placement.ts";
import { QueuedAdmission, type QueueOutcome, type RouteStep } from "./queued-admission.ts";
import type { RegionSettings } from "./settings.ts";
import { buildSnapshot, type RegionSnapshot } from "./snapshot.ts";
import { StoredResponses, ownerOf } from "./stored-responses.ts";
import { TenantDemand } from "./tenant-demand.ts";
import { Tickets } from "./tickets.ts";

export type { RouteStep } from "./queued-admission.ts";

/** A node no other shard has dispatched to lately. */
const NO_LOAD: ShardLoad = { queued: 0, recent: 0 };

export class RegionRouter {
  readonly settings: RegionSettings;
  private readonly nodes: NodeTable;
  /**
   * Each static node's places as configured (`max_running_requests`), by node id: a report's
   * figure overrides it while reports say one, and it holds again when they stop.
   */
  private readonly configuredPlaces = new Map<string, number>();
  private readonly index: PrefixIndex;
  private readonly sessions: BoundedLru<string, string>;
  private readonly responses: StoredResponses;
  private readonly policy: RoutingPolicy;
  private readonly active: ActiveBlocks | undefined;
  private readonly ledger = new RegionLedger();
  private readonly longPrefixes: LongPrefixes;
  private readonly reserve = new ClassReserve();
  /** The requests in flight (tickets.ts). */
  private readonly tickets: Tickets;
  /** The steps of a placement (placement.ts). */
  private readonly placement: Placement;
  /** The region's queue (queued-admission.ts). */
  private readonly admission: QueuedAdmission;

  constructor(settings: RegionSettings, instanceId = "0") {
    this.settings = settings;
    this.nodes = new NodeTable(settings);
    this.index = new PrefixIndex(settings.maxIndexEntries);
    this.longPrefixes = new LongPrefixes(settings.blockTokens);
    this.sessions = new BoundedLru(settings.maxSessions);
    this.responses = new StoredResponses(settings.maxSessions);
    this.policy = createPolicy(settings.policy);
    this.active = this.policy.tracksActiveBlocks ? new ActiveBlocks() : undefined;
    const parts: RegionParts = {
      settings,
      nodes: this.nodes,
      index: this.index,
      policy: this.policy,
      sessions: this.sessions,
      responses: this.responses,
      active: this.active,
      longPrefixes: this.longPrefixes,
      ledger: this.ledger,
      fair: new FairShare(),
      reserve: this.reserve,
      demand: new TenantDemand(),
    };
    const prefix = instanceId + ".";
    this.tickets = new Tickets(parts, prefix);
    this.placement = new Placement(parts, this.tickets);
    this.admission = new QueuedAdmission(parts, this.placement, prefix);
  }

  /**
   * Adds or updates a node the configuration declares (a static node): its places as configured
   * are what a report that does not say them falls back to.
   */
  configureNode(spec: NodeSpec, now: number): void {
    if (spec.maxRunning !== undefined) this.configuredPlaces.set(spec.id, spec.maxRunning);
    else this.configuredPlaces.delete(spec.id);
    this.upsertNode({ ...spec, static: true }, now);
  }

  /**
   * Adds or updates a node from its spec: as stored (a restart's node table) or as a report gave
   * it. What configuration declares goes through {@link configureNode}.
   */
  upsertNode(spec: NodeSpec, now: number): void {
    if (this.nodes.upsert(spec, now)) {
      // Restarted: its cache and its requests are gone (their tickets stay, to be released).
      this.index.clearNode(spec.id);
      this.active?.forget(spec.id);
      this.responses.forgetNode(spec.id);
      this.tickets.nodeRestarted(spec.id);
    }
    const n = this.nodes.get(spec.id)!;
    this.index.setNode(spec.id, this.indexCapacity(n));
  }

  /** A node's capacity in the index, in blocks: what the policy believes of its KV cache, times this router's share of it. */
  private indexCapacity(n: NodeEntry): number {
    const believable = this.policy.indexCapacityTokens?.(n.spec.kvCapacityTokens) ?? n.spec.kvCapacityTokens;
    return (believable * n.cacheShare) / this.settings.blockTokens;
  }

  /**
   * What this router has dispatched to each node, for the other shards of a sharded region
   * (src/core/shard.ts): node id -> its queued and recent prefill, idle nodes left out.
   */
  ownLoad(now: number): Record<string, ShardLoad> {
    const out: Record<string, ShardLoad> = {};
    for (const n of this.nodes.values()) {
      const queued = Math.round(n.load.ownWorkAhead(now));
      const recent = Math.round(n.load.ownRecentPrefill(now));
      // Requests in flight only where the node's places are known: only the wait for a place reads them.
      const inflight = n.load.maxRunning === undefined ? 0 : n.load.inflight;
      if (queued > 0 || recent > 0 || inflight > 0) out[n.spec.id] = inflight > 0 ? { queued, recent, inflight } : { queued, recent };
    }
    return out;
  }

  /**
   * The other shards' loads per node (their {@link ownLoad}s summed), as of `now`: their queued
   * work is ahead of anything this router sends, their recent work counts in the fleet's
   * utilisation and in who has been busy lately. A node left out has none.
   */
  shareForeignLoad(foreign: Readonly<Record<string, ShardLoad>>, now: number): void {
    const resized: Array<[string, number]> = [];
    for (const n of this.nodes.values()) {
      // Own keys only: a node may be named `constructor`, which every object inherits.
      n.load.shareForeign(Object.hasOwn(foreign, n.spec.id) ? foreign[n.spec.id]! : NO_LOAD, now);
      // The other shards' prompts fill the same cache: in an LRU cache a stream of insertions
      // holds the share of it that it inserts, so this shard's prompts survive as long as its
      // share of the node's recent prefill would keep them. Believing the whole cache its own
      // kept blocks the others had evicted and sent requests to warm-looking, busy nodes: mean
      // TTFT 1.06x the single object's on chat-heavy at twice the load (bench/SHARDS.md).
      const all = n.load.recentPrefill(now);
      const share = all > 0 ? Math.max(this.settings.minCacheShare, n.load.ownRecentPrefill(now) / all) : 1;
      if (share !== n.cacheShare) {
        n.cacheShare = share;
        resized.push([n.spec.id, this.indexCapacity(n)]);
      }
    }
    this.index.resizeNodes(resized);
  }

  /**
   * The long prefixes this region holds (long-prefixes.ts): checkpoints of recent long prompts that
   * a node is still believed to hold, and the region's mean learned prefill rate.
   */
  digest(): RegionDigest {
    const ids: string[] = [];
    let rate = 0;
    for (const n of this.nodes.values()) {
      ids.push(n.spec.id);
      rate += n.load.prefillRate;
    }
    const entries = this.longPrefixes.digest((hash) => this.index.matchDepths([hash], ids).some((d) => d > 0));
    return {
      region: this.settings.name,
      prefillTokensPerSecond: ids.length ? rate / ids.length : this.settings.prefillTokensPerSecond,
      entries,
    };
  }

  /** Remembers which node holds a stored response, for the tenant its id names (for a sharded region's other shards; see firstByte). */
  rememberResponse(responseId: string, nodeId: string): void {
    const tenant = ownerOf(responseId);
    if (this.nodes.get(nodeId) && tenant !== undefined) this.responses.remember(responseId, tenant, nodeId);
  }

  /** Applies a node's load report; a first report registers the node. Returns the stored spec. */
  report(r: NodeReport, now: number): NodeSpec {
    const prior = this.nodes.get(r.node_id);
    this.upsertNode(
      {
        id: r.node_id,
        url: r.url,
        models: r.models,
        kvCapacityTokens: r.kv_capacity_tokens,
        static: prior?.spec.static ?? false,
        lastSeen: now,
        bootId: r.boot_id,
        // A report that does not say keeps what configuration (a static node) or an earlier report said.
        engine: r.engine ?? prior?.spec.engine,
        // Places: what the report says, else the configuration's, else none. Not an earlier report's:
        // an agent says them in every report while it knows them, so one that stops (restarted
        // without --max-running, or another engine behind it) no longer knows them, and a stale
        // figure would predict a wait for a place the engine may not have (and shed for it).
        maxRunning: r.max_running_requests ?? this.configuredPlaces.get(r.node_id),
      },
      now,
    );
    const entry = this.nodes.get(r.node_id)!;
    entry.load.report({ running: r.running, waiting: r.waiting, kvUsage: r.kv_usage, at: now });
    return entry.spec;
  }

  /** Removes a node (deregistration or expiry). Its in-flight tickets are forgotten. */
  removeNode(nodeId: string): boolean {
    if (!this.nodes.delete(nodeId)) return false;
    this.configuredPlaces.delete(nodeId);
    this.reserve.forgetNode(nodeId);
    this.index.removeNode(nodeId);
    this.active?.forget(nodeId);
    this.sessions.deleteWhere((n) => n === nodeId);
    this.responses.forgetNode(nodeId);
    this.tickets.nodeRemoved(nodeId);
    return true;
  }

  /** Whether {@link expire} would remove a node now (one silent for nodeSilenceMs or longer). */
  hasSilentNodes(now: number): boolean {
    return this.nodes.silent(now).expired.length > 0;
  }

  /**
   * Expires silent reporting nodes and abandoned tickets. Returns the expired node ids and the
   * time of the next expiry (for the Durable Object's alarm), or undefined if nothing can expire.
   */
  expire(now: number): { expired: string[]; nextAt: number | undefined } {
    const { expired, nextAt: nodesNextAt } = this.nodes.silent(now);
    let nextAt = nodesNextAt;
    for (const id of expired) this.removeNode(id);
    const ticketsAt = this.tickets.expire(now);
    if (ticketsAt !== undefined) nextAt = Math.min(nextAt ?? Infinity, ticketsAt);
    return { expired, nextAt };
  }

  /**
   * Chooses a node for a request and credits it, or refuses it (placement.ts): the nodes that may
   * take it at all, the tenant's fair share of the region, the nodes held for the other tenants,
   * saturation, the tenant's rate budget, the policy's choice, and the placement.
   */
  route(req: RouteRequest, now: number): RouteResult {
    return this.placement.route(req, now);
  }

  /**
   * A request arrives: what the region object and the benchmark call. With admission off
   * (`settings.admission.enabled`), {@link route}: placed at once or refused. With it on
   * (docs/ADMISSION.md, queued-admission.ts), it joins the region's queue, which is served at once:
   * placed now if a node can meet its objective and nobody the region releases first is ahead of
   * it; otherwise `queued` (its answer comes from {@link drainQueue}), or shed now if even after
   * the queue it would be late.
   */
  admit(req: RouteRequest, now: number): RouteStep {
    return this.admission.admit(req, now);
  }

  /**
   * Serves the queue now: places or refuses whatever can be, in the queue's order (after a first
   * byte, a completion, a report or a new node, and at {@link queueWakeAt}). Returns every queued
   * request decided since the last call, by this call or by an arrival's.
   */
  drainQueue(now: number): QueueOutcome[] {
    return this.admission.drain(now);
  }

  /** Requests waiting in the queue, by class (interactive, standard, batch). */
  queueDepth(): number[] {
    return this.admission.depth();
  }

  /**
   * When the queue must be served again if nothing else happens (the caller's timer): the first
   * time a queued request can no longer be served in time, or a node's modelled queue falls within
   * the dispatch bound. Undefined with an empty queue.
   */
  queueWakeAt(now: number): number | undefined {
    return this.admission.wakeAt(now);
  }

  /** A queued request whose caller went away: out of the queue, with nothing counted against it. Returns whether it was queued. */
  cancelQueued(queueId: string): boolean {
    return this.admission.cancel(queueId);
  }

  /** The tenant spent its budget (src/core/usage/spend.ts, checked by the region object): counted and kept among the recent decisions. */
  rejectOverBudget(req: RouteRequest, now: number): void {
    this.placement.rejectOverBudget(req, now);
  }

  /** The first byte of a request's answer arrived: its prefill is done. A stored response's id, if any, is remembered with its node. */
  firstByte(ticketId: string, now: number, responseId?: string, accepted = true): void {
    this.tickets.firstByte(ticketId, now, responseId, accepted);
  }

  /** Releases a request. Returns false for an unknown (expired or foreign) ticket. */
  complete(ticketId: string, outcome: CompletionOutcome, now: number): boolean {
    return this.tickets.complete(ticketId, outcome, now);
  }

  /** The durable node table. */
  nodeSpecs(): NodeSpec[] {
    return this.nodes.specs();
  }

  /** One node's durable spec (a copy), or undefined. */
  nodeSpec(nodeId: string): NodeSpec | undefined {
    return this.nodes.spec(nodeId);
  }

  /** Everything an operator needs to see why requests went where they did. */
  snapshot(now: number): RegionSnapshot {
    return buildSnapshot(
      {
        region: this.settings.name,
        policy: this.policy.name,
        table: this.nodes,
        index: this.index,
        inflight: this.tickets.size,
        sessions: this.sessions.size,
        ledger: this.ledger.counters(),
        queue: this.admission.view(),
      },
      now,
    );
  }

  /** The last hour in buckets and the most recent decisions: what the dashboard opens with. */
  historyView(now: number): RegionHistoryView {
    return this.ledger.view(this.settings.name, now);
  }
}
