/**
 * The answers of a region that cannot take a request: why (for the operator and the client), and
 * when to try again. Each is a pure answer built after `RegionRouter.route` has recorded the
 * refusal in its ledger; the reason tells the edge what to do next (`no-node`, `saturated` and
 * `over-share`: another region may take it; `rate-limited`: 429 at once, routing.ts).
 */
import type { Demotion, PriorityClass, RouteRequest, RouteResult, ShedReason } from "../../contracts/routing.ts";
import type { Admission } from "./fair-share.ts";
import type { BudgetResult } from "./rate-budget.ts";

/** A refusal: the `ok: false` half of a route result. */
export type RouteRefusal = Extract<RouteResult, { ok: false }>;

/** No node of the region serves the model to this tenant: another region must serve it (or a node register here). */
export function noNodeRefusal(region: string, model: string): RouteRefusal {
  return { ok: false, reason: "no-node", message: `region ${region} has no node serving model ${model}`, retryAfterSeconds: 5 };
}

/**
 * A stream's continuation, and no other node serving the model runs an engine that can continue one
 * (`continuation_engines`; a node that reports no engine is `other`): no wait makes one appear.
 */
export function noContinuerRefusal(region: string, model: string, engines: readonly string[]): RouteRefusal {
  return {
    ok: false,
    reason: "no-node",
    message: `no other node in region ${region} serving ${model} runs an engine that can continue a stream (continuation_engines: ${engines.join(", ")}; a node that reports no engine is "other")`,
    retryAfterSeconds: 5,
  };
}

/**
 * Nodes serve the model, but none may take a request now (excluded, breaker open or at the
 * in-flight limit): saturated, to retry once the soonest cool-down ends (`retryAfterSeconds`).
 */
export function unavailableRefusal(region: string, model: string, retryAfterSeconds: number): RouteRefusal {
  return {
    ok: false,
    reason: "saturated",
    message: `every node in region ${region} serving ${model} is busy or unavailable`,
    retryAfterSeconds,
  };
}

/** How a refusal says a tenant sent more than its commitment. */
const PAST_COMMITMENT = "past its committed prompt tokens a minute";
/** How a refusal says a tenant sent more than it usually does (tenant-growth.ts). */
const PAST_USUAL = "sending faster than it usually does, out of step with the others";

/**
 * The tenant is over its fair share of a contended region, or past its commitment (`why`), and its
 * queue is full (fair-share.ts): retry once it drains.
 */
export function overShareRefusal(
  region: string,
  tenant: string,
  admission: Extract<Admission, { ok: false }>,
  why: Demotion = "share",
): RouteRefusal {
  const held = admission.reserved > 0 ? ` (${admission.reserved} of its nodes held for the other tenants)` : "";
  const over = why === "commitment" ? PAST_COMMITMENT : why === "growth" ? PAST_USUAL : "over its fair share";
  return {
    ok: false,
    reason: "over-share",
    message: `tenant ${tenant} sent ${(100 * admission.shareOfQueue).toFixed(0)}% of region ${region}'s recent prefill, ${over}, and its queue is full${held}`,
    retryAfterSeconds: admission.retryAfterSeconds,
    // A commitment or a usual rate is named: the edge's 429 then says so instead of "over its fair share".
    demoted: why === "share" ? undefined : why,
  };
}

/**
 * Even the shortest queue (`minWait`, s) is past the region's bound (`maxQueueSeconds`), or, for a
 * failover, past the wait of the region it would replace (`req.waitToBeatSeconds`): another region
 * should serve. `waitSeconds` tells the next region what to beat.
 */
export function saturatedRefusal(region: string, req: RouteRequest, minWait: number, maxQueueSeconds: number): RouteRefusal {
  const bound = minWait > maxQueueSeconds ? maxQueueSeconds : req.waitToBeatSeconds!;
  return {
    ok: false,
    reason: "saturated",
    message:
      minWait > maxQueueSeconds
        ? `region ${region} is saturated: the shortest prefill queue is ${minWait.toFixed(1)} s`
        : `region ${region} cannot start it sooner than ${req.failoverFrom ?? "the nearer region"}: its shortest prefill queue is ${minWait.toFixed(1)} s`,
    retryAfterSeconds: Math.min(60, Math.max(1, Math.ceil(minWait - bound))),
    waitSeconds: minWait,
  };
}

