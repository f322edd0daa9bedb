/**
 * RegionRouter: one GPU region's routing state and decisions, with no I/O.
 *
 * It owns the node table, the prefix index, the load model and the routing policy, and turns
 * requests into decisions. The region Durable Object wraps one instance (and persists the node
 * table), and the benchmark drives the same class in simulated time, so every benchmark figure is
 * a figure of the production logic. Time is always passed in (`now`, ms).
 *
 * Request lifecycle: `route` (dispatch: the node is credited and the prefix recorded as held
 * there) -> optionally `firstByte` (prefill done: the load model is corrected) -> `complete`
 * (released; usage, if the answer carried it, is recorded as the measured cache hit).
 */
import { BoundedLru } from "./lru.ts";
import { NodeLoad, type LoadReport } from "./node-load.ts";
import { createPolicy, type Decision, type PolicySpec, type RoutingPolicy, type Candidate } from "./policies/index.ts";
import { DECISIONS } from "./policies/types.ts";
import { PrefixIndex, DEFAULT_MAX_INDEX_ENTRIES } from "./prefix-index.ts";
import { seededRandom } from "./random.ts";

/** Settings of one region's router. See the configuration reference for defaults. */
export interface RegionSettings {
  name: string;
  policy: PolicySpec;
  /** A reporting node that has been silent this long leaves the region. Default 15,000 ms. */
  nodeSilenceMs: number;
  /** Prefill throughput assumed for a node until it is measured, tokens/s. Default 10,000. */
  prefillTokensPerSecond: number;
  /** A node with this many requests in flight from this router takes no more. Default 256. */
  maxInflightPerNode: number;
  /** When every node's estimated wait exceeds this, the region is saturated. Default 30 s. */
  maxQueueSeconds: number;
  /** First cool-down after a node fails a request; doubles per consecutive failure, capped at 60 s. Default 2,000 ms. */
  failureCooldownMs: number;
  /** An in-flight request not completed after this long is released (its worker was lost). Default 600,000 ms. */
  requestTimeoutMs: number;
  /** Hard cap on prefix index entries (about 200 bytes each). Default 262,144. */
  maxIndexEntries: number;
  /** Session hints remembered. Default 100,000. */
  maxSessions: number;
  /** Tokens per prefix block (block characters / characters per token). */
  blockTokens: number;
  /** Seed for policies that draw at random. */
  seed: number;
}

export const DEFAULT_REGION_SETTINGS: Omit<RegionSettings, "name" | "blockTokens"> = {
  policy: { name: "warmpath" },
  nodeSilenceMs: 15_000,
  prefillTokensPerSecond: 10_000,
  maxInflightPerNode: 256,
  maxQueueSeconds: 30,
  failureCooldownMs: 2_000,
  requestTimeoutMs: 600_000,
  maxIndexEntries: DEFAULT_MAX_INDEX_ENTRIES,
  maxSessions: 100_000,
  seed: 1,
};

const MAX_FAILURE_COOLDOWN_MS = 60_000;

/** A node's identity and capacity: the durable part of the node table. */
export interface NodeSpec {
  id: string;
  url: string;
  models: string[];
  kvCapacityTokens: number;
  /** Declared in configuration: never expires by silence. */
  static: boolean;
  /** Last report or registration (ms); persisted so expiry survives a restart. */
  lastSeen: number;
  /** Opaque id of the node process; a change means the node restarted and lost its cache. */
  bootId?: string | undefined;
}

/** A node's load report (POST /v1/nodes/report). */
export interface NodeReport {
  nodeId: string;
  url: string;
  models: string[];
  kvCapacityTokens: number;
  running: number;
  waiting: number;
  kvUsage: number;
  bootId?: string | undefined;
}

export interface RouteRequest {
  requestId: string;
  model: string;
  hashes: string[];
  promptTokens: number;
  sessionKey?: string | undefined;
  /** Nodes already tried for this request (a retry). */
  exclude?: string[] | undefined;
}

export type RouteResult =
  | {
      ok: true;
      ticket: string;
      nodeId: string;
      url: string;
      decision: Decision;
      policy: string;
      matchBlocks: number;
      totalBlocks: number;
      predictedCachedTokens: number;
      workAheadTokens: number;
      estimatedTtftMs: number;
      candidates: number;
    }
  | { ok: false; reason: "no-node" | "saturated"; message: string; retryAfterSeconds: number };

