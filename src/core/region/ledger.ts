/**
 * The region's ledger: what happened to the requests it saw, region-wide and per tenant (the node
 * counters are metrics.ts'). Rejections, retries and failovers, per-tenant tokens, the last hour
 * in buckets (history.ts) and the recent decisions (recent-decisions.ts). Kept apart from the
 * routing state: the router tells it what it decided, and nothing here influences a decision.
 */
import { nodeComputed, type CompletionOutcome, type Considered, type Decision, type RouteRequest } from "../../contracts/routing.ts";
import { HISTORY_BUCKET_MS, RegionHistory, type HistoryBucket } from "./history.ts";
import { RecentDecisions, type DecisionRecord } from "./recent-decisions.ts";
import { Goodput, type GoodputCounters } from "./goodput-counters.ts";
import type { Demotion, PriorityClass, ShedReason } from "../../contracts/routing.ts";

/** Tenants counted per region (the configuration's tenants, with room to spare). */
const MAX_TENANTS = 1_024;
/** Regions counted as failover sources (the configuration's regions, with room to spare). */
const MAX_FAILOVER_SOURCES = 64;

/** One tenant's counters in a region. */
export interface TenantCounters {
  requests: number;
  /** Router-estimated prompt tokens, and those predicted cached (refused and failed requests taken back out). */
  promptTokens: number;
  predictedCachedTokens: number;
  /** From the nodes' usage: prompt tokens of answers that reported cached tokens, those cached, and completion tokens. */
  measuredPromptTokens: number;
  measuredCachedTokens: number;
  completionTokens: number;
}

/** The ledger's region-wide counters, as the snapshot shows them. */
export interface LedgerCounters {
  rejected: { saturated: number; noNode: number; overShare: number; rateLimited: number; overBudget: number; shed: number };
  /** Requests retried in this region after a node failed them before its first byte. */
  retries: number;
  /** Requests this region took over from a nearer one, by that region's name. */
  failovers: Record<string, number>;
  /**
   * Streams that failed after their first byte, by `reason:outcome` (`connection:continued`,
   * `idle-timeout:no-node`, ...; src/contracts/routing.ts): how many another node finished.
   */
  continuations: Record<string, number>;
  /** Per tenant id ("" for requests without one). */
  tenants: Record<string, TenantCounters>;
  /** Admission: answers within their objective, late and shed, by class and tenant; time queued (goodput-counters.ts). */
  goodput: GoodputCounters;
}

/** The region's past, for the dashboard (GET /admin/history). */
export interface RegionHistoryView {
  region: string;
  at: number;
  bucketMs: number;
  buckets: HistoryBucket[];
  /** Newest first. */
  decisions: DecisionRecord[];
}

/** What the router decided for a placed request. */
export interface Placement {
  nodeId: string;
  decision: Decision;
  matchBlocks: number;
  predictedCachedTokens: number;
  estimatedTtftMs: number;
  considered: Considered[];
  /** Its class, objective (ms; 0: admission off) and time in the region's queue (ms). */
  priority: PriorityClass;
  objectiveMs: number;
  queuedMs: number;
}

/** A placed request's place in the ledger, held by its ticket until it completes. */
export interface LedgerEntry {
  nodeId: string;
  /** Its tenant counters' key. */
  tenant: string;
  promptTokens: number;
  predictedCachedTokens: number;
  dispatchedAt: number;
  /** Its entry among the recent decisions (filled in as it ends; it may have left the ring). */
  record: DecisionRecord;
  priority: PriorityClass;
  objectiveMs: number;
  queuedMs: number;
}

export class RegionLedger {
  private saturated = 0;
  private noNode = 0;
  private overShare = 0;
  private rateLimited = 0;
  private overBudget = 0;
  private shedCount = 0;
  private retries = 0;
  private readonly failovers = new Map<string, number>();
  private readonly continuations = new Map<string, number>();
  private readonly tenants = new Map<string, TenantCounters>();
  private readonly history = new RegionHistory();
  private readonly recent = new RecentDecisions();
  private readonly goodput = new Goodput();

  placed(req: RouteRequest, p: Placement, now: number): LedgerEntry {
    if (req.exclude?.length && !req.continuation) this.retries++;
    const from = req.failoverFrom;
    if (from !== undefined && (this.failovers.has(from) || this.failovers.size < MAX_FAILOVER_SOURCES)) {
      this.failovers.set(from, (this.failovers.get(from) ?? 0) + 1);
    }
    const tenant = req.tenant ?? "";
    const t = this.tenantCounters(tenant);
    if (t) {
      t.requests++;
    }
    this.history.routed(p.nodeId, now);
    const record = this.recent.add({
      ...recordOf(req, now),
      node: p.nodeId,
      decision: p.decision,
      matchBlocks: p.matchBlocks,
      predictedCachedTokens: p.predictedCachedTokens,
      estimatedTtftMs: p.estimatedTtftMs,
      considered: p.considered,
      status: "in-flight",
      priority: p.priority,
      objectiveMs: p.objectiveMs,
      queuedMs: p.queuedMs,
    });
    if (p.objectiveMs > 0) this.goodput.placed(p.priority, p.queuedMs);
    return {
      nodeId: p.nodeId,
      tenant,
      promptTokens: req.promptTokens,
      predictedCachedTokens: p.predictedCachedTokens,
      dispatchedAt: now,
      record,
      priority: p.priority,
      objectiveMs: p.objectiveMs,
      queuedMs: p.queuedMs,
    };
  }

