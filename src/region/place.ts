/**
 * Placing a request in its region (the region worker): ask the region's Durable Object (the
 * prompt's shard) for a node (ask.ts), or place it statelessly without the object ({@link placeStateless}),
 * and call nodes until one produces its first byte ({@link tryNodes}); then tell the object of that
 * first byte ({@link accept}). A request's first placement (dispatch.ts) and a stream's
 * continuation on another node (continue.ts) are both placed here.
 */
import { regionStub } from "../config/load.ts";
import type { Attempt, RegionRefusal } from "../contracts/region-service.ts";
import { tenantMayUse } from "../core/region/candidates.ts";
import { shardOf } from "../core/shard.ts";
import { ask, type AskPlan, type Placement, type Session } from "./ask.ts";
import { callNode, type Placed, type Upstream } from "./call-node.ts";
import { deadlineOf, type RegionContext } from "./context.ts";
import { concatBytes } from "../http/body.ts";
import type { NodeEngine } from "../contracts/node.ts";
import { chooseStateless, countStateless } from "./stateless.ts";
import { inBackground, settledIfThrown, settlePlacement } from "./settle.ts";

export type { Session };

/** A streamed request is relayed (and checked for its end) as SSE whatever the node's Content-Type says. */
export function answersAsSse(stream: boolean, response: Response): boolean {
  const contentType = response.headers.get("content-type") ?? "";
  return contentType.includes("text/event-stream") || (stream && response.ok);
}

/** Where {@link tryNodes} places a request, with what body, and where it notes its attempts. */
interface NodePlan extends AskPlan {
  /** The node's body, or how to build it for the placed node (a continuation's depends on its engine). */
  body: Uint8Array | ((placed: Placed) => Uint8Array);
  own: Attempt[];
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
    // The client went before this attempt (a retry after a failed node): nothing is placed. (The
    // budget's hold, left to the retry by the failed node's completion, is released after its grace.)
    if (rc.clientGone?.aborted) return clientGone(plan, region);
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
    if (!placement.ok && rc.clientGone?.aborted) {
      // Taken out of the region's queue because the client went, or not asked again (ask.ts): not a refusal of the region's.
      decision.end({ "warmpath.refusal": "client-gone" }, "the client went while the request was queued");
      return clientGone(plan, region);
    }
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
      return clientGone(plan, region, placed.nodeId);
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

/** The request's end when its client went before a node was called: noted among its attempts, no node blamed. */
function clientGone(plan: NodePlan, region: string, node?: string): { ok: false; refusal: RegionRefusal } {
  plan.own.push(node === undefined ? { region, outcome: "client gone" } : { region, node, outcome: "client gone" });
  return {
    ok: false,
    refusal: { reason: "failed", message: "the client went before a node was called", retryAfterSeconds: 0, attempts: plan.own },
  };
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
      inBackground(rc, session.firstByte(keeper === shard ? responseId : undefined));
    }
    if (keeper !== shard && responseId !== undefined) {
      const remember = regionStub(rc.env, rc.region, keeper).rememberResponse(rc.region.init, responseId, placed.nodeId);
      inBackground(rc, remember);
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