/** What the worker learned about a request's outcome. */
export interface CompletionOutcome {
  /** `ok`: answered; `failed`: the node failed before the first byte; `stream-error`: failed after it; `cancelled`: the client went away. */
  status: "ok" | "failed" | "stream-error" | "cancelled";
  /** From the answer's `usage`, when present. */
  usage?: { promptTokens: number; cachedTokens: number; completionTokens: number } | undefined;
}

interface Ticket {
  nodeId: string;
  dispatchedAt: number;
  predicted: { startAt: number; prefillEnd: number };
  uncachedTokens: number;
  promptTokens: number;
  firstByteAt: number | undefined;
}

/** Counters per node: what operators read to see where recomputation happens. */
export interface NodeMetrics {
  routed: number;
  decisions: Record<Decision, number>;
  completed: number;
  failed: number;
  streamErrors: number;
  cancelled: number;
  /** Estimated prompt tokens routed, and how many the router predicted cached. */
  promptTokens: number;
  predictedCachedTokens: number;
  /** From the nodes' own `usage` (prompt_tokens_details.cached_tokens). */
  measuredRequests: number;
  measuredPromptTokens: number;
  measuredCachedTokens: number;
  completionTokens: number;
  /** Sum of dispatch-to-first-byte times, for a mean. */
  firstByteMsSum: number;
  firstByteCount: number;
}

interface NodeEntry {
  spec: NodeSpec;
  load: NodeLoad;
  consecutiveFailures: number;
  cooldownUntil: number;
  metrics: NodeMetrics;
}

function emptyMetrics(): NodeMetrics {
  return {
    routed: 0,
    decisions: Object.fromEntries(DECISIONS.map((d) => [d, 0])) as Record<Decision, number>,
    completed: 0,
    failed: 0,
    streamErrors: 0,
    cancelled: 0,
    promptTokens: 0,
    predictedCachedTokens: 0,
    measuredRequests: 0,
    measuredPromptTokens: 0,
    measuredCachedTokens: 0,
    completionTokens: 0,
    firstByteMsSum: 0,
    firstByteCount: 0,
  };
}

export class RegionRouter {
  readonly settings: RegionSettings;
  private readonly nodes = new Map<string, NodeEntry>();
  private readonly index: PrefixIndex;
  private readonly tickets = new Map<string, Ticket>();
  private readonly sessions: BoundedLru<string, string>;
  private policy: RoutingPolicy;
  private readonly random: () => number;
  private ticketSeq = 0;
  private readonly ticketPrefix: string;
  private saturatedCount = 0;
  private noNodeCount = 0;

  constructor(settings: RegionSettings, instanceId = "0") {
    this.settings = settings;
    this.index = new PrefixIndex(settings.maxIndexEntries);
    this.sessions = new BoundedLru(settings.maxSessions);
    this.policy = createPolicy(settings.policy);
    this.random = seededRandom(settings.seed);
    this.ticketPrefix = instanceId + ".";
  }

  /** Replaces the policy (configuration changed); state is kept. */
  setPolicy(spec: PolicySpec): void {
    this.settings.policy = spec;
    this.policy = createPolicy(spec);
  }

  get policyName(): string {
    return this.policy.name;
  }

  /** Adds or updates a node from its spec (static configuration or restored storage). */
  upsertNode(spec: NodeSpec, now: number): void {
    const existing = this.nodes.get(spec.id);
    if (existing) {
      if (spec.bootId !== undefined && existing.spec.bootId !== undefined && spec.bootId !== existing.spec.bootId) {
        // The node restarted: its KV cache and queue are gone.
        this.index.clearNode(spec.id);
        existing.load.reset(now);
        existing.consecutiveFailures = 0;
        existing.cooldownUntil = 0;
      }
      existing.spec = { ...spec, static: existing.spec.static || spec.static };
    } else {
      this.nodes.set(spec.id, {
        spec: { ...spec },
        load: new NodeLoad(this.settings.prefillTokensPerSecond),
        consecutiveFailures: 0,
        cooldownUntil: 0,
        metrics: emptyMetrics(),
      });
    }
    this.index.setNode(spec.id, spec.kvCapacityTokens / this.settings.blockTokens);
  }

