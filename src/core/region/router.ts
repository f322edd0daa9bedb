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
import { nodeComputed, type CompletionOutcome, type Considered, type RouteRequest, type RouteResult } from "../../contracts/routing.ts";
import type { Candidate, PolicyChoice } from "../policies/types.ts";
import { BoundedLru } from "../lru.ts";
import { StoredResponses, ownerOf } from "./stored-responses.ts";
import { createPolicy, type Decision, type RoutingPolicy } from "../policies/index.ts";
import type { ShardLoad } from "../node-load.ts";

/** A node no other shard has dispatched to lately. */
const NO_LOAD: ShardLoad = { queued: 0, recent: 0 };
import { PrefixIndex } from "../prefix-index.ts";
import { seededRandom } from "../random.ts";
import { baseBlocksBefore } from "../block-layout.ts";
import { ActiveBlocks } from "./active-blocks.ts";
import { ENGINE_BLOCK_ALLOWANCE_TOKENS, compareShares } from "./agreement.ts";
import { buildCandidates, eligibleNodes, shortestWaitSeconds } from "./candidates.ts";
import { considered, estimateMs, estimateWaitMs } from "./considered.ts";
import { countAgreement, countDuration, countFirstByte, countOutcome, countRouted, uncountPrediction } from "./metrics.ts";
import { NodeTable, type NodeEntry, type NodeSpec } from "./node-table.ts";
import type { RegionSettings } from "./settings.ts";
import { RateBudgets, rateLimitOf, type BudgetResult } from "./rate-budget.ts";
import { FairShare, type Admission } from "./fair-share.ts";
import { holdForOthers, shareNodes, type CandidateField } from "./hold-for-others.ts";
import {
  shedRefusal,
  noNodeRefusal,
  overShareRefusal,
  rateLimitedRefusal,
  saturatedRefusal,
  noContinuerRefusal,
  unavailableRefusal,
  unknownResponseRefusal,
  type RouteRefusal,
} from "./refusals.ts";
import { LongPrefixes, type RegionDigest } from "./long-prefixes.ts";
import { RegionLedger, type LedgerEntry, type RegionHistoryView } from "./ledger.ts";
import { buildSnapshot, type RegionSnapshot } from "./snapshot.ts";
import { AdmissionQueue, classRank, demotedRank, RANKS, rankClass, type QueueEntry, type Visit } from "./admission-queue.ts";
import { CLASS_ACTIVE_MS, dispatchBoundMs, fluidTtftMs, leastOwnCost, meetingDeadline, retryAfterSeconds, waitMs } from "./admission.ts";
import { objectiveMs } from "./objective.ts";
import { ClassReserve } from "./class-reserve.ts";
import { TenantDemand } from "./tenant-demand.ts";
import { PRIORITY_CLASSES, type ShedReason } from "../../contracts/routing.ts";

/**
 * What `route` answers: a placement or a refusal now, or `queued`: the request waits in the
 * region's queue, and its answer comes later from {@link RegionRouter.drainQueue}.
 */
export type RouteStep = RouteResult | { ok: "queued"; queueId: string };

/** A queued request's answer, once the region has placed or refused it. */
interface QueueOutcome {
  queueId: string;
  result: RouteResult;
}

/** What a request's admission carries through the steps of a placement. */
interface Admitted {
  priority: (typeof PRIORITY_CLASSES)[number];
  /** Its rank in the region's order (admission-queue.ts): its class's, or EXCESS_RANK. */
  rank: number;
  objectiveMs: number;
  queuedMs: number;
}

/** Admission off: what a placement says of its class and objective. */
const NO_ADMISSION = (req: RouteRequest): Admitted => ({
  priority: req.priority ?? "standard",
  rank: classRank(req.priority),
  objectiveMs: 0,
  queuedMs: 0,
});

/** A ticket's joined hashes, one string per block again. */
function chainHashes(chain: string): string[] {
  const out = new Array<string>(chain.length / HASH_CHARS);
  for (let k = 0; k < out.length; k++) out[k] = chain.slice(k * HASH_CHARS, (k + 1) * HASH_CHARS);
  return out;
}

/** Characters of one block hash (routeRequestSchema). */
const HASH_CHARS = 16;

/** A dispatched request, until it completes or times out. */
interface Ticket {
  nodeId: string;
  dispatchedAt: number;
  predicted: { startAt: number; prefillEnd: number };
  uncachedTokens: number;
  promptTokens: number;
  firstByteAt: number | undefined;
  /**
   * The prompt's hashes, joined into one string (16 characters each: routeRequestSchema), kept for
   * every request in flight: 16 bytes a block, where the route call's array of strings holds a
   * string object and a slot per block (bench/ROUTE_COST.md, memory per request in flight), for one
   * join per route. Split again by {@link chainHashes} on the paths that need them (a failed
   * request, a silent restart, releasing active blocks).
   */
  chain: string;
  /** Whether its blocks are among the node's active blocks (a restart drops them). */
  active: boolean;
  /**
   * The blocks of the prompt its dispatch inserted into the index speculatively and claimed,
   * `[claimedFrom, claimedTo)` (PrefixIndex.speculate): confirmed when the node accepts the
   * request (its first byte, or a computed completion), rolled back if it refuses or fails it,
   * confirmed if the ticket is abandoned (as every dispatch was held before rollbacks). Empty once
   * resolved, or once the node's cache is gone (a restart).
   */
  claimedFrom: number;
  claimedTo: number;
  /** The believed cached prefix at dispatch, in blocks and tokens. */
  matchBlocks: number;
  predictedCachedTokens: number;
  /**
   * When the index last touched blocks of that prefix before this dispatch re-touched them, at
   * depths 0, 1, 2, 4, 8, ... and the deepest (pairs of depth and sequence number): what the
   * node's answer is compared with (see learnFromUsage).
   */
  touched: Array<[number, number]>;
  /** Its place in the region's ledger (tenant counters, history, recent decisions). */
  ledger: LedgerEntry;
  /** The trial request of the node's half-open breaker. */
  trial: boolean;
  /** Its class's rank (admission-queue.ts classRank). */
  rank: number;
}

