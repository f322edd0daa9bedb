/**
 * The region's requests in flight, from placement to release: each one's ticket holds what its
 * first byte, its completion and its expiry need to correct the load model and the prefix index
 * and to release its node (router.ts: `route` -> optionally `firstByte` -> `complete`). A request
 * the node refused or failed before its first byte is rolled back out of the prefix index, which
 * takes back what its insert evicted (PrefixIndex.speculate); a node's answer that shows less
 * cached than predicted corrects the index (usage-evidence.ts).
 */
import { nodeComputed, type CompletionOutcome, type Considered, type RouteRequest } from "../../contracts/routing.ts";
import type { PrefixIndex } from "../prefix-index.ts";
import type { Decision } from "../policies/index.ts";
import type { ActiveBlocks } from "./active-blocks.ts";
import type { Admitted } from "./admission.ts";
import type { ClassReserve } from "./class-reserve.ts";
import { considered } from "./considered.ts";
import type { FairShare } from "./fair-share.ts";
import type { CandidateField } from "./hold-for-others.ts";
import type { RegionLedger, LedgerEntry } from "./ledger.ts";
import { countComputed, countDuration, countFirstByte, countOutcome, countRouted } from "./metrics.ts";
import type { NodeTable } from "./node-table.ts";
import type { RegionParts } from "./parts.ts";
import type { RegionSettings } from "./settings.ts";
import type { StoredResponses } from "./stored-responses.ts";
import { chainHashes, learnFromUsage, type EvidenceContext } from "./usage-evidence.ts";

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
  /** The node's load generation at dispatch (NodeLoad.generation): a restart since leaves the new boot's counts alone. */
  generation: number;
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
   * node's answer is compared with (usage-evidence.ts learnFromUsage).
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
export interface Dispatched {
  index: number;
  decision: Decision;
  estimatedTtftMs: number;
  predicted: Ticket["predicted"];
  touched: Ticket["touched"];
  claimed: { from: number; to: number };
  admitted: Admitted;
}

export class Tickets {
  private readonly byId = new Map<string, Ticket>();
  private seq = 0;
  /** Ticket ids start with the router instance's id: a ticket from before a restart is unknown, not another request's. */
  private readonly prefix: string;
  private readonly settings: RegionSettings;
  private readonly nodes: NodeTable;
  private readonly index: PrefixIndex;
  private readonly ledger: RegionLedger;
  private readonly fair: FairShare;
  private readonly reserve: ClassReserve;
  private readonly responses: StoredResponses;
  private readonly active: ActiveBlocks | undefined;
  /** What a completion's usage corrects the index with (usage-evidence.ts). */
  private readonly evidence: EvidenceContext;

  constructor(parts: RegionParts, prefix: string) {
    this.prefix = prefix;
    this.settings = parts.settings;
    this.nodes = parts.nodes;
    this.index = parts.index;
    this.ledger = parts.ledger;
    this.fair = parts.fair;
    this.reserve = parts.reserve;
    this.responses = parts.responses;
    this.active = parts.active;
    this.evidence = { index: this.index, settings: this.settings, dropClaims: (nodeId) => this.dropClaims(nodeId) };
  }

  /** Requests in flight. */
  get size(): number {
    return this.byId.size;
  }

  /** A node restarted: its cache and its requests are gone (their tickets stay, to be released). */
  nodeRestarted(nodeId: string): void {
    for (const t of this.byId.values()) if (t.nodeId === nodeId) t.active = false;
    this.dropClaims(nodeId);
  }

  /** A node was removed: its requests are forgotten, and their queued prefill leaves the tenants' queues. */
  nodeRemoved(nodeId: string): void {
    for (const [id, t] of this.byId) {
      if (t.nodeId !== nodeId) continue;
      this.byId.delete(id);
      if (t.firstByteAt === undefined) this.fair.drained(t.ledger.tenant, t.nodeId, t.uncachedTokens);
    }
  }

  /** Releases the requests past `requestTimeoutMs` (abandoned). Returns when the next one would expire, or undefined. */
  expire(now: number): number | undefined {
    let nextAt: number | undefined;
    for (const [id, t] of this.byId) {
      const deadline = t.dispatchedAt + this.settings.requestTimeoutMs;
      if (deadline <= now) this.release(id, t, now);
      else nextAt = Math.min(nextAt ?? Infinity, deadline);
    }
    return nextAt;
  }

  /**
   * Issues a placed request's ticket and records the decision (ledger, node metrics): the ticket holds
   * what `firstByte`, `complete` and expiry need to correct the load model and the index and to
   * release the node. Returns the ticket id and the considered candidates shown in the answer.
   */
  issue(req: RouteRequest, field: CandidateField, d: Dispatched, now: number): { ticket: string; shown: Considered[] } {
    const chosen = field.candidates[d.index]!;
    const entry = field.eligible[d.index]!;
    const ticket = this.prefix + (++this.seq).toString(36);
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
    this.byId.set(ticket, {
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
      generation: entry.load.generation,
    });
    countRouted(entry.metrics, d.decision, chosen.matchBlocks);
    this.reserve.placed(chosen.id, d.admitted.rank);
    return { ticket, shown };
  }

  /** The first byte of a request's answer arrived: its prefill is done. A stored response's id, if any, is remembered with its node. */
  firstByte(ticketId: string, now: number, responseId?: string, accepted = true): void {
    const t = this.byId.get(ticketId);
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
    // Not a request from before the node restarted: its prefill is not the new boot's, nor a sample of its rate.
    if (t.generation === n.load.generation && n.load.firstByte(now, t.dispatchedAt, t.predicted, t.uncachedTokens)) this.nodes.poolRates();
    countFirstByte(n.metrics, now - t.dispatchedAt);
  }

  /** Releases a request. Returns false for an unknown (expired or foreign) ticket. */
  complete(ticketId: string, outcome: CompletionOutcome, now: number): boolean {
    const t = this.byId.get(ticketId);
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
      } else {
        this.confirmClaims(t);
        countComputed(n.metrics, t.promptTokens, t.predictedCachedTokens);
        if (outcome.usage?.cachedTokens !== undefined)
          learnFromUsage(this.evidence, n, t, outcome.usage.promptTokens, outcome.usage.cachedTokens);
      }
    }
    this.ledger.completed(t.ledger, outcome, now);
    // How long it held its place on the node after its first byte (node-load.ts slotWaitMs): only
    // an answer streamed to its end or to a client that went. A non-streamed answer's first byte
    // comes with its end (the engine decoded before it), and a failure's end is not a decode's.
    const streamed = outcome.firstByteMsAgo === undefined && (outcome.status === "ok" || outcome.status === "cancelled");
    this.release(ticketId, t, now, streamed && t.firstByteAt !== undefined ? now - t.firstByteAt : undefined);
    return true;
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
    for (const t of this.byId.values()) if (t.nodeId === nodeId) t.claimedTo = t.claimedFrom;
  }

  /** Releases a ticket; `holdMs`: how long it held its place after its first byte, when that is a sample of it (complete). */
  private release(ticketId: string, t: Ticket, now: number, holdMs?: number): void {
    this.byId.delete(ticketId);
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
    // A request from before the node restarted: the restart already cleared what it counted.
    if (t.generation !== n.load.generation) return;
    if (t.firstByteAt === undefined) n.load.releaseBeforeFirstByte(now, t.predicted);
    n.load.complete(t.promptTokens, holdMs);
    if (t.active) this.active?.remove(t.nodeId, chainHashes(t.chain));
  }
}
