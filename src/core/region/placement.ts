/**
 * Placing a request in the region: the steps that narrow where it may go or refuse it (the
 * nodes that may take it, the tenant's fair share, the nodes held for the others, saturation, the
 * tenant's rate budget), the policy's choice, and the placement itself, which credits the chosen
 * node at once (load model, the tenant's queued prefill, the prompt speculatively in the index)
 * and issues the request's ticket (tickets.ts). `route` runs them all for a request placed now;
 * the region's queue (queued-admission.ts) runs them for each request it releases.
 */
import type { Demotion, RouteRequest, RouteResult } from "../../contracts/routing.ts";
import type { Candidate, PolicyChoice } from "../policies/types.ts";
import type { Decision } from "../policies/index.ts";
import type { PrefixIndex } from "../prefix-index.ts";
import type { BoundedLru } from "../lru.ts";
import { seededRandom } from "../random.ts";
import { notAdmitted, type Admitted } from "./admission.ts";
import { buildCandidates, eligibleNodes, shortestWaitSeconds } from "./candidates.ts";
import { considered, estimateMs } from "./considered.ts";
import type { Admission } from "./fair-share.ts";
import { holdForOthers, shareNodes, type CandidateField } from "./hold-for-others.ts";
import type { NodeEntry, NodeTable } from "./node-table.ts";
import type { RegionLedger } from "./ledger.ts";
import type { RegionSettings } from "./settings.ts";
import type { RegionParts } from "./parts.ts";
import { RateBudgets, rateLimitOf, type BudgetResult } from "./rate-budget.ts";
import {
  noNodeRefusal,
  overShareRefusal,
  rateLimitedRefusal,
  saturatedRefusal,
  noContinuerRefusal,
  unavailableRefusal,
  unknownResponseRefusal,
  type RouteRefusal,
} from "./refusals.ts";
import type { Dispatched, Tickets } from "./tickets.ts";
import { touchedSamples } from "./usage-evidence.ts";

/** The decision a placement is logged as: a failover is one whatever else happens in this region; a retry is another node after a failure. */
function decisionOf(req: RouteRequest, choice: PolicyChoice): Decision {
  // A continuation's node is the policy's choice (its cache hit, its spread), not a retry's.
  return req.failoverFrom !== undefined ? "failover" : req.exclude?.length && !req.continuation ? "retry" : choice.decision;
}

export class Placement {
  /** Placements so far: a queue serving an arrival reuses its candidates while nothing was placed since. */
  count = 0;
  private readonly parts: RegionParts;
  private readonly tickets: Tickets;
  private readonly budgets = new RateBudgets();
  private readonly random: () => number;
  private readonly index: PrefixIndex;
  private readonly sessions: BoundedLru<string, string>;
  private readonly settings: RegionSettings;
  private readonly nodes: NodeTable;
  private readonly ledger: RegionLedger;