/** The chosen candidate (its index among the candidates) and what dispatching the request there decided and predicted. */
interface Dispatched {
  index: number;
  decision: Decision;
  estimatedTtftMs: number;
  predicted: Ticket["predicted"];
  touched: Ticket["touched"];
  claimed: { from: number; to: number };
  admitted: Admitted;
}

/**
 * A choice among the nodes that meet a request's deadline, as the log explains it: a node holding
 * less of the prompt than one left out for its queue is a `hot-spill`, as the policy would have
 * called it had it seen that node.
 */
function spilledPast(choice: PolicyChoice, meeting: readonly Candidate[], all: readonly Candidate[]): PolicyChoice {
  if (choice.decision !== "cold-spread" && choice.decision !== "prefix-hit") return choice;
  let deepest = 0;
  for (const c of all) deepest = Math.max(deepest, c.matchBlocks);
  return meeting[choice.index]!.matchBlocks < deepest ? { ...choice, decision: "hot-spill" } : choice;
}

/** The decision a placement is logged as: a failover is one whatever else happens in this region; a retry is another node after a failure. */
function decisionOf(req: RouteRequest, choice: PolicyChoice): Decision {
  // A continuation's node is the policy's choice (its cache hit, its spread), not a retry's.
  return req.failoverFrom !== undefined ? "failover" : req.exclude?.length && !req.continuation ? "retry" : choice.decision;
}

/**
 * A node whose answers show nothing cached (within one engine block) this many times in a row,
 * each predicted to reuse at least MIN_EVIDENCE_BLOCKS, has lost its cache (restarted without a new boot id): forget all it
 * was believed to hold. Three: one such answer is an eviction, three in a row on different
 * prompts is the whole cache.
 */
const SILENT_RESTART_MISSES = 3;
/**
 * A miss counts towards a cache loss only on a prefix touched within the most recent half of the
 * node's believed capacity: an LRU evicts a block only once about its capacity in newer blocks has
 * come in, so only a node whose real capacity is under half what it reports could have evicted it.
 * Measured: counting every near-empty answer instead (no recency) cleared nodes under ordinary
 * evictions and cost a point of hit rate on Mooncake with the capacity overstated 2x (17.0% ->
 * 16.0%, bench "Index agreement"); a quarter missed a node that lost a third of its capacity's
 * worth of documents (bench/test/router-e2e.test.ts).
 */
const CAPACITY_MISESTIMATE_FACTOR = 2;
/** A prediction below this many blocks is too small to say anything about the node's cache. */
const MIN_EVIDENCE_BLOCKS = 2;

export class RegionRouter {
  readonly settings: RegionSettings;
  private readonly nodes: NodeTable;
  private readonly index: PrefixIndex;
  private readonly tickets = new Map<string, Ticket>();
  private readonly sessions: BoundedLru<string, string>;
  /** Stored responses (Responses API, `tenant:resp_...`) -> the node holding each and its tenant: a follow-up must go there, and only its tenant's. */
  private readonly responses: StoredResponses;
  private readonly policy: RoutingPolicy;
  /** In-flight prompt blocks per node, for a policy that reads them (dynamo-kv). */
  private readonly active: ActiveBlocks | undefined;
  private readonly random: () => number;
  private ticketSeq = 0;
  private readonly ticketPrefix: string;
  private readonly ledger = new RegionLedger();
  /** The long prompts dispatched here, for the edge's cross-region choice (long-prefixes.ts). */
  private readonly longPrefixes: LongPrefixes;
  private readonly fair = new FairShare();
  private readonly budgets = new RateBudgets();
  /** Requests no node can take in time yet (admission-queue.ts), and the answers decided for them since the caller last asked. */
  private readonly queue: AdmissionQueue;
  private outbox: QueueOutcome[] = [];
  private queueSeq = 0;
  /** When a request of each class was last seen: a class below an active one takes only idle nodes (admission.ts). */
  private readonly classSeenAt: number[] = new Array<number>(RANKS).fill(-Infinity);
  /** The nodes the classes below an active one may keep busy (class-reserve.ts). */
  private readonly reserve = new ClassReserve();
  /** Tenants sending more than their share, queued a class lower (tenant-demand.ts). */
  private readonly demand = new TenantDemand();
  /** Placements so far, and an arrival's candidates as admit() built them: the queue serving it in the same call, nothing placed since, reuses them (built once, not twice). */
  private placements = 0;
  private arrival: { id: string; placements: number; found: ReturnType<typeof eligibleNodes>; candidates: Candidate[] } | undefined;

  constructor(settings: RegionSettings, instanceId = "0") {
    this.settings = settings;
    this.nodes = new NodeTable(settings);
    this.index = new PrefixIndex(settings.maxIndexEntries);
    this.longPrefixes = new LongPrefixes(settings.blockTokens);
    this.sessions = new BoundedLru(settings.maxSessions);
    this.responses = new StoredResponses(settings.maxSessions);
    this.policy = createPolicy(settings.policy);
    this.active = this.policy.tracksActiveBlocks ? new ActiveBlocks() : undefined;
    this.random = seededRandom(settings.seed);
    this.ticketPrefix = instanceId + ".";
    this.queue = new AdmissionQueue(settings.admission.maxQueued, settings.admission.maxQueuedBlocks);
  }

