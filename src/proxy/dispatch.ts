/**
 * Dispatch: ask the region's Durable Object for a node, call the node, retry before the first
 * byte, fail over between regions, and relay the answer.
 *
 * Bounded everywhere: at most `max_region_attempts` regions, at most `1 + max_retries` nodes per
 * region, and `first_byte_timeout_ms` per node until the first body byte. The response to the
 * client is only started once the node has produced its first body byte, so every failure before
 * that point (connection refused, 5xx, 429, timeout, an empty stream) can still be retried on
 * another node without the client seeing anything. After it, the relay takes over (relay.ts).
 */
import type { RequestContext } from "../api/request-context.ts";
import { regionStub, type LoadedRegion } from "../config/load.ts";
import { ApiError } from "../http/errors.ts";
import type { RegionDurableObject } from "../../durable-objects/region.ts";
import type { FailureReason, RouteRequest, RouteResult, Usage } from "../contracts/routing.ts";
import type { Decision } from "../contracts/routing.ts";
import { originTokenAllowed } from "../core/origins.ts";
import { tenantMayUse } from "../core/region/candidates.ts";
import { shardOf } from "../core/shard.ts";
import { recordDecision, type DecisionLine, type DecisionSinks } from "./decision-log.ts";
import { rateLimitHeaders } from "./rate-limit-headers.ts";
import { relay, type RelayEnd } from "./relay.ts";
import { chooseStateless, countStateless, rememberNode } from "./stateless.ts";
import type { StreamEnd } from "./stream-end.ts";
import { UsageEventFilter } from "./stream-usage.ts";

const ignore = () => {};
/** A lost firstByte/complete only delays the load model's correction (the ticket expires); log it. */
const logBookkeepingError = (e: unknown) => console.error(JSON.stringify({ event: "region_bookkeeping_error", message: String(e) }));

/** Upstream statuses worth another node: overload and server faults, not the client's own errors. */
const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);

/** Request headers passed to the node; everything else (notably the client's API key) stays at the edge. */
const FORWARDED_HEADERS = ["content-type", "accept", "accept-encoding", "user-agent", "openai-beta", "anthropic-version", "anthropic-beta"];

/** Response headers never copied from the node. */
const DROPPED_RESPONSE_HEADERS = ["content-length", "connection", "keep-alive", "transfer-encoding", "set-cookie", "server"];

/** What routing learned about the request: the rest comes from the {@link RequestContext}. */
export interface DispatchInput {
  model: string;
  /** `/v1/chat/completions` or `/v1/completions`. */
  path: string;
  /** The body forwarded: the client's bytes, with usage asked for on a stream that did not (stream-usage.ts). */
  body: Uint8Array;
  /** The same with the tenant's `cache_salt` (cache-salt.ts), for regions with `engine_cache_isolation = "cache_salt"`. */
  saltedBody?: Uint8Array | undefined;
  /** Whether the router asked for usage: its event is then taken out of the client's stream. */
  usageInjected: boolean;
  hashes: string[];
  promptTokens: number;
  sessionKey: string | undefined;
  /** Responses API: the stored response this continues, scoped by tenant (`tenant:resp_...`). */
  previousResponseId?: string | undefined;
  /** Whether the answer's id may be continued from (the Responses API): the region remembers its node. */
  storesResponses?: boolean | undefined;
  /** Whether the client asked for a stream (`stream: true`): then the answer is SSE, whatever its Content-Type. */
  stream?: boolean | undefined;
  /** How the API's stream says it finished. Default: OpenAI's `data: [DONE]`. */
  streamEnd?: StreamEnd | undefined;
  /** Regions to try, nearest first. */
  regions: LoadedRegion[];
  /** The estimated round trip from the client to each region (ms, parallel to `regions`), when its location is known. */
  roundTripMs?: ReadonlyArray<number | undefined> | undefined;
  /** Set when `regions` starts with a farther region that holds more of the prompt's prefix. */
  warm?: WarmRegion | undefined;
}