  /** Applies a node's load report; a first report registers the node. Returns the stored spec. */
  report(r: NodeReport, now: number): NodeSpec {
    const prior = this.nodes.get(r.nodeId);
    this.upsertNode(
      {
        id: r.nodeId,
        url: r.url,
        models: r.models,
        kvCapacityTokens: r.kvCapacityTokens,
        static: prior?.spec.static ?? false,
        lastSeen: now,
        bootId: r.bootId,
      },
      now,
    );
    const entry = this.nodes.get(r.nodeId)!;
    const report: LoadReport = { running: r.running, waiting: r.waiting, kvUsage: r.kvUsage, at: now };
    entry.load.report(report);
    return entry.spec;
  }

  /** Removes a node (deregistration or expiry). Its in-flight tickets are forgotten. */
  removeNode(nodeId: string): boolean {
    if (!this.nodes.delete(nodeId)) return false;
    this.index.removeNode(nodeId);
    this.sessions.deleteWhere((n) => n === nodeId);
    for (const [t, ticket] of this.tickets) if (ticket.nodeId === nodeId) this.tickets.delete(t);
    return true;
  }

  /**
   * Expires silent reporting nodes and abandoned tickets. Returns the expired node ids and the
   * time of the next expiry (for the Durable Object's alarm), or undefined if nothing can expire.
   */
  expire(now: number): { expired: string[]; nextAt: number | undefined } {
    const expired: string[] = [];
    let nextAt: number | undefined;
    for (const [id, n] of this.nodes) {
      if (n.spec.static) continue;
      const deadline = n.spec.lastSeen + this.settings.nodeSilenceMs;
      if (deadline <= now) expired.push(id);
      else nextAt = Math.min(nextAt ?? Infinity, deadline);
    }
    for (const id of expired) this.removeNode(id);
    for (const [t, ticket] of this.tickets) {
      const deadline = ticket.dispatchedAt + this.settings.requestTimeoutMs;
      if (deadline <= now) this.release(t, ticket, now);
      else nextAt = Math.min(nextAt ?? Infinity, deadline);
    }
    return { expired, nextAt };
  }

  private isAvailable(n: NodeEntry, now: number): boolean {
    if (!n.spec.static && n.spec.lastSeen + this.settings.nodeSilenceMs <= now) return false;
    return now >= n.cooldownUntil;
  }