  /** Adds or updates a node from its spec (static configuration or restored storage). */
  upsertNode(spec: NodeSpec, now: number): void {
    if (this.nodes.upsert(spec, now)) {
      // Restarted: its cache and its requests are gone (their tickets stay, to be released).
      this.index.clearNode(spec.id);
      this.active?.forget(spec.id);
      this.responses.forgetNode(spec.id);
      for (const t of this.tickets.values()) if (t.nodeId === spec.id) t.active = false;
      this.dropClaims(spec.id);
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
      if (queued > 0 || recent > 0) out[n.spec.id] = { queued, recent };
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
      n.load.shareForeign(foreign[n.spec.id] ?? NO_LOAD, now);
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
    this.reserve.forgetNode(nodeId);
    this.index.removeNode(nodeId);
    this.active?.forget(nodeId);
    this.sessions.deleteWhere((n) => n === nodeId);
    this.responses.forgetNode(nodeId);
    for (const [t, ticket] of this.tickets) {
      if (ticket.nodeId !== nodeId) continue;
      this.tickets.delete(t);
      if (ticket.firstByteAt === undefined) this.fair.drained(ticket.ledger.tenant, ticket.nodeId, ticket.uncachedTokens);
    }
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
    for (const [t, ticket] of this.tickets) {
      const deadline = ticket.dispatchedAt + this.settings.requestTimeoutMs;
      if (deadline <= now) this.release(t, ticket, now);
      else nextAt = Math.min(nextAt ?? Infinity, deadline);
    }
    return { expired, nextAt };
  }

  /**
   * Chooses a node for a request and credits it. Each step either narrows where the request may go
   * or refuses it, in this order: the nodes that may take it at all, the tenant's fair share of the
   * region, the nodes held for the other tenants, saturation, the tenant's rate budget (last, as it
   * is spent only where the request is placed), the policy's choice, and the placement.
   */
  route(req: RouteRequest, now: number): RouteResult {
    const unknown = this.refuseUnknownResponse(req);
    if (unknown) return unknown;
    const found = eligibleNodes(this.nodes, req, now, this.settings.maxInflightPerNode, this.settings.nodeTenants);
    if (found.nodes.length === 0) return this.refuseUnservable(req, found.servesModel, now, found.servesEngine);
    const all: CandidateField = {
      candidates: buildCandidates(found.nodes, this.index, req, this.settings.blockTokens, now, this.active),
      eligible: found.nodes,
    };
    const tenant = req.tenant ?? "";
    const admission = this.admitFairShare(req, tenant, all.candidates, now);
    if (!admission.ok) return this.refuseOverShare(req, tenant, admission, all, now);
    const pinnedNode = this.storedResponseNode(req);
    const field = holdForOthers(all, admission, pinnedNode, req.promptTokens);
    const saturated = this.refuseIfSaturated(req, field, now);
    if (saturated) return saturated;
    const budget = this.budgets.take(tenant, req.tenantLimits, req.promptTokens, now);
    const rateLimit = rateLimitOf(budget);
    if (!budget.ok) return this.refuseRateLimited(req, tenant, budget, rateLimit, now);
    const choice = this.choose(req, field.candidates, pinnedNode);
    return this.place(req, tenant, field, choice, admission, rateLimit, NO_ADMISSION(req), now);
  }

  /**
   * A request arrives: what the region object and the benchmark call. With admission off
   * (`settings.admission.enabled`), {@link route}: placed at once or refused. With it on
   * (docs/ADMISSION.md), the request joins the region's queue in its class and its tenant's lane,
   * and the queue is served at once, so it is placed now if a node can meet its objective and it is
   * not behind anyone the region releases first. Otherwise it waits (`queued`: its answer comes
   * from {@link drainQueue}), unless even after the queue it would be late: then it is shed now,
   * before it costs anything. A region with no node that may take it answers as {@link route} does,
   * and so are a retry and a continuation placed: they were admitted when they arrived.
   */
  admit(req: RouteRequest, now: number): RouteStep {
    const unknown = this.refuseUnknownResponse(req);
    if (unknown) return unknown;
    // A retry (its first node failed before the first byte) or a continuation (the client holds part
    // of the answer) was admitted already: it goes at once, ahead of the queue.
    if (!this.settings.admission.enabled || req.exclude?.length || req.continuation) return this.route(req, now);
    const found = eligibleNodes(this.nodes, req, now, this.settings.maxInflightPerNode, this.settings.nodeTenants);
    if (found.nodes.length === 0) return this.refuseUnservable(req, found.servesModel, now, found.servesEngine);
    const asked = classRank(req.priority);
    const candidates = buildCandidates(found.nodes, this.index, req, this.settings.blockTokens, now, this.active);
    // What a region refuses whatever the objective, as without admission: a queue past
    // max_queue_seconds or a failover it cannot start sooner (another region should serve).
    const all: CandidateField = { candidates, eligible: found.nodes };
    const saturated = this.refuseIfSaturated(req, all, now);
    if (saturated) return saturated;
    const meanRate = this.regionRate(found.nodes);
    const objective = objectiveMs(req, meanRate, this.settings.admission);
    const { ownMs, work } = leastOwnCost(candidates);
    // A tenant over its share of the recent demand loses the class it asked for while it is
    // (tenant-demand.ts: below batch, unless it asked for batch),
    // and is refused (another region, else 429) if every node it may use has a queue past the fair
    // share's bound. A tenant within its share is never refused for it: the fair share judges
    // dispatched prefill, which the queue's class order tilts towards the higher classes (refused
    // on that alone, 4% of the interactive requests at 2x load with noise were refused as over
    // their share although interactive traffic was a third of the demand: bench/GOODPUT.md).
    const tenant = req.tenant ?? "";
    this.demand.arrived(tenant, req.tenantWeight ?? 1, work, now, asked);
    const flooding = this.demand.overShare(tenant, now);
    const share = this.admitFairShare(req, tenant, candidates, now);
    if (!share.ok && flooding !== undefined) return this.refuseOverShare(req, tenant, share, all, now);
    const rank = demotedRank(asked, flooding);
    this.classSeenAt[rank] = now;
    this.reserve.arrived(rank, work, now);
    const entry = {
      id: `${this.ticketPrefix}q${(++this.queueSeq).toString(36)}`,
      req,
      tenant: req.tenant ?? "",
      weight: req.tenantWeight ?? 1,
      rank,
      enqueuedAt: now,
      deadlineAt: now + objective - (req.spentMs ?? 0),
      objectiveMs: objective,
      ownMs,
      work,
      blocks: req.hashes.length,
      key: 0,
    };
    entry.key = this.settings.admission.order === "deadline" ? entry.deadlineAt : work;
    const added = this.queue.add(entry);
    let mine: RouteResult | undefined;
    this.arrival = { id: entry.id, placements: this.placements, found, candidates };
    this.serveQueue(now, (id, result) => {
      if (id !== entry.id) return false;
      mine = result;
      return true;
    });
    this.arrival = undefined;
    if (mine) return mine;
    // Worth waiting only if, served after everything the region releases first, it would still be in time.
    const bound = dispatchBoundMs(this.settings.admission.dispatchWaitMs, this.higherActive(rank, now));
    const predicted = fluidTtftMs(this.nodeWaits(found.nodes, now), this.queue.workAhead(added), bound, ownMs);
    if (now + predicted > added.deadlineAt) {
      this.queue.remove(added);
      return this.shed(added, "objective", now);
    }
    const room = this.queue.makeRoom(added);
    if (!room) return this.shed(added, "queue-full", now);
    for (const v of room.evicted) this.outbox.push({ queueId: v.id, result: this.shed(v, "queue-full", now, true) });
    return { ok: "queued", queueId: entry.id };
  }

  /**
   * Serves the queue now: places or refuses whatever can be, in the queue's order (after a first
   * byte, a completion, a report or a new node, and at {@link queueWakeAt}). Returns every queued
   * request decided since the last call, by this call or by an arrival's (`route`).
   */
  drainQueue(now: number): QueueOutcome[] {
    if (this.queue.size > 0) this.serveQueue(now);
    const out = this.outbox;
    this.outbox = [];
    return out;
  }

  /** Requests waiting in the queue, by class (interactive, standard, batch). */
  queueDepth(): number[] {
    return this.queue.depthByClass();
  }

  /**
   * When the queue must be served again if nothing else happens (the caller's timer): the first
   * time a queued request can no longer be served in time (it is then refused), or a node's modelled
   * queue falls within the dispatch bound (it can then take one). Undefined with an empty queue.
   */
  queueWakeAt(now: number): number | undefined {
    if (this.queue.size === 0) return undefined;
    let at = Infinity;
    for (const e of this.queue.entries()) at = Math.min(at, e.deadlineAt - e.ownMs);
    const bound = this.settings.admission.dispatchWaitMs;
    for (const n of this.nodes.values()) {
      const w = waitMs(n, now);
      if (w > bound) at = Math.min(at, now + w - bound);
    }
    return Math.max(now + 1, Math.ceil(at));
  }

  /** A queued request whose caller went away: out of the queue, with nothing counted against it. Returns whether it was queued. */
  cancelQueued(queueId: string): boolean {
    const e = this.queue.get(queueId);
    if (!e) return false;
    this.queue.remove(e);
    return true;
  }

  /** Visits the queue in order; `deliver` may take an outcome itself (an arrival's own), otherwise it goes to the outbox. */
  private serveQueue(now: number, deliver: (id: string, result: RouteResult) => boolean = () => false): void {
    // The least modelled wait of any node: a cheap bound that skips every entry no node can take,
    // without building its candidates (the usual case past saturation). Updated after a placement.
    const leastWait = () => {
      let least = Infinity;
      for (const n of this.nodes.values()) least = Math.min(least, waitMs(n, now));
      return least;
    };
    let minWait = leastWait();
    const nodes = [...this.nodes.values()];
    const meanRate = this.regionRate(nodes);
    const decided = (e: QueueEntry, result: RouteResult): Visit => {
      if (!deliver(e.id, result)) this.outbox.push({ queueId: e.id, result });
      if (result.ok) minWait = leastWait();
      return result.ok ? "placed" : "removed";
    };
    this.queue.visit((e) => {
      // Too late even for an idle node: refused before it costs a GPU anything. (An arrival is
      // judged after this visit, against the queue ahead of it.)
      if (e.enqueuedAt < now && now + e.ownMs > e.deadlineAt) return decided(e, this.shed(e, "deadline", now, true));
      const higher = this.higherActive(e.rank, now);
      const bound = dispatchBoundMs(this.settings.admission.dispatchWaitMs, higher);
      if (minWait > bound || now + minWait + e.ownMs > e.deadlineAt) return "kept";
      // Below an active class: only on the nodes the classes above do not need.
      if (higher && !this.reserve.mayTake(e.rank, nodes.length, meanRate, now)) return "kept";
      const result = this.tryPlace(e, bound, now);
      return result ? decided(e, result) : "kept";
    });
  }

  /**
   * One queued request, if a node can take it now: the same steps as a placement without
   * admission, narrowed to the nodes that meet its deadline, and placed only if the policy's
   * choice among them is within the dispatch bound (else it waits for that node: the policy judged
   * its cache worth the wait, and the others stay free for the rest of the queue). Undefined: it
   * stays queued.
   */
  private tryPlace(e: QueueEntry, boundMs: number, now: number): RouteResult | undefined {
    const req = e.req;
    const fresh = this.arrival?.id === e.id && this.arrival.placements === this.placements ? this.arrival : undefined;
    const found = fresh?.found ?? eligibleNodes(this.nodes, req, now, this.settings.maxInflightPerNode, this.settings.nodeTenants);
    if (found.servesModel === 0) {
      this.queue.remove(e);
      return this.refuseUnservable(req, 0, now);
    }
    if (found.nodes.length === 0) return undefined;
    const all: CandidateField = {
      candidates: fresh?.candidates ?? buildCandidates(found.nodes, this.index, req, this.settings.blockTokens, now, this.active),
      eligible: found.nodes,
    };
    const admission = this.admitFairShare(req, e.tenant, all.candidates, now);
    // Over its fair share once queued: it waits (the queue releases it at its weight's share).
    if (!admission.ok) return undefined;
    const pinnedNode = this.storedResponseNode(req);
    const shared = holdForOthers(all, admission, pinnedNode, req.promptTokens);
    const meeting = meetingDeadline(shared.candidates, now, e.deadlineAt);
    if (meeting.length === 0) return undefined;
    const field: CandidateField = {
      candidates: meeting.map((i) => shared.candidates[i]!),
      eligible: meeting.map((i) => shared.eligible[i]!),
    };
    const choice = spilledPast(this.choose(req, field.candidates, pinnedNode), field.candidates, shared.candidates);
    if (estimateWaitMs(field.candidates[choice.index]!) > boundMs) return undefined;
    const budget = this.budgets.take(e.tenant, req.tenantLimits, req.promptTokens, now);
    const rateLimit = rateLimitOf(budget);
    if (!budget.ok) return this.refuseRateLimited(req, e.tenant, budget, rateLimit, now);
    return this.place(req, e.tenant, field, choice, admission, rateLimit, this.admittedOf(e, now), now);
  }

  private admittedOf(e: QueueEntry, now: number): Admitted {
    return { priority: rankClass(e.rank), rank: e.rank, objectiveMs: e.objectiveMs, queuedMs: Math.max(0, now - e.enqueuedAt) };
  }

  /** Whether a class above `rank` is active: queued, or seen within CLASS_ACTIVE_MS. */
  private higherActive(rank: number, now: number): boolean {
    for (let r = 0; r < rank; r++) if (now - this.classSeenAt[r]! < CLASS_ACTIVE_MS) return true;
    return this.queue.higherQueued(rank);
  }

  /** The nodes' learned prefill rate, averaged (the region's: what a request's default objective is priced at). */
  private regionRate(nodes: readonly NodeEntry[]): number {
    if (nodes.length === 0) return this.settings.prefillTokensPerSecond;
    let rate = 0;
    for (const n of nodes) rate += n.load.prefillRate;
    return rate / nodes.length;
  }

  private nodeWaits(nodes: readonly NodeEntry[], now: number): Array<{ waitMs: number; prefillRate: number }> {
    return nodes.map((n) => ({ waitMs: waitMs(n, now), prefillRate: n.load.prefillRate }));
  }

  /**
   * Sheds a request that cannot be served in time: counted and logged as `shed`, with the time
   * until the region's queued prefill drains as its `Retry-After`. Batch is shed first only by the
   * queue's order (it is released last, so its deadlines pass first).
   */
  private shed(
    e: Pick<QueueEntry, "req" | "rank" | "objectiveMs" | "enqueuedAt">,
    why: ShedReason,
    now: number,
    wasQueued = false,
  ): RouteRefusal {
    const req = e.req;
    const at = {
      priority: rankClass(e.rank),
      objectiveMs: e.objectiveMs,
      queuedMs: wasQueued ? Math.max(0, now - e.enqueuedAt) : 0,
    };
    this.ledger.shed(req, why, at, now);
    const nodes = eligibleNodes(this.nodes, req, now, Infinity, this.settings.nodeTenants).nodes;
    return shedRefusal(this.settings.name, req, why, {
      ...at,
      retryAfterSeconds: retryAfterSeconds(this.queue.totalWork(), this.nodeWaits(nodes, now)),
    });
  }

  /**
   * No node may take the request. Told apart for the edge: no node serving the model (to this
   * tenant) means the region cannot serve it at all; nodes that serve it but are all excluded,
   * broken or at their in-flight limit mean it is saturated until the soonest cool-down ends.
   */
  private refuseUnservable(req: RouteRequest, servesModel: number, now: number, servesEngine = servesModel): RouteRefusal {
    if (servesModel === 0) {
      this.ledger.rejected(req, "no-node", [], now);
      return noNodeRefusal(this.settings.name, req.model);
    }
    // A continuation no other node's engine can take: not busy, impossible here (src/region/continue.ts says so).
    if (servesEngine === 0 && req.engines) {
      this.ledger.rejected(req, "no-node", [], now);
      return noContinuerRefusal(this.settings.name, req.model, req.engines);
    }
    this.ledger.rejected(req, "saturated", [], now);
    return unavailableRefusal(this.settings.name, req.model, this.nodes.retryAfterSeconds(now));
  }

  /**
   * Fair share (fair-share.ts): whether the tenant may queue more work here, and which nodes are
   * held for the others. Asked before anything narrows the candidates, since the tenant's share is
   * of the region's whole capacity; it also records the tenant as active.
   */
  private admitFairShare(req: RouteRequest, tenant: string, candidates: readonly Candidate[], now: number): Admission {
    return this.fair.admit(
      tenant,
      req.tenantWeight ?? 1,
      now,
      shareNodes(candidates, req.promptTokens),
      this.settings.fairShareWaitSeconds,
      this.demand.overEveryone(now),
    );
  }

  /** A tenant over its fair share whose own nodes are all past the short wait: another region may take it, else 429. */
  private refuseOverShare(
    req: RouteRequest,
    tenant: string,
    admission: Extract<Admission, { ok: false }>,
    all: CandidateField,
    now: number,
  ): RouteRefusal {
    this.ledger.rejected(req, "over-share", considered(all.candidates, all.eligible, -1, now), now);
    return overShareRefusal(this.settings.name, tenant, admission);
  }

  /**
   * The node storing the response a follow-up continues (Responses API), if known: it must go there
   * if that node can take it, so neither the fair share nor the policy may move it. (Gone or
   * unavailable, the policy places it and the node answers for itself.)
   */
  private storedResponseNode(req: RouteRequest): string | undefined {
    return req.previousResponseId !== undefined ? this.responses.nodeOf(req.previousResponseId, req.tenant ?? "") : undefined;
  }

  /**
   * A follow-up of a stored response this region holds for no such tenant and id (another
   * tenant's, forgotten, or never stored here) is refused before anything else: sent to a node, the
   * node storing that id would continue it for whoever asked (stored-responses.ts).
   */
  private refuseUnknownResponse(req: RouteRequest): RouteRefusal | undefined {
    if (req.previousResponseId === undefined || this.storedResponseNode(req) !== undefined) return undefined;
    return unknownResponseRefusal(this.settings.name);
  }

  /**
   * Saturation: if even the best node's queue is past the bound, another region should serve; as a
   * failover from a saturated region, this one serves only if it can start the request sooner.
   * Undefined when the region can take it.
   */
  private refuseIfSaturated(req: RouteRequest, field: CandidateField, now: number): RouteRefusal | undefined {
    const { maxQueueSeconds } = this.settings;
    const minWait = shortestWaitSeconds(field.candidates);
    const toBeat = req.waitToBeatSeconds;
    if (minWait > maxQueueSeconds || (toBeat !== undefined && minWait > toBeat)) {
      this.ledger.rejected(req, "saturated", considered(field.candidates, field.eligible, -1, now), now);
      return saturatedRefusal(this.settings.name, req, minWait, maxQueueSeconds);
    }
    return undefined;
  }

  /** The tenant spent its budget (src/core/usage/spend.ts, checked by the region object): counted and kept among the recent decisions. */
  rejectOverBudget(req: RouteRequest, now: number): void {
    this.ledger.rejected(req, "over-budget", [], now);
  }

  /** The tenant spent its rate budget (rate-budget.ts): refused here and in every region, at once. */
  private refuseRateLimited(
    req: RouteRequest,
    tenant: string,
    budget: Extract<BudgetResult, { ok: false }>,
    rateLimit: RouteRefusal["rateLimit"],
    now: number,
  ): RouteRefusal {
    this.ledger.rejected(req, "rate-limited", [], now);
    return rateLimitedRefusal(this.settings.name, tenant, budget, rateLimit);
  }

  /**
   * The policy's choice among the candidates, unless the request follows up a stored response on
   * one of them (`pinnedNode`): that one, whatever the policy would say. The policy sees the
   * session's last node only if it is still a candidate.
   */
  private choose(req: RouteRequest, candidates: Candidate[], pinnedNode: string | undefined): PolicyChoice {
    const sessionNode = req.sessionKey !== undefined ? this.sessions.get(req.sessionKey) : undefined;
    const pinned = pinnedNode !== undefined ? candidates.findIndex((c) => c.id === pinnedNode) : -1;
    if (pinned >= 0) return { index: pinned, decision: "pinned" };
    return this.policy.choose({
      candidates,
      request: {
        hashes: req.hashes,
        promptTokens: req.promptTokens,
        blockTokens: this.settings.blockTokens,
        sessionKey: req.sessionKey,
        sessionNode: sessionNode !== undefined && candidates.some((c) => c.id === sessionNode) ? sessionNode : undefined,
      },
      random: this.random,
    });
  }

  /** Places the request on the chosen candidate: credits the node, issues its ticket and answers with the placement. */
  private place(
    req: RouteRequest,
    tenant: string,
    field: CandidateField,
    choice: PolicyChoice,
    admission: Extract<Admission, { ok: true }>,
    rateLimit: RouteRefusal["rateLimit"],
    admitted: Admitted,
    now: number,
  ): RouteResult {
    this.placements++;
    const chosen = field.candidates[choice.index]!;
    const entry = field.eligible[choice.index]!;
    const decision = decisionOf(req, choice);
    const estimatedTtftMs = Math.round(estimateMs(chosen));
    const { predicted, touched, claimed } = this.dispatch(req, tenant, chosen, entry, now);
    const { ticket, shown } = this.issueTicket(
      req,
      field,
      { index: choice.index, decision, estimatedTtftMs, predicted, touched, claimed, admitted },
      now,
    );
    return {
      ok: true,
      ticket,
      nodeId: chosen.id,
      url: entry.spec.url,
      engine: entry.spec.engine,
      decision,
      policy: this.policy.name,
      matchBlocks: chosen.matchBlocks,
      totalBlocks: req.hashes.length,
      predictedCachedTokens: chosen.matchTokens,
      workAheadTokens: Math.round(chosen.workAheadTokens),
      estimatedTtftMs,
      candidates: field.candidates.length,
      heldForOthers: admission.reserved?.size ?? 0,
      rateLimit,
      considered: shown,
      priority: admitted.priority,
      objectiveMs: admitted.objectiveMs,
      queuedMs: admitted.queuedMs,
    };
  }

  /**
   * Credits the chosen node with the request at once, before any answer, so the next request sees
   * it: the load model's queue, the tenant's queued prefill, and (speculatively) the prompt as held
   * there, rolled back if the node refuses it or fails before computing it. Returns the load
   * model's prediction, the touch times the node's answer is later judged by (learnFromUsage) and
   * the blocks the speculative insert claimed.
   */
  private dispatch(
    req: RouteRequest,
    tenant: string,
    chosen: Candidate,
    entry: NodeEntry,
    now: number,
  ): Pick<Dispatched, "predicted" | "touched" | "claimed"> {
    const predicted = entry.load.dispatch(now, chosen.uncachedTokens, req.promptTokens);
    this.fair.queued(tenant, chosen.id, chosen.uncachedTokens, now);
    const touched = this.touchedSamples(chosen.id, req.hashes, chosen.matchBlocks);
    const claimed = this.index.speculate(chosen.id, req.hashes);
    this.longPrefixes.record(req.hashes, req.promptTokens);
    if (req.sessionKey !== undefined) this.sessions.set(req.sessionKey, chosen.id);
    this.active?.add(chosen.id, req.hashes);
    return { predicted, touched, claimed };
  }

  /**
   * Issues the request's ticket and records the decision (ledger, node metrics): the ticket holds
   * what `firstByte`, `complete` and expiry need to correct the load model and the index and to
   * release the node. Returns the ticket id and the considered candidates shown in the answer.
   */
  private issueTicket(req: RouteRequest, field: CandidateField, d: Dispatched, now: number): { ticket: string; shown: Considered[] } {
    const chosen = field.candidates[d.index]!;
    const entry = field.eligible[d.index]!;
    const ticket = this.ticketPrefix + (++this.ticketSeq).toString(36);
    const shown = considered(field.candidates, field.eligible, d.index, now);
    const ledger = this.ledger.placed(
      req,
      {
        nodeId: chosen.id,
        decision: d.decision,
        matchBlocks: chosen.matchBlocks,
        predictedCachedTokens: chosen.matchTokens,
        estimatedTtftMs: d.estimatedTtftMs,
        considered: shown,
        ...d.admitted,
      },
      now,
    );
    this.tickets.set(ticket, {
      nodeId: chosen.id,
      dispatchedAt: now,
      predicted: d.predicted,
      uncachedTokens: chosen.uncachedTokens,
      promptTokens: req.promptTokens,
      firstByteAt: undefined,
      chain: req.hashes.join(""),
      active: this.active !== undefined,
      claimedFrom: d.claimed.from,
      claimedTo: d.claimed.to,
      matchBlocks: chosen.matchBlocks,
      predictedCachedTokens: chosen.matchTokens,
      touched: d.touched,
      ledger,
      trial: this.nodes.dispatched(entry, now),
      rank: d.admitted.rank,
    });
    countRouted(entry.metrics, d.decision, req.promptTokens, chosen.matchTokens, chosen.matchBlocks);
    this.reserve.placed(chosen.id, d.admitted.rank);
    return { ticket, shown };
  }

  /** When the index last touched the node's blocks of `hashes` at depths 0, 1, 2, 4, ... and `depth - 1`. */
  private touchedSamples(nodeId: string, hashes: readonly string[], depth: number): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    for (let d = 0; d < depth; d = d === 0 ? 1 : d * 2) {
      const seq = this.index.touchedAt(nodeId, hashes[d]!);
      if (seq !== undefined) out.push([d, seq]);
    }
    const last = depth - 1;
    if (depth > 0 && out.at(-1)?.[0] !== last) {
      const seq = this.index.touchedAt(nodeId, hashes[last]!);
      if (seq !== undefined) out.push([last, seq]);
    }
    return out;
  }