/** Why a farther region was tried first: it holds more of this long prompt's prefix (src/core/warm-region.ts). */
export interface WarmRegion {
  region: string;
  nearest: string;
  heldTokens: number;
  nearestHeldTokens: number;
  savedMs: number;
  extraRoundTripMs: number;
}

interface Attempt {
  region: string;
  node?: string;
  outcome: string;
}

type Ok = Extract<RouteResult, { ok: true }>;

export async function dispatch(rc: RequestContext, input: DispatchInput): Promise<Response> {
  const { env, ctx } = rc;
  const { limits } = rc.config.raw;
  const attempts: Attempt[] = [];
  let retryAfter = Infinity;
  let lastMessage = "no region serves this model";
  /** Regions that refused the tenant as over its fair share (429 if no region could serve it at all). */
  let overShare = 0;
  /**
   * When a saturated region would start the request, in seconds from now as the client sees it
   * (its shortest queue plus its round trip): a farther region serves only if it can beat that.
   */
  let soonest: number | undefined;

  const nearest = input.regions[0]?.config.name;
  for (const [regionIndex, region] of input.regions.slice(0, limits.max_region_attempts).entries()) {
    // A sharded region: the shard owning the prompt's first block decides (src/core/shard.ts); a
    // follow-up of a stored response asks the shard that remembers the response's node.
    const shards = region.init.settings.shards;
    const shard = shards > 1 ? shardOf(input.previousResponseId ?? input.hashes[0], shards) : 0;
    const stub = regionStub(env, region, shard);
    const roundTripSeconds = (input.roundTripMs?.[regionIndex] ?? 0) / 1000;
    const waitToBeatSeconds = soonest === undefined ? undefined : Math.max(0, soonest - roundTripSeconds);
    const exclude: string[] = [];
    // Once the region's object has failed for this request, the rest of its attempts are stateless.
    let stateless = false;
    for (let attempt = 0; attempt <= limits.max_retries; attempt++) {
      const ask = async (): Promise<RouteResult> =>
        await stub.route(region.init, {
          requestId: rc.requestId,
          tenant: rc.tenant.id,
          tenantWeight: rc.tenant.weight,
          model: input.model,
          hashes: input.hashes,
          promptTokens: input.promptTokens,
          sessionKey: input.sessionKey,
          exclude: exclude.length ? exclude : undefined,
          failoverFrom: regionIndex > 0 ? nearest : undefined,
          previousResponseId: input.previousResponseId,
          waitToBeatSeconds,
          shard: shards > 1 ? shard : undefined,
          tenantLimits: limitsOf(rc.tenant, shards),
        });
      let routed: RouteResult | undefined;
      if (!stateless) {
        try {
          routed = await ask().catch((e: unknown) => {
            // A `retryable` error (a broken connection to the object) is tried once more; an
            // `overloaded` one is not: asking again only adds to the overload.
            const err = e as { retryable?: boolean; overloaded?: boolean };
            if (err.retryable === true && err.overloaded !== true) return ask();
            throw e;
          });
          if (routed.ok) rememberNode(region.config.name, routed.nodeId, routed.url, input.model, Date.now());
        } catch (e) {
          console.error(
            JSON.stringify({ event: "region_error", request_id: rc.requestId, region: region.config.name, message: String(e) }),
          );
          stateless = true;
        }
      }
      routed ??= statelessRoute(region, input, exclude, rc.tenant.id);
      if (!routed.ok) {
        // A tenant over its rate limit is told so at once: another region would only spend another budget.
        if (routed.reason === "rate-limited") {
          attempts.push({ region: region.config.name, outcome: routed.reason });
          recordRefusal(rc, input, attempts, 429);
          throw ApiError.rateLimited(
            `${routed.message}. Retry after ${routed.retryAfterSeconds} s.`,
            routed.retryAfterSeconds,
            rateLimitHeaders(routed.rateLimit),
          );
        }
        if (routed.reason === "over-share") overShare++;
        if (routed.waitSeconds !== undefined) soonest = Math.min(soonest ?? Infinity, routed.waitSeconds + roundTripSeconds);
        attempts.push({ region: region.config.name, outcome: routed.reason });
        retryAfter = Math.min(retryAfter, routed.retryAfterSeconds);
        lastMessage = routed.message;
        break;
      }
      const upstream = await callNode(rc, routed, region, input);
      if (!upstream.ok) {
        attempts.push({ region: region.config.name, node: routed.nodeId, outcome: upstream.detail });
        lastMessage = `node ${routed.nodeId} in ${region.config.name} failed: ${upstream.detail}`;
        if (!stateless) {
          ctx.waitUntil(stub.complete(routed.ticket, { status: "failed", reason: upstream.reason }).then(ignore, logBookkeepingError));
        } else countStateless(region.config.name, routed.nodeId, -1);
        exclude.push(routed.nodeId);
        continue;
      }
      // A stored response's id is in its first bytes: the region remembers which node holds it.
      const responseId = input.storesResponses ? responseIdOf(upstream.first, rc.tenant.id) : undefined;
      // Its follow-ups will ask the shard the response id names, which may not be this one.
      const keeper = responseId !== undefined && shards > 1 ? shardOf(responseId, shards) : shard;
      // A non-streamed answer is whole at its first byte: that byte is reported with its completion,
      // one call to the object instead of two. A stored response's id is not: its follow-up may
      // come as soon as the client has the answer, so the object must know its node first.
      const sse = answersAsSse(input, upstream.response);
      const foldFirstByte = !sse && responseId === undefined;
      if (!stateless) {
        if (!foldFirstByte) {
          ctx.waitUntil(stub.firstByte(routed.ticket, keeper === shard ? responseId : undefined).then(ignore, logBookkeepingError));
        }
        if (keeper !== shard) {
          const remember = regionStub(env, region, keeper).rememberResponse(region.init, responseId, routed.nodeId);
          ctx.waitUntil(remember.then(ignore, logBookkeepingError));
        }
      }
      attempts.push({ region: region.config.name, node: routed.nodeId, outcome: "ok" });
      return respond({
        rc,
        input,
        stub: stateless ? undefined : stub,
        region,
        shard: shards > 1 ? shard : undefined,
        routed,
        decision: routed.decision,
        upstream,
        attempts,
        sse,
        foldFirstByte,
      });
    }
  }

  recordRefusal(rc, input, attempts, overShare > 0 ? 429 : 503);
  const seconds = Number.isFinite(retryAfter) ? retryAfter : 5;
  const tried = attempts.map((a) => (a.node ? `${a.region}/${a.node}: ${a.outcome}` : `${a.region}: ${a.outcome}`)).join("; ");
  // A tenant refused for its share somewhere is told to slow down (429); otherwise the fleet is full (503).
  if (overShare > 0) {
    throw ApiError.overShare(
      `This tenant is over its fair share of the capacity that could serve it (${lastMessage}; tried ${tried}). Retry after ${seconds} s.`,
      seconds,
    );
  }
  throw ApiError.noCapacity(
    `No node can take this request now (${lastMessage}; tried ${tried || "nothing"}). Retry after ${seconds} s.`,
    seconds,
  );
}

