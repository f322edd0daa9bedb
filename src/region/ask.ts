/**
 * Asking the region's Durable Object (the prompt's shard) for a node (place.ts): what the object is
 * asked (the request's tenant, limits, budget and objective, as routing.ts's `RouteRequest`), the
 * init handshake, and a client that goes while the request waits in the object's queue.
 */
import { regionStub } from "../config/load.ts";
import { budgetOf } from "./bill.ts";
import { priceOf } from "../core/usage/cost.ts";
import { DEFAULT_RESERVE_MAX_TOKENS, reservationOf } from "../core/usage/reservations.ts";
import { isInitNeeded, type InitNeeded, type RouteAnswer } from "../contracts/region-object.ts";
import { MAX_OBJECTIVE_MS, type RouteRequest } from "../contracts/routing.ts";
import type { Placed } from "./call-node.ts";
import type { RegionContext } from "./context.ts";
import { rememberNode } from "./stateless.ts";
import { inBackground } from "./settle.ts";

const ignore = () => {};

/** A request placed on a node: by the object (with its session), or statelessly (without). */
export type Session = Extract<RouteAnswer, { ok: true }>["session"];
export type Placement = { ok: true; placed: Placed; session: Session | undefined } | Extract<RouteAnswer, { ok: false }>;

/** What of a request's placement the object is asked with (place.ts's plan). */
export interface AskPlan {
  shard: number;
  /** Nodes not to try (grows with each failure). */
  exclude: string[];
  /** A continuation (continue.ts): only these engines, and the prompt grown by the text carried over. */
  continuation?: { engines: RouteRequest["engines"]; promptTokens: number } | undefined;
}

/** The object was not asked (again) because the client went: read as such by place.ts (`rc.clientGone`). */
const CLIENT_GONE: Extract<RouteAnswer, { ok: false }> = {
  ok: false,
  reason: "saturated",
  message: "the client went before the region placed the request",
  retryAfterSeconds: 0,
};

/**
 * Asks the region's object (its shard) for a node. The call carries the init's fingerprint only;
 * an object that does not hold that init (its first call, a new configuration) asks for it, and is
 * called once more with it (src/contracts/region-init.ts). A `retryable` error (a broken connection
 * to the object) is tried once more; an `overloaded` one is not: asking again only adds to the
 * overload.
 */
export async function ask(rc: RegionContext, plan: AskPlan): Promise<Placement> {
  const stub = regionStub(rc.env, rc.region, plan.shard);
  const call = (init: typeof rc.region.init | typeof rc.region.initRef) =>
    stub.route(init, routeRequest(rc, plan)) as Promise<RouteAnswer | InitNeeded>;
  const route = async (): Promise<RouteAnswer> => {
    const answer = await call(rc.region.initRef);
    if (!isInitNeeded(answer)) return answer;
    // Gone meanwhile: asked again, the request could wait in the queue after its leave was sent.
    if (rc.clientGone?.aborted) return CLIENT_GONE;
    const again = await call(rc.region.init);
    // The object just built its router from this init: a second ask is a broken object, not a race.
    if (isInitNeeded(again)) throw new Error(`region object ${rc.region.config.name} refused its init`);
    return again;
  };
  const stopWatching = leaveQueueWhenGone(rc, stub);
  const answer = await route()
    .catch((e: unknown) => {
      const err = e as { retryable?: boolean; overloaded?: boolean };
      if (err.retryable === true && err.overloaded !== true) return rc.clientGone?.aborted ? CLIENT_GONE : route();
      throw e;
    })
    .finally(stopWatching);
  if (!answer.ok) return answer;
  const { session, ...placed } = answer;
  rememberNode(rc.region.config.name, placed.nodeId, placed.url, rc.request.model, Date.now(), placed.engine);
  return { ok: true, placed, session };
}