  /** The first byte of a request's answer arrived: its prefill is done. A stored response's id, if any, is remembered with its node. */
  firstByte(ticketId: string, now: number, responseId?: string, accepted = true): void {
    const t = this.tickets.get(ticketId);
    if (!t || t.firstByteAt !== undefined) return;
    if (responseId !== undefined) this.responses.remember(responseId, t.ledger.tenant, t.nodeId);
    t.firstByteAt = now;
    this.reserve.prefillDone(t.nodeId, t.rank);
    // The node accepted the request: it holds the prompt. (Not a refusal's first byte, which comes
    // with its completion: that rolls the claims back.)
    if (accepted) this.confirmClaims(t);
    this.ledger.firstByte(t.ledger, now);
    this.fair.drained(t.ledger.tenant, t.nodeId, t.uncachedTokens);
    const n = this.nodes.get(t.nodeId);
    if (!n) return;
    if (n.load.firstByte(now, t.dispatchedAt, t.predicted, t.uncachedTokens)) this.nodes.poolRates();
    countFirstByte(n.metrics, now - t.dispatchedAt);
  }

  /** Releases a request. Returns false for an unknown (expired or foreign) ticket. */
  complete(ticketId: string, outcome: CompletionOutcome, now: number): boolean {
    const t = this.tickets.get(ticketId);
    if (!t) return false;
    // A non-streamed answer's first byte comes with its completion (CompletionOutcome.firstByteMsAgo).
    if (outcome.firstByteMsAgo !== undefined) this.firstByte(ticketId, now - outcome.firstByteMsAgo, undefined, nodeComputed(outcome));
    const n = this.nodes.get(t.nodeId);
    if (n) {
      countOutcome(n.metrics, outcome);
      countDuration(n.metrics, Math.max(0, now - t.dispatchedAt));
      // The breaker: a failure before the first byte or mid-stream opens it; a whole answer closes it.
      if (outcome.status === "failed" || outcome.status === "stream-error") this.nodes.recordFailure(n, now);
      else if (outcome.status === "ok") this.nodes.recordSuccess(n);
      else this.nodes.recordNeutral(n, t.trial);
      if (!nodeComputed(outcome)) {
        // The node computed nothing: it does not hold the prompt, nor did it evict anything for
        // it, and the prediction was never used.
        this.rollBackClaims(t);
        uncountPrediction(n.metrics, t.promptTokens, t.predictedCachedTokens);
      } else {
        this.confirmClaims(t);
        if (outcome.usage?.cachedTokens !== undefined) this.learnFromUsage(n, t, outcome.usage.promptTokens, outcome.usage.cachedTokens);
      }
    }
    this.ledger.completed(t.ledger, outcome, now);
    this.release(ticketId, t, now);
    return true;
  }