/** The decision line of a request no region placed. */
function recordRefusal(rc: RequestContext, input: DispatchInput, attempts: Attempt[], status: number): void {
  recordDecision(
    {
      event: "request",
      request_id: rc.requestId,
      tenant: rc.tenant.id,
      model: input.model,
      status,
      prompt_tokens_estimated: input.promptTokens,
      attempts,
      duration_ms: Date.now() - rc.startedAt,
      measured_cached_tokens: null,
    },
    sinks(rc),
  );
}

/**
 * The tenant's configured rate limits, as the region object takes them. A sharded region's
 * shards each keep their own budget, so each spends 1/shards of the limit: exact when a tenant's
 * prompts spread over the shards, stricter when they concentrate on one (docs/SCALING.md).
 */
function limitsOf(tenant: RequestContext["tenant"], shards: number): RouteRequest["tenantLimits"] {
  const l = tenant.rate_limits;
  const part = (limit: number | undefined) => (limit === undefined ? undefined : Math.max(1, Math.ceil(limit / shards)));
  return l ? { requestsPerMinute: part(l.requests_per_minute), promptTokensPerMinute: part(l.prompt_tokens_per_minute) } : undefined;
}

type Upstream =
  | {
      ok: true;
      response: Response;
      first: Uint8Array | undefined;
      reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
      /** From the call to the first body byte (ms), and when it came (ms epoch, the worker's clock). */
      firstByteMs: number;
      firstByteAt: number;
    }
  | { ok: false; reason: FailureReason; detail: string };

