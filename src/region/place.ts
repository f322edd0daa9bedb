/**
 * Placing a request in its region (the region worker): ask the region's Durable Object (the
 * prompt's shard) for a node, or place it statelessly without the object ({@link placeStateless}),
 * and call nodes until one produces its first byte ({@link tryNodes}); then tell the object of that
 * first byte ({@link accept}). A request's first placement (dispatch.ts) and a stream's
 * continuation on another node (continue.ts) are both placed here.
 */
import { regionStub } from "../config/load.ts";
import { budgetOf } from "./bill.ts";
import { priceOf } from "../core/usage/cost.ts";
import { DEFAULT_RESERVE_MAX_TOKENS, reservationOf } from "../core/usage/reservations.ts";
import { isInitNeeded, type InitNeeded, type RouteAnswer, type RouteSessionApi } from "../contracts/region-object.ts";
import type { Attempt, RegionRefusal } from "../contracts/region-service.ts";
import { MAX_OBJECTIVE_MS, type RouteRequest } from "../contracts/routing.ts";
import { tenantMayUse } from "../core/region/candidates.ts";
import { shardOf } from "../core/shard.ts";
import { callNode, type Placed, type Upstream } from "./call-node.ts";
import { deadlineOf, type RegionContext } from "./context.ts";
import { concatBytes } from "../http/body.ts";
import type { NodeEngine } from "../contracts/node.ts";
import { chooseStateless, countStateless, rememberNode } from "./stateless.ts";
import { logBookkeepingError, settledIfThrown, settlePlacement } from "./settle.ts";

const ignore = () => {};

/** A streamed request is relayed (and checked for its end) as SSE whatever the node's Content-Type says. */
export function answersAsSse(stream: boolean, response: Response): boolean {
  const contentType = response.headers.get("content-type") ?? "";
  return contentType.includes("text/event-stream") || (stream && response.ok);
}

/** A request placed on a node: by the object (with its session), or statelessly (without). */
export type Session = Extract<RouteAnswer, { ok: true }>["session"];
type Placement = { ok: true; placed: Placed; session: Session | undefined } | Extract<RouteAnswer, { ok: false }>;

/** Where {@link tryNodes} places a request, with what body, and where it notes its attempts. */
interface NodePlan {
  shard: number;
  /** Nodes not to try (grows with each failure). */
  exclude: string[];
  /** The node's body, or how to build it for the placed node (a continuation's depends on its engine). */
  body: Uint8Array | ((placed: Placed) => Uint8Array);
  own: Attempt[];
  /** A continuation (continue.ts): only these engines, and the prompt grown by the text carried over. */
  continuation?: { engines: RouteRequest["engines"]; promptTokens: number } | undefined;
  /** The span the placements' spans hang from (a continuation's); default the region's span. */
  traceParent?: string | undefined;
}

/** A node that produced its first byte. */
type Answering = { ok: true; placed: Placed; session: Session | undefined; upstream: Extract<Upstream, { ok: true }> };

/**
 * Places the request and calls nodes until one produces its first byte: at most `1 + max_retries`
 * nodes, each failure noted in `plan.own` and its session completed as failed. Once the region's
 * object has failed for this request, the rest of its attempts are stateless.
 */