  /**
   * Compares what the node says it had cached for a request with what the index predicted, and
   * corrects the index. The comparison is in shares of the prompt, since the router counts
   * tokens by characters and the node by its tokenizer; within one engine block (plus 2%) is
   * agreement.
   *
   * Fewer cached than predicted: the node evicted the predicted prefix past what it reported. Its
   * cache evicts least recently used first, so every block the index last touched no later than the
   * first missing one is gone too: forget them all (the oldest part of the node's LRU). Along a
   * chain, deeper blocks were touched earlier (every insert touches a prompt last-to-first), so the
   * touch time sampled at or just past the first missing block bounds what is forgotten from
   * below. (Bounding by the prompt's first block instead wiped whole nodes: a fleet-wide system
   * prompt is touched by every request, so "older than it" is nearly everything.) More cached
   * than predicted needs no correction: the dispatch already recorded the whole prompt as held.
   * Several answers in a row with nothing cached (within one engine block), each predicted to reuse
   * a real prefix, mean the node lost its whole cache (a restart, or a prefix-cache reset, without a
   * new boot id): forget everything it was believed to hold but the prompt it has just computed.
   */
  private learnFromUsage(n: NodeEntry, t: Ticket, promptTokens: number, cachedTokens: number): void {
    const cmp = compareShares(t.predictedCachedTokens, t.promptTokens, cachedTokens, promptTokens, this.settings.blockTokens);
    countAgreement(n.metrics, cmp.agreed);
    if (!this.settings.learnFromUsage) return;
    if (cachedTokens > ENGINE_BLOCK_ALLOWANCE_TOKENS) n.silentMisses = 0;
    if (cmp.predicted - cmp.measured <= cmp.tolerance) return;
    // The first block surely missing: past the measured share and its tolerance, in the router's tokens.
    const heldTokens = (cmp.measured + cmp.tolerance) * t.promptTokens;
    let missing = 0;
    while (missing < t.matchBlocks && baseBlocksBefore(missing + 1) * this.settings.blockTokens <= heldTokens) missing++;
    // Blocks deeper in a chain were touched earlier, so the sample at or past it bounds what is gone.
    const sample = t.touched.find(([depth]) => depth >= missing);
    if (sample === undefined) return;
    const held = this.index.blocksOf(t.nodeId);
    const forgotten = this.index.forgetOlderThan(t.nodeId, sample[1]);
    if (forgotten > 0) {
      n.metrics.corrections++;
      n.metrics.correctedBlocks += forgotten;
    }
    // A cache loss rather than an eviction: nothing cached (within one engine block: the first
    // answer after a loss caches the chat template's first block again, and every later one
    // reports it) of a prefix used so recently that an LRU of even a fraction of the node's
    // believed capacity would still hold it.
    const newer = held - forgotten;
    const nothingCached = cachedTokens <= ENGINE_BLOCK_ALLOWANCE_TOKENS && t.predictedCachedTokens > 2 * ENGINE_BLOCK_ALLOWANCE_TOKENS;
    const recent = newer < this.index.capacityOf(t.nodeId) / CAPACITY_MISESTIMATE_FACTOR;
    if (nothingCached && recent && t.matchBlocks >= MIN_EVIDENCE_BLOCKS && ++n.silentMisses >= SILENT_RESTART_MISSES) {
      n.silentMisses = 0;
      n.metrics.silentRestarts++;
      this.index.clearNode(t.nodeId);
      this.dropClaims(t.nodeId);
      // What it does hold: the prompt it has just computed.
      this.index.insert(t.nodeId, chainHashes(t.chain));
    }
  }

