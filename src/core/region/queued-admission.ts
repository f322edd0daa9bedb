/**
 * The region's queue in use (docs/ADMISSION.md): a request arrives (`admit`), joins the queue in
 * its class and its tenant's lane (admission-queue.ts), and the queue is served at once, so it is
 * placed now if a node can meet its objective and nobody the region releases first is ahead of
 * it; otherwise it waits, and its answer comes from `drain` after a first byte, a completion, a
 * report or the caller's timer (`wakeAt`). A request that cannot be served in time even after the
 * queue is shed at once, before it costs a GPU anything. Each release runs the placement's steps
 * (placement.ts), narrowed to the nodes that meet the request's deadline.
 */
import type { RouteRequest, RouteResult, ShedReason } from "../../contracts/routing.ts";
import type { Candidate } from "../policies/types.ts";
import { AdmissionQueue, classRank, demotedRank, demotionOf, RANKS, rankClass, type QueueEntry, type Visit } from "./admission-queue.ts";
import {
  CLASS_ACTIVE_MS,
  dispatchBoundMs,
  fluidTtftMs,
  leastOwnCost,
  meetingDeadline,
  retryAfterSeconds,
  waitMs,
  prefillWaitMs,
  type Admitted,
} from "./admission.ts";
import { buildCandidates, eligibleNodes } from "./candidates.ts";
import type { ClassReserve } from "./class-reserve.ts";
import { estimateWaitMs, spilledPast } from "./considered.ts";
import { holdForOthers, type CandidateField } from "./hold-for-others.ts";
import type { RegionLedger } from "./ledger.ts";
import type { NodeEntry, NodeTable } from "./node-table.ts";
import { objectiveMs } from "./objective.ts";
import type { RegionParts } from "./parts.ts";
import type { Placement } from "./placement.ts";
import { shedRefusal, type RouteRefusal } from "./refusals.ts";
import type { RegionSettings } from "./settings.ts";
import type { TenantDemand } from "./tenant-demand.ts";

/**
 * What `admit` answers: a placement or a refusal now, or `queued`: the request waits in the
 * region's queue, and its answer comes later from {@link QueuedAdmission.drain}.
 */
export type RouteStep = RouteResult | { ok: "queued"; queueId: string };

/** A queued request's answer, once the region has placed or refused it. */
export interface QueueOutcome {
  queueId: string;
  result: RouteResult;
}

export class QueuedAdmission {
  /** Requests no node can take in time yet (admission-queue.ts), and the answers decided for them since the caller last asked. */
  private readonly queue: AdmissionQueue;
  private outbox: QueueOutcome[] = [];
  private seq = 0;
  /** Queue ids start with the router instance's id, as tickets do. */
  private readonly idPrefix: string;
  /** When a request of each class was last seen: a class below an active one takes only idle nodes (admission.ts). */
  private readonly classSeenAt: number[] = new Array<number>(RANKS).fill(-Infinity);
  /** An arrival's candidates as admit() built them: the queue serving it in the same call, nothing placed since, reuses them (built once, not twice). */
  private arrival: { id: string; placements: number; found: ReturnType<typeof eligibleNodes>; candidates: Candidate[] } | undefined;
  private readonly parts: RegionParts;
  private readonly placement: Placement;
  private readonly settings: RegionSettings;
  private readonly nodes: NodeTable;
  private readonly ledger: RegionLedger;
  private readonly reserve: ClassReserve;
  private readonly demand: TenantDemand;

  constructor(parts: RegionParts, placement: Placement, idPrefix: string) {
    this.parts = parts;
    this.placement = placement;
    this.idPrefix = idPrefix;
    this.settings = parts.settings;
    this.nodes = parts.nodes;
    this.ledger = parts.ledger;
    this.reserve = parts.reserve;
    this.demand = parts.demand;
    this.queue = new AdmissionQueue(parts.settings.admission.maxQueued, parts.settings.admission.maxQueuedBlocks);
  }