export async function tryNodes(rc: RegionContext, plan: NodePlan): Promise<Answering | { ok: false; refusal: RegionRefusal }> {
  const region = rc.region.config.name;
  let lastMessage = `region ${region} could not place the request`;
  let stateless = false;
  const parent = plan.traceParent ?? rc.trace.root.id;
  for (let attempt = 0; attempt <= rc.config.raw.limits.max_retries; attempt++) {
    let placement: Placement | undefined;
    const decision = rc.trace.route(parent, attempt, stateless);
    if (!stateless) {
      placement = await ask(rc, plan).catch((e: unknown) => {
        console.error(JSON.stringify({ event: "region_error", request_id: rc.request.requestId, region, message: String(e) }));
        stateless = true;
        return undefined;
      });
    }
    if (!placement) decision.set({ "warmpath.stateless": true });
    placement ??= placeStateless(rc, plan);
    if (!placement.ok) {
      decision.end({ "warmpath.refusal": placement.reason }, placement.message);
      plan.own.push({ region, outcome: placement.shed ? `shed: ${placement.shed}` : placement.reason });
      return {
        ok: false,
        refusal: {
          reason: placement.reason,
          message: placement.message,
          retryAfterSeconds: placement.retryAfterSeconds,
          waitSeconds: placement.waitSeconds,
          rateLimit: placement.rateLimit,
          shed: placement.shed,
          objectiveMs: placement.objectiveMs,
          queuedMs: placement.queuedMs,
          estimatedTtftMs: placement.estimatedTtftMs,
          demoted: placement.demoted,
          attempts: plan.own,
        },
      };
    }
    const { placed, session } = placement;
    rc.trace.placed(decision, placed, rc.region.init.settings.shards > 1 ? plan.shard : undefined);
    if (rc.clientGone?.aborted) {
      // The client went while the request waited in the region's queue: no node is called, and the
      // placement is settled at once (else the object counted it in flight until its timeout).
      void settlePlacement(rc, placed, session, { status: "cancelled" });
      plan.own.push({ region, node: placed.nodeId, outcome: "client gone" });
      return {
        ok: false,
        refusal: { reason: "failed", message: "the client went before a node was called", retryAfterSeconds: 0, attempts: plan.own },
      };
    }
    const call = rc.trace.nodeCall(parent, placed, attempt);
    const calledAt = Date.now();
    // An error of our own here (a body or header it could not build) settles the placement first:
    // else the object counts the request in flight until its timeout (600 s by default).
    const { answered, upstream } = await settledIfThrown(rc, placed, session, async () => {
      const answered = await callNode(rc, placed, typeof plan.body === "function" ? plan.body(placed) : plan.body, call.headers);
      if (answered.ok) rc.trace.firstByte(call.span, calledAt, answered.response.status);
      return { answered, upstream: await wholeIfJson(rc, answered) };
    });
    if (!upstream.ok) {
      // Before its first byte, or a JSON answer that broke off: this node's call failed.
      if (answered.ok) rc.trace.endLive(upstream.detail, { "warmpath.failure": upstream.reason });
      else call.span.end({ "warmpath.failure": upstream.reason }, upstream.detail);
      plan.own.push({ region, node: placed.nodeId, outcome: upstream.detail });
      lastMessage = `node ${placed.nodeId} in ${region} failed: ${upstream.detail}`;
      void settlePlacement(rc, placed, session, { status: "failed", reason: upstream.reason });
      plan.exclude.push(placed.nodeId);
      continue;
    }
    plan.own.push({ region, node: placed.nodeId, outcome: "ok" });
    return { ok: true, placed, session, upstream };
  }
  return { ok: false, refusal: { reason: "failed", message: lastMessage, retryAfterSeconds: 1, attempts: plan.own } };
}

/**
 * Asks the region's object (its shard) for a node. The call carries the init's fingerprint only;
 * an object that does not hold that init (its first call, a new configuration) asks for it, and is
 * called once more with it (src/contracts/region-init.ts). A `retryable` error (a broken connection
 * to the object) is tried once more; an `overloaded` one is not: asking again only adds to the
 * overload.
 */
async function ask(rc: RegionContext, plan: NodePlan): Promise<Placement> {
  const stub = regionStub(rc.env, rc.region, plan.shard);
  const call = (init: typeof rc.region.init | typeof rc.region.initRef) =>
    stub.route(init, routeRequest(rc, plan)) as Promise<RouteAnswer | InitNeeded>;
  const route = async (): Promise<RouteAnswer> => {
    const answer = await call(rc.region.initRef);
    if (!isInitNeeded(answer)) return answer;
    const again = await call(rc.region.init);
    // The object just built its router from this init: a second ask is a broken object, not a race.
    if (isInitNeeded(again)) throw new Error(`region object ${rc.region.config.name} refused its init`);
    return again;
  };
  const answer = await route().catch((e: unknown) => {
    const err = e as { retryable?: boolean; overloaded?: boolean };
    if (err.retryable === true && err.overloaded !== true) return route();
    throw e;
  });
  if (!answer.ok) return answer;
  const { session, ...placed } = answer;
  rememberNode(rc.region.config.name, placed.nodeId, placed.url, rc.request.model, Date.now(), placed.engine);
  return { ok: true, placed, session };
}

/** What the region's object is asked. */
function routeRequest(rc: RegionContext, { shard, exclude, continuation }: NodePlan): RouteRequest {
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

/**
 * The node's first byte arrived: the region learns it (and a stored response's node). A
 * non-streamed answer is whole at its first byte: that byte is reported with its completion, one
 * call instead of two. A stored response's id is not: its follow-up may come as soon as the client
 * has the answer, so the object must know its node first.
 */
export function accept(
  rc: RegionContext,
  placed: Placed,
  session: Extract<Placement, { ok: true }>["session"],
  upstream: Extract<Upstream, { ok: true }>,
  shard: number,
): { sse: boolean; foldFirstByte: boolean } {
  const responseId = rc.request.storesResponses ? responseIdOf(upstream.first, rc.request.tenant.id) : undefined;
  // Its follow-ups will ask the shard the response id names, which may not be this one.
  const shards = rc.region.init.settings.shards;
  const keeper = responseId !== undefined && shards > 1 ? shardOf(responseId, shards) : shard;
  const sse = answersAsSse(rc.request.stream, upstream.response);
  const foldFirstByte = !sse && responseId === undefined;
  if (session) {
    if (!foldFirstByte) {
      rc.ctx.waitUntil(Promise.resolve(session.firstByte(keeper === shard ? responseId : undefined)).then(ignore, logBookkeepingError));
    }
    if (keeper !== shard && responseId !== undefined) {
      const remember = regionStub(rc.env, rc.region, keeper).rememberResponse(rc.region.init, responseId, placed.nodeId);
      rc.ctx.waitUntil(remember.then(ignore, logBookkeepingError));
    }
  }
  return { sse, foldFirstByte };
}

/** How far into an answer a response id is looked for: the Responses API puts it first (JSON and SSE alike). */
const RESPONSE_ID_SCAN_CHARS = 4096;

/**
 * The response id at the head of a Responses API answer (`{"id":"resp_...` in JSON, or the
 * `response.created` event's `"response":{"id":"resp_...`), scoped by tenant as requests name it.
 */
function responseIdOf(first: Uint8Array | undefined, tenant: string): string | undefined {
  if (!first) return undefined;
  const head = new TextDecoder().decode(first.subarray(0, RESPONSE_ID_SCAN_CHARS));
  const m = /"id"\s*:\s*"([^"\\]{1,200})"/.exec(head);
  return m ? `${tenant}:${m[1]}` : undefined;
}