  constructor(parts: RegionParts, tickets: Tickets) {
    this.settings = parts.settings;
    this.nodes = parts.nodes;
    this.ledger = parts.ledger;
    this.parts = parts;
    this.tickets = tickets;
    this.random = seededRandom(parts.settings.seed);
    this.index = parts.index;
    this.sessions = parts.sessions;
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
      candidates: buildCandidates(found.nodes, this.index, req, this.settings.blockTokens, now, this.parts.active),
      eligible: found.nodes,
    };
    const tenant = req.tenant ?? "";
    const admission = this.admitFairShare(req, tenant, all.candidates, now);
    if (!admission.ok) return this.refuseOverShare(req, tenant, admission, all, now);
    const pinnedNode = this.storedResponseNode(req);
    const field = holdForOthers(all, admission, pinnedNode, req.promptTokens);
    const saturated = this.refuseIfSaturated(req, field, now);
    if (saturated) return saturated;
    const charged = this.charge(req, tenant, now);
    if ("refused" in charged) return charged.refused;
    const choice = this.choose(req, field.candidates, pinnedNode);
    return this.place(req, tenant, field, choice, admission, charged.rateLimit, notAdmitted(req), now);
  }

  /**
   * The tenant's rate budget (rate-budget.ts), spent only where the request is placed: its rate
   * limit's state for the answer, or the refusal (here and in every region, at once).
   */
  charge(req: RouteRequest, tenant: string, now: number): { rateLimit: RouteRefusal["rateLimit"] } | { refused: RouteRefusal } {
    const budget = this.budgets.take(tenant, req.tenantLimits, req.promptTokens, now);
    const rateLimit = rateLimitOf(budget);
    return budget.ok ? { rateLimit } : { refused: this.refuseRateLimited(req, tenant, budget, rateLimit, now) };
  }

  /**
   * No node may take the request. Told apart for the edge: no node serving the model (to this
   * tenant) means the region cannot serve it at all; nodes that serve it but are all excluded,
   * broken or at their in-flight limit mean it is saturated until the soonest cool-down ends.
   */
  refuseUnservable(req: RouteRequest, servesModel: number, now: number, servesEngine = servesModel): RouteRefusal {
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
  admitFairShare(req: RouteRequest, tenant: string, candidates: readonly Candidate[], now: number): Admission {
    return this.parts.fair.admit(
      tenant,
      req.tenantWeight ?? 1,
      now,
      shareNodes(candidates, req.promptTokens),
      this.settings.fairShareWaitSeconds,
      this.parts.demand.floodsEveryone(now),
    );
  }

  /**
   * A tenant over its fair share (or past its commitment: `why`) whose own nodes are all past the
   * short wait: another region may take it, else 429.
   */
  refuseOverShare(
    req: RouteRequest,
    tenant: string,
    admission: Extract<Admission, { ok: false }>,
    all: CandidateField,
    now: number,
    why: Demotion = "share",
  ): RouteRefusal {
    this.ledger.rejected(req, "over-share", considered(all.candidates, all.eligible, -1, now), now);
    return overShareRefusal(this.settings.name, tenant, admission, why);
  }

  /**
   * The node storing the response a follow-up continues (Responses API), if known: it must go there
   * if that node can take it, so neither the fair share nor the policy may move it. (Gone or
   * unavailable, the policy places it and the node answers for itself.)
   */
  storedResponseNode(req: RouteRequest): string | undefined {
    return req.previousResponseId !== undefined ? this.parts.responses.nodeOf(req.previousResponseId, req.tenant ?? "") : undefined;
  }

  /**
   * A follow-up of a stored response this region holds for no such tenant and id (another
   * tenant's, forgotten, or never stored here) is refused before anything else: sent to a node, the
   * node storing that id would continue it for whoever asked (stored-responses.ts).
   */
  refuseUnknownResponse(req: RouteRequest): RouteRefusal | undefined {
    if (req.previousResponseId === undefined || this.storedResponseNode(req) !== undefined) return undefined;
    return unknownResponseRefusal(this.settings.name);
  }

  /**
   * Saturation: if even the best node's queue is past the bound, another region should serve; as a
   * failover from a saturated region, this one serves only if it can start the request sooner.
   * Undefined when the region can take it.
   */
  refuseIfSaturated(req: RouteRequest, field: CandidateField, now: number): RouteRefusal | undefined {
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
  refuseRateLimited(
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
  choose(req: RouteRequest, candidates: Candidate[], pinnedNode: string | undefined): PolicyChoice {
    const sessionNode = req.sessionKey !== undefined ? this.sessions.get(req.sessionKey) : undefined;
    const pinned = pinnedNode !== undefined ? candidates.findIndex((c) => c.id === pinnedNode) : -1;
    if (pinned >= 0) return { index: pinned, decision: "pinned" };
    return this.parts.policy.choose({
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
  place(
    req: RouteRequest,
    tenant: string,
    field: CandidateField,
    choice: PolicyChoice,
    admission: Extract<Admission, { ok: true }>,
    rateLimit: RouteRefusal["rateLimit"],
    admitted: Admitted,
    now: number,
  ): RouteResult {
    this.count++;
    const chosen = field.candidates[choice.index]!;
    const entry = field.eligible[choice.index]!;
    const decision = decisionOf(req, choice);
    const estimatedTtftMs = Math.round(estimateMs(chosen));
    const { predicted, touched, claimed } = this.dispatch(req, tenant, chosen, entry, now);
    if (admitted.demoted === "share") this.parts.demand.dispatchedDemoted(tenant, chosen.uncachedTokens, now);
    const { ticket, shown } = this.tickets.issue(
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
      policy: this.parts.policy.name,
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
      demoted: admitted.demoted,
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
    this.parts.fair.queued(tenant, chosen.id, chosen.uncachedTokens, now);
    const touched = touchedSamples(this.index, chosen.id, req.hashes, chosen.matchBlocks);
    const claimed = this.index.speculate(chosen.id, req.hashes);
    this.parts.longPrefixes.record(req.hashes, req.promptTokens);
    if (req.sessionKey !== undefined) this.sessions.set(req.sessionKey, chosen.id);
    this.parts.active?.add(chosen.id, req.hashes);
    return { predicted, touched, claimed };
  }
}