  /** Chooses a node for a request and credits it. */
  route(req: RouteRequest, now: number): RouteResult {
    const eligible: NodeEntry[] = [];
    let servesModel = 0;
    for (const n of this.nodes.values()) {
      if (!n.spec.models.includes(req.model)) continue;
      servesModel++;
      if (req.exclude?.includes(n.spec.id)) continue;
      if (!this.isAvailable(n, now)) continue;
      if (n.load.inflight >= this.settings.maxInflightPerNode) continue;
      eligible.push(n);
    }
    if (eligible.length === 0) {
      if (servesModel === 0) {
        this.noNodeCount++;
        return {
          ok: false,
          reason: "no-node",
          message: `region ${this.settings.name} has no node serving model ${req.model}`,
          retryAfterSeconds: 5,
        };
      }
      this.saturatedCount++;
      return {
        ok: false,
        reason: "saturated",
        message: `every node in region ${this.settings.name} serving ${req.model} is busy or unavailable`,
        retryAfterSeconds: this.retryAfter(now),
      };
    }
    eligible.sort((a, b) => (a.spec.id < b.spec.id ? -1 : a.spec.id > b.spec.id ? 1 : 0));

    const ids = eligible.map((n) => n.spec.id);
    const depths = this.index.matchDepths(req.hashes, ids);
    const { blockTokens } = this.settings;
    const candidates: Candidate[] = eligible.map((n, i) => {
      const matchTokens = Math.min(req.promptTokens, depths[i]! * blockTokens);
      const r = n.load.lastReport;
      return {
        id: n.spec.id,
        matchBlocks: depths[i]!,
        matchTokens,
        uncachedTokens: req.promptTokens - matchTokens,
        workAheadTokens: n.load.workAhead(now),
        recentPrefillTokens: n.load.recentPrefill(now),
        prefillRate: n.load.prefillRate,
        inflight: n.load.inflight,
        activeTokens: n.load.activeTokens,
        indexBlocks: this.index.blocksOf(n.spec.id),
        kvCapacityTokens: n.spec.kvCapacityTokens,
        running: r?.running ?? 0,
        waiting: r?.waiting ?? 0,
        kvUsage: r?.kvUsage ?? 0,
      };
    });

    // Saturation: if even the best node's queue is past the bound, another region should serve.
    let minWait = Infinity;
    for (const c of candidates) minWait = Math.min(minWait, c.workAheadTokens / c.prefillRate);
    if (minWait > this.settings.maxQueueSeconds) {
      this.saturatedCount++;
      return {
        ok: false,
        reason: "saturated",
        message: `region ${this.settings.name} is saturated: the shortest prefill queue is ${minWait.toFixed(1)} s`,
        retryAfterSeconds: Math.min(60, Math.max(1, Math.ceil(minWait - this.settings.maxQueueSeconds))),
      };
    }

    const sessionNode = req.sessionKey !== undefined ? this.sessions.get(req.sessionKey) : undefined;
    const choice = this.policy.choose({
      candidates,
      request: {
        hashes: req.hashes,
        promptTokens: req.promptTokens,
        blockTokens,
        sessionKey: req.sessionKey,
        sessionNode: sessionNode !== undefined && ids.includes(sessionNode) ? sessionNode : undefined,
      },
      random: this.random,
    });
    const chosen = candidates[choice.index]!;
    const entry = eligible[choice.index]!;
    const decision: Decision = req.exclude?.length ? "retry" : choice.decision;

    const estimatedTtftMs = Math.round(entry.load.estimateTtftSeconds(now, chosen.uncachedTokens) * 1000);
    const predicted = entry.load.dispatch(now, chosen.uncachedTokens, req.promptTokens);
    // Speculative insert: the node will hold this prompt once it has prefilled it.
    this.index.insert(chosen.id, req.hashes);
    if (req.sessionKey !== undefined) this.sessions.set(req.sessionKey, chosen.id);

    const ticket = this.ticketPrefix + (++this.ticketSeq).toString(36);
    this.tickets.set(ticket, {
      nodeId: chosen.id,
      dispatchedAt: now,
      predicted,
      uncachedTokens: chosen.uncachedTokens,
      promptTokens: req.promptTokens,
      firstByteAt: undefined,
    });

    const m = entry.metrics;
    m.routed++;
    m.decisions[decision]++;
    m.promptTokens += req.promptTokens;
    m.predictedCachedTokens += chosen.matchTokens;

    return {
      ok: true,
      ticket,
      nodeId: chosen.id,
      url: entry.spec.url,
      decision,
      policy: this.policy.name,
      matchBlocks: chosen.matchBlocks,
      totalBlocks: req.hashes.length,
      predictedCachedTokens: chosen.matchTokens,
      workAheadTokens: Math.round(chosen.workAheadTokens),
      estimatedTtftMs,
      candidates: candidates.length,
    };
  }

  /** The first byte of a request's answer arrived: its prefill is done. */
  firstByte(ticketId: string, now: number): void {
    const t = this.tickets.get(ticketId);
    if (!t || t.firstByteAt !== undefined) return;
    t.firstByteAt = now;
    const n = this.nodes.get(t.nodeId);
    if (!n) return;
    n.load.firstByte(now, t.dispatchedAt, t.predicted, t.uncachedTokens);
    n.metrics.firstByteMsSum += now - t.dispatchedAt;
    n.metrics.firstByteCount++;
  }