  /** The node accepted the request: the blocks its dispatch claimed are held (PrefixIndex.confirm). */
  private confirmClaims(t: Ticket): void {
    if (t.claimedFrom >= t.claimedTo) return;
    this.index.confirm(t.nodeId, t.chain, t.claimedFrom, t.claimedTo);
    t.claimedTo = t.claimedFrom;
  }

  /** The node computed none of the request: out of the index, with what its insert evicted taken back (PrefixIndex.rollback). */
  private rollBackClaims(t: Ticket): void {
    if (t.claimedFrom >= t.claimedTo) return;
    this.index.rollback(t.nodeId, t.chain, t.claimedFrom, t.claimedTo);
    t.claimedTo = t.claimedFrom;
  }

  /** A node's cache is gone: the claims of its requests in flight went with it (a rollback must not touch what is inserted after). */
  private dropClaims(nodeId: string): void {
    for (const t of this.tickets.values()) if (t.nodeId === nodeId) t.claimedTo = t.claimedFrom;
  }

  private release(ticketId: string, t: Ticket, now: number): void {
    this.tickets.delete(ticketId);
    // An abandoned ticket (expired): its prompt stays believed, as the node most likely computed it.
    this.confirmClaims(t);
    // Whatever happened to the node, the tenant's queued prefill leaves the queue with its request.
    if (t.firstByteAt === undefined) {
      this.fair.drained(t.ledger.tenant, t.nodeId, t.uncachedTokens);
      this.reserve.prefillDone(t.nodeId, t.rank);
    }
    const n = this.nodes.get(t.nodeId);
    if (!n) return;
    // A trial whose end was never reported (an abandoned ticket) must not hold the breaker half-open forever.
    if (t.trial) n.trialInFlight = false;
    if (t.firstByteAt === undefined) n.load.releaseBeforeFirstByte(now, t.predicted);
    n.load.complete(t.promptTokens);
    if (t.active) this.active?.remove(t.nodeId, chainHashes(t.chain));
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
        queue: { depth: this.queue.depthByClass(), blocks: this.queue.blocks },
      },
      now,
    );
  }

  /** The last hour in buckets and the most recent decisions: what the dashboard opens with. */
  historyView(now: number): RegionHistoryView {
    return this.ledger.view(this.settings.name, now);
  }
}