  /** A request the region could not place: counted, and kept among the recent decisions with the candidates it weighed. */
  rejected(
    req: RouteRequest,
    reason: "saturated" | "no-node" | "over-share" | "rate-limited" | "over-budget",
    considered: Considered[],
    now: number,
  ): void {
    if (reason === "saturated") this.saturated++;
    else if (reason === "over-share") this.overShare++;
    else if (reason === "rate-limited") this.rateLimited++;
    else if (reason === "over-budget") this.overBudget++;
    else this.noNode++;
    this.history.rejected(now);
    this.recent.add({ ...recordOf(req, now), decision: reason, considered, status: "rejected" });
  }

  /** A request ranked below the class it asked for at its arrival (tenant-demand.ts), counted for its tenant. */
  demoted(req: RouteRequest, why: Demotion): void {
    this.goodput.demoted(req.tenant ?? "", why);
  }

  /** A request shed by admission: counted as a rejection and in its class's and tenant's goodput, with what it was promised. */
  shed(req: RouteRequest, why: ShedReason, at: { priority: PriorityClass; objectiveMs: number; queuedMs: number }, now: number): void {
    this.shedCount++;
    this.goodput.shed(at.priority, req.tenant ?? "", why);
    this.history.rejected(now);
    this.recent.add({ ...recordOf(req, now), decision: "shed", status: "rejected", ...at });
  }

  /**
   * The answer's first byte arrived. Reported on its own, ahead of the end, it is a stream's first
   * token; one that comes with the completion is a whole answer's, which {@link completed} says.
   */
  firstByte(e: LedgerEntry, now: number): void {
    e.record.firstByteMs = now - e.dispatchedAt;
    e.record.firstByteKind = "stream";
    if (e.objectiveMs > 0) this.goodput.firstByte(e.priority, e.tenant, e.queuedMs + now - e.dispatchedAt, e.objectiveMs);
  }

  /**
   * A placed request ended. A refused or failed one computed nothing: its prediction is taken back
   * out of its tenant's figures and never enters the history's.
   */
  completed(e: LedgerEntry, outcome: CompletionOutcome, now: number): void {
    const computed = nodeComputed(outcome);
    if (outcome.continuation) {
      // Bounded: reasons x outcomes are two closed lists.
      const key = `${outcome.continuation.reason}:${outcome.continuation.outcome}`;
      this.continuations.set(key, (this.continuations.get(key) ?? 0) + 1);
    }
    const usage = outcome.usage;
    const measured = usage?.cachedTokens !== undefined ? { promptTokens: usage.promptTokens, cachedTokens: usage.cachedTokens } : undefined;
    const t = this.tenants.get(e.tenant);
    if (t) {
      // Counted once the node computed it (metrics.ts countComputed: counters never go down).
      if (computed) {
        t.promptTokens += e.promptTokens;
        t.predictedCachedTokens += e.predictedCachedTokens;
      }
      t.completionTokens += usage?.completionTokens ?? 0;
      if (measured) {
        t.measuredPromptTokens += measured.promptTokens;
        t.measuredCachedTokens += measured.cachedTokens;
      }
    }
    this.history.completed(
      {
        nodeId: e.nodeId,
        computed,
        failed: outcome.status === "failed",
        promptTokens: e.promptTokens,
        predictedCachedTokens: e.predictedCachedTokens,
        measured,
        completionTokens: usage?.completionTokens ?? 0,
      },
      now,
    );
    e.record.status = outcome.status;
    // A first byte reported with the completion is a non-streamed answer's: the answer arrived whole.
    if (outcome.firstByteMsAgo !== undefined && e.record.firstByteMs !== null) e.record.firstByteKind = "whole";
    e.record.durationMs = now - e.dispatchedAt;
    e.record.measuredPromptTokens = measured?.promptTokens ?? null;
    e.record.measuredCachedTokens = measured?.cachedTokens ?? null;
  }

  counters(): LedgerCounters {
    return {
      rejected: {
        saturated: this.saturated,
        noNode: this.noNode,
        overShare: this.overShare,
        rateLimited: this.rateLimited,
        overBudget: this.overBudget,
        shed: this.shedCount,
      },
      retries: this.retries,
      failovers: Object.fromEntries(this.failovers),
      continuations: Object.fromEntries(this.continuations),
      tenants: Object.fromEntries(this.tenants),
      goodput: this.goodput.counters(),
    };
  }

  view(region: string, now: number): RegionHistoryView {
    return { region, at: now, bucketMs: HISTORY_BUCKET_MS, buckets: this.history.buckets(now), decisions: this.recent.list() };
  }

  private tenantCounters(key: string): TenantCounters | undefined {
    let t = this.tenants.get(key);
    // Bounded: tenants come from the configuration, but a region object must not grow without end.
    if (!t && this.tenants.size < MAX_TENANTS) {
      t = { requests: 0, promptTokens: 0, predictedCachedTokens: 0, measuredPromptTokens: 0, measuredCachedTokens: 0, completionTokens: 0 };
      this.tenants.set(key, t);
    }
    return t;
  }
}

/** A decision record's request fields, the rest as for an unplaced request. */
function recordOf(req: RouteRequest, now: number): DecisionRecord {
  return {
    at: now,
    requestId: req.requestId,
    tenant: req.tenant ?? null,
    model: req.model,
    node: null,
    decision: "no-node",
    matchBlocks: 0,
    totalBlocks: req.hashes.length,
    promptTokens: req.promptTokens,
    predictedCachedTokens: 0,
    estimatedTtftMs: null,
    considered: [],
    status: "rejected",
    firstByteMs: null,
    firstByteKind: null,
    durationMs: null,
    measuredPromptTokens: null,
    priority: req.priority ?? "standard",
    objectiveMs: 0,
    queuedMs: 0,
    measuredCachedTokens: null,
  };
}