/**
 * While `route` waits (the request may be queued in the object, docs/ADMISSION.md), a client that
 * goes takes the request out of the queue at once ({@link RegionDurableObject.leaveQueue}): it
 * would otherwise keep its place, hold back the requests behind it and keep its budget's hold
 * until placed (then settled unanswered, see {@link tryNodes}) or out of time. Returns what stops
 * watching, once `route` has answered.
 */
function leaveQueueWhenGone(rc: RegionContext, stub: ReturnType<typeof regionStub>): () => void {
  const signal = rc.clientGone;
  if (!signal) return ignore;
  const leave = () => inBackground(rc, stub.leaveQueue(rc.holdKey));
  signal.addEventListener("abort", leave, { once: true });
  return () => signal.removeEventListener("abort", leave);
}

/** What the region's object is asked. */
function routeRequest(rc: RegionContext, { shard, exclude, continuation }: AskPlan): RouteRequest {
  const r = rc.request;
  const shards = rc.region.init.settings.shards;
  return {
    requestId: r.requestId,
    holdKey: rc.holdKey,
    tenant: r.tenant.id,
    tenantWeight: r.tenant.weight,
    // A sharded region's shards each judge their part of the commitment, as of the rate limits.
    committedTokensPerMinute: perShard(r.tenant.committedTokensPerMinute, shards),
    model: r.model,
    hashes: r.hashes,
    promptTokens: continuation?.promptTokens ?? r.promptTokens,
    sessionKey: r.sessionKey,
    exclude: exclude.length ? [...exclude] : undefined,
    continuation: continuation ? true : undefined,
    engines: continuation?.engines,
    failoverFrom: r.failoverFrom,
    previousResponseId: r.previousResponseId,
    waitToBeatSeconds: r.waitToBeatSeconds,
    shard: shards > 1 ? shard : undefined,
    tenantLimits: limitsOf(r.tenant, shards),
    priority: r.priority,
    objectiveMs: r.tenant.objectiveMs,
    requestObjectiveMs: r.requestObjectiveMs,
    // The objective counts from the edge's arrival: the long haul and a nearer region's answer are spent already.
    spentMs: Math.min(MAX_OBJECTIVE_MS, Math.max(0, Date.now() - r.startedAt)),
    // A retry or a continuation is the same request: it passed the budget when it was first placed,
    // and keeps the hold it took then (the object finds it by the dispatch's hold key).
    ...(exclude.length === 0 && !continuation ? budgetAsk(rc) : {}),
  };
}

/** A budgeted request's budget, and what it holds against it until its bill settles it (docs/USAGE.md). */
function budgetAsk(rc: RegionContext): Pick<RouteRequest, "budget" | "reservation"> {
  const { request, config } = rc;
  const tenant = config.tenantById.get(request.tenant.id);
  const budget = budgetOf(tenant);
  if (!budget) return {};
  const cap = tenant?.budget?.reserve_max_tokens ?? DEFAULT_RESERVE_MAX_TOKENS;
  const price = priceOf(request.model, config.raw.prices, tenant?.prices);
  return { budget, reservation: reservationOf(request.promptTokens, request.maxTokens, cap, price) };
}

/**
 * The tenant's configured rate limits, as the region object takes them. A sharded region's
 * shards each keep their own budget, so each spends 1/shards of the limit: exact when a tenant's
 * prompts spread over the shards, stricter when they concentrate on one (docs/SCALING.md).
 */
function limitsOf(tenant: RegionContext["request"]["tenant"], shards: number): RouteRequest["tenantLimits"] {
  if (tenant.requestsPerMinute === undefined && tenant.promptTokensPerMinute === undefined) return undefined;
  return {
    requestsPerMinute: perShard(tenant.requestsPerMinute, shards),
    promptTokensPerMinute: perShard(tenant.promptTokensPerMinute, shards),
  };
}

/** One shard's part of a tenant's per-minute figure (a limit, a commitment): at least 1. */
function perShard(perMinute: number | undefined, shards: number): number | undefined {
  return perMinute === undefined ? undefined : Math.max(1, Math.ceil(perMinute / shards));
}