/** The largest non-streamed answer read whole before it is relayed (past it, the rest is relayed as it comes). */
const MAX_WHOLE_ANSWER_BYTES = 16 * 1024 * 1024;

/**
 * A non-streamed answer is read whole before the client gets any of it: a node that breaks off
 * part-way has then sent the client nothing, and the request is tried whole on another node like
 * any failure before the first byte. Engines write such an answer at once, when it is done, so
 * reading it whole costs no time to first byte. Bounded by MAX_WHOLE_ANSWER_BYTES and the idle
 * timeout.
 */
async function wholeIfJson(rc: RegionContext, upstream: Upstream): Promise<Upstream> {
  if (!upstream.ok || !upstream.reader || answersAsSse(rc.request.stream, upstream.response)) return upstream;
  const { reader } = upstream;
  const chunks: Uint8Array[] = upstream.first ? [upstream.first] : [];
  let size = upstream.first?.byteLength ?? 0;
  const idleMs = rc.config.raw.limits.stream_idle_timeout_ms;
  for (;;) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waitMs = Math.max(1, Math.min(idleMs, deadlineOf(rc) - Date.now()));
    const read = await Promise.race([reader.read(), new Promise<"idle">((resolve) => (timer = setTimeout(() => resolve("idle"), waitMs)))])
      .catch(() => "broken" as const)
      .finally(() => clearTimeout(timer));
    if (read === "idle" || read === "broken") {
      void reader.cancel().catch(() => {});
      return { ok: false, reason: read === "idle" ? "timeout" : "connection", detail: `answer broke off after ${size} bytes (${read})` };
    }
    if (read.done) break;
    chunks.push(read.value);
    size += read.value.byteLength;
    // Too large to hold: relayed from here as it comes, as a stream is.
    if (size > MAX_WHOLE_ANSWER_BYTES) return { ...upstream, first: concatBytes(chunks) };
  }
  const done = new ReadableStream<Uint8Array>({ start: (c) => c.close() }).getReader();
  return { ...upstream, first: concatBytes(chunks), reader: done };
}

/**
 * A placement without the region's object (stateless.ts), shaped as the object's own answer so
 * the rest of the region's steps are the same; no session, no bookkeeping.
 */
function placeStateless(rc: RegionContext, { exclude, continuation }: NodePlan): Placement {
  const region = rc.region.config.name;
  const { request } = rc;
  // Whose stored response a follow-up continues only the object knows (src/core/region/stored-responses.ts):
  // without it, never sent to a node, which would continue it for whoever asked. Retried soon, as a full region.
  if (request.previousResponseId !== undefined) {
    return {
      ok: false,
      reason: "saturated",
      message: `region ${region} cannot check whose stored response this is now`,
      retryAfterSeconds: 1,
    };
  }
  // A node dedicated to other tenants stays theirs without the object too; a continuation goes
  // only to a node whose engine can continue (as its last placement said).
  const may = (nodeId: string, engine: NodeEngine | undefined) =>
    tenantMayUse(rc.region.config.node_tenants, nodeId, request.tenant.id) &&
    (!continuation?.engines || continuation.engines.includes(engine ?? "other"));
  const choice = chooseStateless(region, request.model, request.hashes[0] ?? "", exclude, Date.now(), may);
  if (!choice) return { ok: false, reason: "saturated", message: `region ${region} is unavailable`, retryAfterSeconds: 1 };
  countStateless(region, choice.nodeId, 1);
  return {
    ok: true,
    session: undefined,
    placed: {
      ok: true,
      ticket: "stateless",
      nodeId: choice.nodeId,
      url: choice.url,
      engine: choice.engine,
      decision: "stateless",
      policy: "stateless",
      matchBlocks: 0,
      totalBlocks: request.hashes.length,
      predictedCachedTokens: 0,
      workAheadTokens: 0,
      estimatedTtftMs: 0,
      candidates: 0,
      heldForOthers: 0,
      considered: [],
    },
  };
}