  /** Releases a request. Returns false for an unknown (expired or foreign) ticket. */
  complete(ticketId: string, outcome: CompletionOutcome, now: number): boolean {
    const t = this.tickets.get(ticketId);
    if (!t) return false;
    const n = this.nodes.get(t.nodeId);
    if (n) {
      const m = n.metrics;
      if (outcome.status === "failed") {
        m.failed++;
        n.consecutiveFailures++;
        const cooldown = this.settings.failureCooldownMs * 2 ** Math.min(10, n.consecutiveFailures - 1);
        n.cooldownUntil = now + Math.min(MAX_FAILURE_COOLDOWN_MS, cooldown);
      } else {
        n.consecutiveFailures = 0;
        if (outcome.status === "ok") m.completed++;
        else if (outcome.status === "stream-error") m.streamErrors++;
        else m.cancelled++;
      }
      if (outcome.usage) {
        m.measuredRequests++;
        m.measuredPromptTokens += outcome.usage.promptTokens;
        m.measuredCachedTokens += outcome.usage.cachedTokens;
        m.completionTokens += outcome.usage.completionTokens;
      }
    }
    this.release(ticketId, t, now);
    return true;
  }

  private release(ticketId: string, t: Ticket, now: number): void {
    this.tickets.delete(ticketId);
    const n = this.nodes.get(t.nodeId);
    if (!n) return;
    if (t.firstByteAt === undefined) n.load.releaseBeforeFirstByte(now, t.predicted);
    n.load.complete(t.promptTokens);
  }

  private retryAfter(now: number): number {
    let soonest = Infinity;
    for (const n of this.nodes.values()) soonest = Math.min(soonest, Math.max(0, n.cooldownUntil - now));
    return Math.min(60, Math.max(1, Math.ceil((Number.isFinite(soonest) ? soonest : 5000) / 1000)));
  }

  /** The durable node table. */
  nodeSpecs(): NodeSpec[] {
    return [...this.nodes.values()].map((n) => ({ ...n.spec }));
  }

  /** One node's durable spec (a copy), or undefined. */
  nodeSpec(nodeId: string): NodeSpec | undefined {
    const n = this.nodes.get(nodeId);
    return n ? { ...n.spec } : undefined;
  }

  /** Everything an operator needs to see why requests went where they did. */
  snapshot(now: number): RegionSnapshot {
    const nodes = [...this.nodes.values()]
      .sort((a, b) => (a.spec.id < b.spec.id ? -1 : 1))
      .map((n) => ({
        id: n.spec.id,
        url: n.spec.url,
        models: n.spec.models,
        kvCapacityTokens: n.spec.kvCapacityTokens,
        static: n.spec.static,
        available: this.isAvailable(n, now),
        lastSeenMsAgo: Math.max(0, now - n.spec.lastSeen),
        cooldownMs: Math.max(0, n.cooldownUntil - now),
        consecutiveFailures: n.consecutiveFailures,
        load: {
          inflight: n.load.inflight,
          prefilling: n.load.prefilling,
          workAheadTokens: Math.round(n.load.workAhead(now)),
          prefillTokensPerSecond: Math.round(n.load.prefillRate),
          report: n.load.lastReport ? { ...n.load.lastReport, ageMs: Math.max(0, now - n.load.lastReport.at) } : undefined,
        },
        indexBlocks: this.index.blocksOf(n.spec.id),
        metrics: n.metrics,
      }));
    return {
      region: this.settings.name,
      policy: this.policy.name,
      at: now,
      nodes,
      index: { entries: this.index.size, distinctBlocks: this.index.distinctBlocks, capacity: this.index.capacity },
      inflight: this.tickets.size,
      sessions: this.sessions.size,
      rejected: { saturated: this.saturatedCount, noNode: this.noNodeCount },
    };
  }
}

export interface RegionSnapshot {
  region: string;
  policy: string;
  at: number;
  nodes: Array<{
    id: string;
    url: string;
    models: string[];
    kvCapacityTokens: number;
    static: boolean;
    available: boolean;
    lastSeenMsAgo: number;
    cooldownMs: number;
    consecutiveFailures: number;
    load: {
      inflight: number;
      prefilling: number;
      workAheadTokens: number;
      prefillTokensPerSecond: number;
      report: (LoadReport & { ageMs: number }) | undefined;
    };
    indexBlocks: number;
    metrics: NodeMetrics;
  }>;
  index: { entries: number; distinctBlocks: number; capacity: number };
  inflight: number;
  sessions: number;
  rejected: { saturated: number; noNode: number };
}