/** Calls the node and waits for its first body byte (or a definitive non-retryable answer). */
/** The first-byte wait allowed is this many times the load model's estimate for the request on its node. */
const FIRST_BYTE_ESTIMATE_FACTOR = 4;

/**
 * How long to wait for this request's first byte on this node: a 100k-token cold prefill
 * legitimately takes seconds, a cached prompt milliseconds, so the wait follows the load model's
 * estimate (x4, between the configured floor and bound), and never runs past the request's deadline.
 */
export function firstByteTimeoutMs(
  estimatedTtftMs: number,
  limits: { first_byte_timeout_ms: number; first_byte_timeout_floor_ms: number },
  untilDeadlineMs: number,
): number {
  const adaptive = Math.max(limits.first_byte_timeout_floor_ms, FIRST_BYTE_ESTIMATE_FACTOR * estimatedTtftMs);
  return Math.max(1, Math.min(limits.first_byte_timeout_ms, adaptive, untilDeadlineMs));
}

async function callNode(rc: RequestContext, routed: Ok, region: LoadedRegion, input: DispatchInput): Promise<Upstream> {
  const { limits } = rc.config.raw;
  const timeoutMs = firstByteTimeoutMs(routed.estimatedTtftMs, limits, rc.startedAt + limits.request_deadline_ms - Date.now());
  const headers = new Headers();
  for (const name of FORWARDED_HEADERS) {
    const v = rc.request.headers.get(name);
    if (v !== null) headers.set(name, v);
  }
  headers.set("x-request-id", rc.requestId);
  // The origin token only ever goes to the region's allowed origins (src/core/origins.ts).
  if (region.originToken && originTokenAllowed(routed.url, region)) headers.set("authorization", `Bearer ${region.originToken}`);

  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no first byte within ${timeoutMs} ms`)), timeoutMs);
  const started = Date.now();
  try {
    const response = await fetch(new URL(input.path, routed.url.endsWith("/") ? routed.url : routed.url + "/").toString(), {
      method: "POST",
      headers,
      body: region.config.engine_cache_isolation === "cache_salt" && input.saltedBody ? input.saltedBody : input.body,
      signal: controller.signal,
      // Never follow a node's redirect: a 307 would re-send the customer's body wherever Location
      // points, a 302 would turn into a GET. A redirect is a misbehaving node (tried elsewhere), and
      // its target is never shown to the client.
      redirect: "manual",
    });
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel().catch(() => {});
      return { ok: false, reason: "redirect", detail: `HTTP ${response.status} redirect` };
    }
    if (RETRYABLE_STATUS.has(response.status)) {
      await response.body?.cancel().catch(() => {});
      return { ok: false, reason: response.status === 429 ? "http-429" : "http-5xx", detail: `HTTP ${response.status}` };
    }
    if (!response.body) {
      const at = Date.now();
      return { ok: true, response, first: undefined, reader: undefined, firstByteMs: at - started, firstByteAt: at };
    }
    const reader = response.body.getReader();
    const { done, value } = await reader.read();
    if (done && response.ok) {
      return { ok: false, reason: "empty-body", detail: "empty body" };
    }
    const at = Date.now();
    return { ok: true, response, first: value, reader, firstByteMs: at - started, firstByteAt: at };
  } catch (e) {
    return controller.signal.aborted
      ? { ok: false, reason: "timeout", detail: "timeout before first byte" }
      : { ok: false, reason: "connection", detail: `connection failed (${(e as Error).message})` };
  } finally {
    clearTimeout(timer);
  }
}

/** A node answered: everything needed to relay its answer and account for it. */
interface Answer {
  rc: RequestContext;
  input: DispatchInput;
  /** The region's object, or undefined when the request was placed without it (stateless). */
  stub: DurableObjectStub<RegionDurableObject> | undefined;
  region: LoadedRegion;
  /** The shard that decided, in a sharded region. */
  shard: number | undefined;
  routed: Ok;
  decision: Decision;
  upstream: Extract<Upstream, { ok: true }>;
  attempts: Attempt[];
  /** The answer is relayed as SSE ({@link answersAsSse}). */
  sse: boolean;
  /** The first byte is reported with the completion (no firstByte call was made). */
  foldFirstByte: boolean;
}

/** A streamed request is relayed (and checked for its end) as SSE whatever the node's Content-Type says. */
function answersAsSse(input: DispatchInput, response: Response): boolean {
  const contentType = response.headers.get("content-type") ?? "";
  return contentType.includes("text/event-stream") || (input.stream === true && response.ok);
}

function respond({ rc, input, stub, region, shard, routed, decision, upstream, attempts, sse, foldFirstByte }: Answer): Response {
  const { ctx, requestId } = rc;
  const headers = new Headers(upstream.response.headers);
  for (const h of DROPPED_RESPONSE_HEADERS) headers.delete(h);
  headers.set("x-request-id", requestId);
  headers.set("x-warmpath-region", region.config.name);
  headers.set("x-warmpath-node", routed.nodeId);
  headers.set("x-warmpath-decision", decision);
  headers.set("x-warmpath-policy", routed.policy);
  headers.set("x-warmpath-prefix-match", `${routed.matchBlocks}/${routed.totalBlocks}`);
  headers.set("x-warmpath-attempts", String(attempts.length));
  if (shard !== undefined) headers.set("x-warmpath-shard", String(shard));
  // A long prompt sent past the nearest region to one holding its prefix says so, and what it saved.
  if (input.warm?.region === region.config.name) {
    headers.set("x-warmpath-region-choice", `warm-prefix; nearest=${input.warm.nearest}; held-tokens=${input.warm.heldTokens}`);
  }
  // A flooding tenant kept off the nodes held for the others says so (fair-share.ts).
  if (routed.heldForOthers > 0) headers.set("x-warmpath-held-nodes", String(routed.heldForOthers));
  for (const [k, v] of Object.entries(rateLimitHeaders(routed.rateLimit))) headers.set(k, v);

  let finish!: (end: RelayEnd, usage: Usage | undefined, bytes: number) => void;
  const finished = new Promise<void>((resolve) => {
    finish = (end, usage, bytes) => {
      const line: DecisionLine = {
        event: "request",
        request_id: requestId,
        tenant: rc.tenant.id,
        model: input.model,
        status: upstream.response.status,
        region: region.config.name,
        region_choice: input.warm && {
          reason: "warm-prefix",
          nearest: input.warm.nearest,
          held_tokens: input.warm.heldTokens,
          nearest_held_tokens: input.warm.nearestHeldTokens,
          saved_ms: Math.round(input.warm.savedMs),
          extra_round_trip_ms: Math.round(input.warm.extraRoundTripMs),
        },
        shard,
        node: routed.nodeId,
        decision,
        policy: routed.policy,
        prefix_match_blocks: routed.matchBlocks,
        prefix_total_blocks: routed.totalBlocks,
        prompt_tokens_estimated: input.promptTokens,
        predicted_cached_tokens: routed.predictedCachedTokens,
        work_ahead_tokens: routed.workAheadTokens,
        estimated_ttft_ms: routed.estimatedTtftMs,
        candidates: routed.candidates,
        held_for_others: routed.heldForOthers,
        considered: routed.considered,
        attempts,
        first_byte_ms: upstream.firstByteMs,
        duration_ms: Date.now() - rc.startedAt,
        end,
        bytes,
        usage,
        measured_cached_tokens: usage?.cachedTokens ?? null,
      };
      recordDecision(line, sinks(rc));
      // A node's own client error (a context-length error, a bad parameter) computed nothing: the
      // region takes the prediction back and forgets the prompt it recorded for that node.
      const status = upstream.response.status >= 400 ? "refused" : end;
      const firstByteMsAgo = foldFirstByte ? Math.max(0, Date.now() - upstream.firstByteAt) : undefined;
      if (stub) resolve(stub.complete(routed.ticket, { status, usage, firstByteMsAgo }).then(ignore, logBookkeepingError));
      else {
        countStateless(region.config.name, routed.nodeId, -1);
        resolve();
      }
    };
  });
  ctx.waitUntil(finished);

  if (!upstream.reader) {
    finish("ok", undefined, 0);
    return new Response(null, { status: upstream.response.status, headers });
  }
  const filter = sse && input.usageInjected ? new UsageEventFilter() : undefined;
  const { limits } = rc.config.raw;
  const body = relay({
    first: upstream.first,
    reader: upstream.reader,
    sse,
    requestId,
    filter,
    onEnd: finish,
    streamEnd: input.streamEnd,
    idleTimeoutMs: limits.stream_idle_timeout_ms,
    deadlineAt: rc.startedAt + limits.request_deadline_ms,
  });
  return new Response(body, { status: upstream.response.status, headers });
}

/** Where a request's decision line goes: the log (sampled) and, if bound, the Analytics Engine dataset. */
function sinks(rc: RequestContext): DecisionSinks {
  return { dataset: rc.env.ANALYTICS, sampleRate: rc.config.raw.decision_log_sample_rate, random: Math.random };
}

/** How far into an answer a response id is looked for: the Responses API puts it first (JSON and SSE alike). */
const RESPONSE_ID_SCAN_CHARS = 4096;

/**
 * The response id at the head of a Responses API answer (`{"id":"resp_...` in JSON, or the
 * `response.created` event's `"response":{"id":"resp_...`), scoped by tenant as requests name it.
 */
export function responseIdOf(first: Uint8Array | undefined, tenant: string): string | undefined {
  if (!first) return undefined;
  const head = new TextDecoder().decode(first.subarray(0, RESPONSE_ID_SCAN_CHARS));
  const m = /"id"\s*:\s*"([^"\\]{1,200})"/.exec(head);
  return m ? `${tenant}:${m[1]}` : undefined;
}

/**
 * A placement without the region's object (stateless.ts), shaped as the object's own answer so
 * the rest of dispatch is the same; no ticket, no bookkeeping.
 */
function statelessRoute(loaded: LoadedRegion, input: DispatchInput, exclude: readonly string[], tenant: string): RouteResult {
  const region = loaded.config.name;
  // A node dedicated to other tenants stays theirs without the object too.
  const may = (nodeId: string) => tenantMayUse(loaded.config.node_tenants, nodeId, tenant);
  const choice = chooseStateless(region, input.model, input.hashes[0] ?? "", exclude, Date.now(), may);
  if (!choice) return { ok: false, reason: "saturated", message: `region ${region} is unavailable`, retryAfterSeconds: 1 };
  countStateless(region, choice.nodeId, 1);
  return {
    ok: true,
    ticket: "stateless",
    nodeId: choice.nodeId,
    url: choice.url,
    decision: "stateless",
    policy: "stateless",
    matchBlocks: 0,
    totalBlocks: input.hashes.length,
    predictedCachedTokens: 0,
    workAheadTokens: 0,
    estimatedTtftMs: 0,
    candidates: 0,
    heldForOthers: 0,
    considered: [],
  };
}
