/**
 * A node answered: the answer to the edge (the node's status and body, the `x-warmpath-*`
 * headers that explain the decision), relayed chunk by chunk, and, once it has ended, the
 * decision line and the completion reported on the request's session with its region object.
 */
import { EXPLAIN, REQUEST_ID } from "../contracts/headers.ts";
import { CONTRACT_HEADER, REGION_CONTRACT_VERSION, type Attempt } from "../contracts/region-service.ts";
import type { RouteSessionApi } from "../contracts/region-object.ts";
import type { CompletionOutcome, Usage } from "../contracts/routing.ts";
import type { DecisionLine } from "../contracts/decision-line.ts";
import { recordDecision } from "../proxy/decision-log.ts";
import { rateLimitHeaders } from "../proxy/rate-limit-headers.ts";
import { openaiErrorBody } from "../proxy/node-error.ts";
import { relay, type RelayEnd } from "../proxy/relay.ts";
import { streamEndOf } from "../proxy/stream-end.ts";
import { UsageEventFilter } from "../proxy/stream-usage.ts";
import type { Placed, Upstream } from "./call-node.ts";
import { deadlineOf, type RegionContext } from "./context.ts";
import { continuable, continuer, type ContinuationContext, type ContinuationRecord, type Live } from "./continue.ts";
import { settlePlacement } from "./settle.ts";
import { SeamFilter } from "./seam.ts";
import { regionSinks } from "./sinks.ts";
import { billOf, checkedUsage, logRejectedUsage, type RejectedUsage } from "./bill.ts";
import { wellFormed } from "../proxy/usage-check.ts";
import { regionStub } from "../config/load.ts";
import type { Bill } from "../contracts/usage.ts";

/** Response headers never copied from the node. */
const DROPPED_RESPONSE_HEADERS = ["content-length", "connection", "keep-alive", "transfer-encoding", "set-cookie", "server"];

/** A node answered: everything needed to relay its answer and account for it. */
export interface Answer {
  /** The request's session with the region object, or undefined when it was placed without it (stateless). */
  session: RouteSessionApi | undefined;
  /** The shard that decided, in a sharded region. */
  shard: number | undefined;
  placed: Placed;
  upstream: Extract<Upstream, { ok: true }>;
  /** Attempts before this region's, and this region's own (which a continuation adds to). */
  attempts: Attempt[];
  own: Attempt[];
  /** The shard that placed it (0 unsharded), and the nodes this request already failed on: where a continuation is placed. */
  shardIndex: number;
  exclude: string[];
  /** The answer is relayed as SSE (answersAsSse, place.ts). */
  sse: boolean;
  /** The first byte is reported with the completion (no firstByte call was made). */
  foldFirstByte: boolean;
}

/** The `x-warmpath-*` headers that say why this node answered. */
function explain(rc: RegionContext, a: Answer, headers: Headers): void {
  const { placed } = a;
  const name = rc.region.config.name;
  headers.set(REQUEST_ID, rc.request.requestId);
  headers.set(CONTRACT_HEADER, String(REGION_CONTRACT_VERSION));
  headers.set(EXPLAIN.region, name);
  headers.set(EXPLAIN.node, placed.nodeId);
  headers.set(EXPLAIN.decision, placed.decision);
  headers.set(EXPLAIN.policy, placed.policy);
  headers.set(EXPLAIN.prefixMatch, `${placed.matchBlocks}/${placed.totalBlocks}`);
  headers.set(EXPLAIN.attempts, String(a.attempts.length + a.own.length));
  if (a.shard !== undefined) headers.set(EXPLAIN.shard, String(a.shard));
  // A long prompt sent past the nearest region to one holding its prefix says so, and what it saved.
  const warm = rc.request.warm;
  if (warm?.region === name) headers.set(EXPLAIN.regionChoice, `warm-prefix; nearest=${warm.nearest}; held-tokens=${warm.heldTokens}`);
  // A flooding tenant kept off the nodes held for the others says so (fair-share.ts).
  if (placed.heldForOthers > 0) headers.set(EXPLAIN.heldNodes, String(placed.heldForOthers));
  if (placed.priority !== undefined) headers.set(EXPLAIN.priority, placed.priority);
  if (placed.objectiveMs) headers.set(EXPLAIN.objective, String(Math.round(placed.objectiveMs)));
  if (placed.queuedMs !== undefined) headers.set(EXPLAIN.queued, String(Math.round(placed.queuedMs)));
  if (placed.demoted !== undefined) headers.set(EXPLAIN.demoted, placed.demoted);
  for (const [k, v] of Object.entries(rateLimitHeaders(placed.rateLimit))) headers.set(k, v);
}