/**
 * The request continues a stored response (`previous_response_id`) this region holds for no such
 * tenant and id (stored-responses.ts): never sent to a node. Another region may hold it (the edge
 * asks it), else the client gets 400 `previous_response_not_found`, as OpenAI answers an unknown id.
 */
export function unknownResponseRefusal(region: string): RouteRefusal {
  return {
    ok: false,
    reason: "unknown-response",
    message: `region ${region} holds no stored response of this tenant by that id`,
    retryAfterSeconds: 0,
  };
}

/** The tenant spent its requests or prompt tokens per minute (rate-budget.ts), with its limits' state for the 429's headers. */
export function rateLimitedRefusal(
  region: string,
  tenant: string,
  budget: Extract<BudgetResult, { ok: false }>,
  rateLimit: RouteRefusal["rateLimit"],
): RouteRefusal {
  return {
    ok: false,
    reason: "rate-limited",
    message: `tenant ${tenant} is over its ${budget.limit === "requests" ? "requests" : "prompt tokens"} per minute in region ${region}`,
    retryAfterSeconds: budget.retryAfterSeconds,
    rateLimit,
  };
}

/** What a shed request's message says of a lowered class. */
const DEMOTED_AS: Record<Demotion | "none", string> = {
  none: "",
  share: " (ranked below its class: its tenant sends more than its share of the region's demand)",
  commitment: ` (ranked below its class: its tenant is ${PAST_COMMITMENT})`,
  growth: ` (ranked below its class: its tenant is ${PAST_USUAL})`,
};

/**
 * No node can give the request its first token within its objective, even after the region's
 * queue (`objective`), its deadline passed while it was queued (`deadline`), or the queue was full
 * and it ranked below everything in it (`queue-full`): another region may take it (the edge fails
 * over, with the time already spent), else 429 with `Retry-After` (docs/ADMISSION.md).
 */
export function shedRefusal(
  region: string,
  req: RouteRequest,
  why: ShedReason,
  at: {
    priority: PriorityClass;
    objectiveMs: number;
    queuedMs: number;
    retryAfterSeconds: number;
    demoted?: Demotion | undefined;
    /** At arrival (`objective`): the soonest first token predicted, after the queue (ms). */
    estimatedTtftMs?: number | undefined;
  },
): RouteRefusal {
  // Finite only: a prediction of never (no node could ever start it) would not survive JSON, and
  // "Infinity ms" explains nothing; the message then says never. Anything else not finite is no
  // prediction at all, and the message says none.
  const estimated = at.estimatedTtftMs;
  const predicted = estimated !== undefined && Number.isFinite(estimated) ? estimated : undefined;
  const prediction =
    predicted !== undefined
      ? ` (its first token predicted in ${Math.round(predicted)} ms)`
      : estimated === Number.POSITIVE_INFINITY
        ? " (no node is predicted to start it at all)"
        : "";
  const what =
    why === "queue-full"
      ? `its queue is full of requests that go first`
      : why === "deadline"
        ? `its deadline passed after ${Math.round(at.queuedMs)} ms in the queue`
        : `no node can start it in time, even after the queue${prediction}`;
  return {
    ok: false,
    reason: "shed",
    shed: why,
    message: `region ${region} cannot give this ${at.priority} request${DEMOTED_AS[at.demoted ?? "none"]} its first token within its ${Math.round(at.objectiveMs)} ms objective: ${what}`,
    retryAfterSeconds: at.retryAfterSeconds,
    priority: at.priority,
    objectiveMs: at.objectiveMs,
    queuedMs: at.queuedMs,
    demoted: at.demoted,
    ...(predicted !== undefined ? { estimatedTtftMs: predicted } : {}),
    // What the next region must beat: the objective left.
    waitSeconds: Math.max(0, (at.objectiveMs - (req.spentMs ?? 0) - at.queuedMs) / 1000),
  };
}