  /** What the region's snapshot shows of the queue: requests per class, and the prompt blocks they hold. */
  view(): { depth: number[]; blocks: number } {
    return { depth: this.queue.depthByClass(), blocks: this.queue.blocks };
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
    const unknown = this.placement.refuseUnknownResponse(req);
    if (unknown) return unknown;
    // A retry (its first node failed before the first byte) or a continuation (the client holds part
    // of the answer) was admitted already: it goes at once, ahead of the queue.
    if (!this.settings.admission.enabled || req.exclude?.length || req.continuation) return this.placement.route(req, now);
    const found = eligibleNodes(this.nodes, req, now, this.settings.maxInflightPerNode, this.settings.nodeTenants);
    if (found.nodes.length === 0) return this.placement.refuseUnservable(req, found.servesModel, now, found.servesEngine);
    const asked = classRank(req.priority);
    const candidates = buildCandidates(found.nodes, this.parts.index, req, this.settings.blockTokens, now, this.parts.active);
    // What a region refuses whatever the objective, as without admission: a queue past
    // max_queue_seconds or a failover it cannot start sooner (another region should serve).
    const all: CandidateField = { candidates, eligible: found.nodes };
    const saturated = this.placement.refuseIfSaturated(req, all, now);
    if (saturated) return saturated;
    const meanRate = this.regionRate(found.nodes);
    const objective = objectiveMs(req, meanRate, this.settings.admission);
    const { ownMs, work } = leastOwnCost(candidates);
    // A tenant over its share of the recent demand, or past its commitment, loses the class it
    // asked for while it is (tenant-demand.ts: below batch, unless it asked for batch without a commitment),
    // and is refused (another region, else 429) if every node it may use has a queue past the fair
    // share's bound. A tenant within its share is never refused for it: the fair share judges
    // dispatched prefill, which the queue's class order tilts towards the higher classes (refused
    // on that alone, 4% of the interactive requests at 2x load with noise were refused as over
    // their share although interactive traffic was a third of the demand: bench:goodput's mix when
    // this landed).
    const tenant = req.tenant ?? "";
    const sent = { promptTokens: req.promptTokens, perMinute: req.committedTokensPerMinute };
    this.demand.arrived(tenant, req.tenantWeight ?? 1, work, now, asked, sent);
    const flooding = this.demand.judge(tenant, now);
    const share = this.placement.admitFairShare(req, tenant, candidates, now);
    if (!share.ok && flooding !== undefined)
      return this.placement.refuseOverShare(
        req,
        tenant,
        share,
        all,
        now,
        flooding === "commitment" || flooding === "growth" ? flooding : "share",
      );
    const rank = demotedRank(asked, flooding);
    const demoted = demotionOf(asked, flooding);
    if (demoted) this.ledger.demoted(req, demoted);
    this.classSeenAt[rank] = now;
    this.reserve.arrived(rank, work, now);
    const entry = {
      id: `${this.idPrefix}q${(++this.seq).toString(36)}`,
      req,
      tenant: req.tenant ?? "",
      weight: req.tenantWeight ?? 1,
      rank,
      demoted,
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
    this.arrival = { id: entry.id, placements: this.placement.count, found, candidates };
    this.serve(now, (id, result) => {
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
      return this.shed(added, "objective", now, false, predicted);
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
  drain(now: number): QueueOutcome[] {
    if (this.queue.size > 0) this.serve(now);
    const out = this.outbox;
    this.outbox = [];
    return out;
  }

  /** Requests waiting in the queue, by class (interactive, standard, batch). */
  depth(): number[] {
    return this.queue.depthByClass();
  }

  /**
   * When the queue must be served again if nothing else happens (the caller's timer): the first
   * time a queued request can no longer be served in time (it is then refused), or a node's modelled
   * queue falls within the dispatch bound (it can then take one). Undefined with an empty queue.
   */
  wakeAt(now: number): number | undefined {
    if (this.queue.size === 0) return undefined;
    let at = Infinity;
    for (const e of this.queue.entries()) at = Math.min(at, e.deadlineAt - e.ownMs);
    const bound = this.settings.admission.dispatchWaitMs;
    for (const n of this.nodes.values()) {
      // The prefill's wait drains with time; a wait for a place ends only with a request, whose
      // completion serves the queue again: timed by it, the timer would fire every few ms for nothing.
      const w = prefillWaitMs(n, now);
      if (w > bound) at = Math.min(at, now + w - bound);
    }
    return Math.max(now + 1, Math.ceil(at));
  }

  /** A queued request whose caller went away: out of the queue, with nothing counted against it. Returns whether it was queued. */
  cancel(queueId: string): boolean {
    const e = this.queue.get(queueId);
    if (!e) return false;
    this.queue.remove(e);
    return true;
  }

  /** Visits the queue in order; `deliver` may take an outcome itself (an arrival's own), otherwise it goes to the outbox. */
  private serve(now: number, deliver: (id: string, result: RouteResult) => boolean = () => false): void {
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
    const fresh = this.arrival?.id === e.id && this.arrival.placements === this.placement.count ? this.arrival : undefined;
    const found = fresh?.found ?? eligibleNodes(this.nodes, req, now, this.settings.maxInflightPerNode, this.settings.nodeTenants);
    // Refused: the visit takes it out (taking it out here too took the next entry of its lane with it).
    if (found.servesModel === 0) return this.placement.refuseUnservable(req, 0, now);
    if (found.nodes.length === 0) return undefined;
    const all: CandidateField = {
      candidates:
        fresh?.candidates ?? buildCandidates(found.nodes, this.parts.index, req, this.settings.blockTokens, now, this.parts.active),
      eligible: found.nodes,
    };
    const admission = this.placement.admitFairShare(req, e.tenant, all.candidates, now);
    // Over its fair share once queued: it waits (the queue releases it at its weight's share).
    if (!admission.ok) return undefined;
    const pinnedNode = this.placement.storedResponseNode(req);
    const shared = holdForOthers(all, admission, pinnedNode, req.promptTokens);
    const meeting = meetingDeadline(shared.candidates, now, e.deadlineAt);
    if (meeting.length === 0) return undefined;
    const field: CandidateField = {
      candidates: meeting.map((i) => shared.candidates[i]!),
      eligible: meeting.map((i) => shared.eligible[i]!),
    };
    const choice = spilledPast(this.placement.choose(req, field.candidates, pinnedNode), field.candidates, shared.candidates);
    if (estimateWaitMs(field.candidates[choice.index]!) > boundMs) return undefined;
    const charged = this.placement.charge(req, e.tenant, now);
    if ("refused" in charged) return charged.refused;
    return this.placement.place(req, e.tenant, field, choice, admission, charged.rateLimit, this.admittedOf(e, now), now);
  }

  private admittedOf(e: QueueEntry, now: number): Admitted {
    return {
      priority: rankClass(e.rank),
      rank: e.rank,
      objectiveMs: e.objectiveMs,
      queuedMs: Math.max(0, now - e.enqueuedAt),
      demoted: e.demoted,
    };
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
    e: Pick<QueueEntry, "req" | "rank" | "objectiveMs" | "enqueuedAt" | "demoted">,
    why: ShedReason,
    now: number,
    wasQueued = false,
    estimatedTtftMs?: number,
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
      demoted: e.demoted,
      estimatedTtftMs,
      retryAfterSeconds: retryAfterSeconds(this.queue.totalWork(), this.nodeWaits(nodes, now)),
    });
  }
}