/** The decision line of an answered request. */
function decisionLine(
  rc: RegionContext,
  a: Answer,
  end: RelayEnd,
  usage: Usage | undefined,
  bytes: number,
  continuations: ContinuationRecord[],
  rejected: RejectedUsage | undefined,
): DecisionLine {
  const { placed, upstream } = a;
  const req = rc.request;
  const warm = req.warm?.region === rc.region.config.name ? req.warm : undefined;
  return {
    event: "request",
    request_id: req.requestId,
    tenant: req.tenant.id,
    model: req.model,
    status: upstream.response.status,
    region: rc.region.config.name,
    region_choice: warm && {
      reason: "warm-prefix",
      nearest: warm.nearest,
      held_tokens: warm.heldTokens,
      nearest_held_tokens: warm.nearestHeldTokens,
      saved_ms: Math.round(warm.savedMs),
      extra_round_trip_ms: Math.round(warm.extraRoundTripMs),
    },
    shard: a.shard,
    node: placed.nodeId,
    decision: placed.decision,
    policy: placed.policy,
    prefix_match_blocks: placed.matchBlocks,
    prefix_total_blocks: placed.totalBlocks,
    prompt_tokens_estimated: req.promptTokens,
    predicted_cached_tokens: placed.predictedCachedTokens,
    work_ahead_tokens: placed.workAheadTokens,
    estimated_ttft_ms: placed.estimatedTtftMs,
    priority: placed.priority,
    objective_ms: placed.objectiveMs ? Math.round(placed.objectiveMs) : undefined,
    queued_ms: placed.queuedMs !== undefined ? Math.round(placed.queuedMs) : undefined,
    demoted: placed.demoted,
    candidates: placed.candidates,
    held_for_others: placed.heldForOthers,
    considered: placed.considered,
    attempts: [...a.attempts, ...a.own],
    continuations: continuations.length ? continuations : undefined,
    first_byte_ms: upstream.firstByteMs,
    duration_ms: Date.now() - req.startedAt,
    end,
    bytes,
    usage,
    usage_rejected: rejected && { reason: rejected.reason, limit: rejected.limit, reported: rejected.reported },
    measured_cached_tokens: usage?.cachedTokens ?? null,
  };
}

/**
 * A request placed without its region object (stateless.ts) is billed to the object once it
 * answers: one attempt, and a `usage_unbilled` line with the bill if it does not, so the usage can
 * still be accounted for from the log.
 */
async function billWithoutSession(rc: RegionContext, bill: Bill, shard: number): Promise<void> {
  try {
    await regionStub(rc.env, rc.region, shard).recordUsage(rc.region.init, bill);
  } catch (e) {
    console.error(
      JSON.stringify({
        event: "usage_unbilled",
        request_id: rc.request.requestId,
        region: rc.region.config.name,
        bill,
        message: String(e),
      }),
    );
  }
}

/** The answer to the edge: the node's status and body, relayed, with the decision explained. */
export function respond(rc: RegionContext, a: Answer): Response {
  const { upstream } = a;
  const headers = new Headers(upstream.response.headers);
  for (const h of DROPPED_RESPONSE_HEADERS) headers.delete(h);
  explain(rc, a, headers);

  // A stream that may be continued on another node if this one fails (continue.ts).
  const kind = a.sse && upstream.response.ok ? continuable(rc) : undefined;
  const seam = kind ? new SeamFilter(kind, rc.usageInjected, rc.config.raw.limits.max_body_bytes) : undefined;
  const cc: ContinuationContext | undefined =
    kind && seam
      ? {
          rc,
          kind,
          seam,
          live: { placed: a.placed, session: a.session, upstream },
          shard: a.shardIndex,
          exclude: a.exclude,
          own: a.own,
          records: [],
        }
      : undefined;

  let finish!: (end: RelayEnd, usage: Usage | undefined, bytes: number) => void;
  const finished = new Promise<void>((resolve) => {
    finish = (end, reported, bytes) => {
      // The node answering last: the first, or the last continuation's.
      const live: Live = cc?.live ?? { placed: a.placed, session: a.session, upstream };
      // A node's usage is checked before anything counts it (src/proxy/usage-check.ts): refused, it
      // is neither billed, nor learned from, nor logged as measured.
      const shown = seam?.snapshot();
      const measure = {
        // A usage the seam could not take as counts is still the node's claim, checked (and refused) as such.
        usage: seam ? (seam.answerUsage() ?? reported) : reported,
        streamedTokens: shown?.tokens,
        bytes,
        sse: a.sse,
        relayedChars: shown?.textChars,
      };
      const checked = checkedUsage(rc, measure);
      if (checked.rejected) logRejectedUsage(rc, live.placed.nodeId, checked.rejected);
      const usage = checked.rejected || (reported && wellFormed(reported)) ? undefined : reported;
      recordDecision(decisionLine(rc, a, end, usage, bytes, cc?.records ?? [], checked.rejected), regionSinks(rc));
      // A node's own client error (a context-length error, a bad parameter) computed nothing: the
      // region takes the prediction back and forgets the prompt it recorded for that node.
      const status: CompletionOutcome["status"] = live.upstream.response.status >= 400 ? "refused" : end;
      const firstByteMsAgo = a.foldFirstByte ? Math.max(0, Date.now() - upstream.firstByteAt) : undefined;
      // Billed once, with the node that answered last: what the client's answer carried (a continued
      // stream's whole usage, as the seam rewrote it), or an estimate; a node's own error costs nothing.
      const bill = status === "refused" ? undefined : billOf(rc, { ...measure, usage: checked.usage }, checked.maxTokens);
      // An estimate is explained: which request, how it ended, whether another node finished it.
      if (bill?.estimated) {
        const line = {
          event: "usage_estimated",
          request_id: rc.request.requestId,
          region: rc.region.config.name,
          end,
          continuations: cc?.records.length ?? 0,
          usage_rejected: checked.rejected?.reason,
        };
        console.log(JSON.stringify(line));
      }
      // Without a session (placed statelessly), or with one whose object was restarted meanwhile
      // (its calls fail), the bill goes to the object's current instance on its own (faults: 8 of
      // 40 bills were lost this way before).
      const outcome = { status, usage, firstByteMsAgo, continuation: live.continuation, bill };
      resolve(
        settlePlacement(rc, live.placed, live.session, outcome).then((taken) =>
          taken || !bill ? undefined : billWithoutSession(rc, bill, a.shardIndex),
        ),
      );
    };
  });
  rc.ctx.waitUntil(finished);

  if (!upstream.reader) {
    finish("ok", undefined, 0);
    return new Response(null, { status: upstream.response.status, headers });
  }
  // A node's own error on an OpenAI API, read whole (place.ts), is answered in OpenAI's shape.
  const first =
    !a.sse && upstream.response.status >= 400 && rc.request.api !== "messages" && upstream.first
      ? (openaiErrorBody(upstream.response.status, upstream.first) ?? upstream.first)
      : upstream.first;
  if (first !== upstream.first) headers.set("content-type", "application/json");
  const { limits } = rc.config.raw;
  const body = relay({
    first,
    reader: upstream.reader,
    sse: a.sse,
    requestId: rc.request.requestId,
    filter: seam ?? (a.sse && rc.usageInjected ? new UsageEventFilter() : undefined),
    resume: cc && continuer(cc),
    onEnd: finish,
    streamEnd: streamEndOf(rc.request.api),
    idleTimeoutMs: limits.stream_idle_timeout_ms,
    deadlineAt: deadlineOf(rc),
    clientGone: rc.clientGone,
  });
  return new Response(body, { status: upstream.response.status, headers });
}
