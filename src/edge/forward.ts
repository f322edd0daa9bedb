/**
 * The edge's half of serving a request: send it to the regions in order, each over its service
 * binding to the region's worker (src/edge/region-client.ts), and pass the first region's answer
 * back unchanged. The region worker does everything near the GPUs (object, node, retries, relay:
 * src/region/dispatch.ts); the edge only fails over between regions:
 *
 * - a region that refuses (no node, saturated, over share, every node failed) -> the next region,
 *   told what the nearer one's queue would cost (`waitToBeatSeconds`) and what was tried;
 * - a region worker that cannot be reached or answers as none of this contract would -> the
 *   next region (logged);
 * - a tenant over its rate limit -> 429 at once: another region would only spend another budget;
 * - a follow-up naming a stored response no region asked holds for this tenant -> 400
 *   `previous_response_not_found` (docs/API.md, "Stored responses"): never sent to a node.
 *
 * A request no region served is refused with what refused it (ApiError.refusedBy): its one
 * `refusal` line and count (middleware/refusal-log.ts), no decision line.
 *
 * Bounded: at most `max_region_attempts` regions; the body is sent whole to each.
 */
import type { RequestContext } from "./api/request-context.ts";
import type { LoadedRegion } from "../config/load.ts";
import {
  NODE_HEADERS,
  encodeDispatch,
  regionPath,
  type Attempt,
  type DispatchRequest,
  type InferencePath,
  type RegionRefusal,
  type StreamApi,
  type WarmRegion,
} from "../contracts/region-service.ts";
import { CONTRACT_HEADER, REQUEST_ID } from "../contracts/headers.ts";
import { ApiError, type RefusalDetail } from "../http/errors.ts";
import { rateLimitHeaders } from "../proxy/rate-limit-headers.ts";
import { guardStream } from "./guard-stream.ts";
import { RegionUnavailable, callRegion } from "./region-client.ts";
import type { AdmissionAsk } from "./admission-hints.ts";

/** Headers of the region worker's answer that are between the two workers only. */
const INTERNAL_HEADERS = [CONTRACT_HEADER];

/** What the edge learned about the request: the rest comes from the {@link RequestContext}. */
interface ForwardInput {
  model: string;
  path: InferencePath;
  api: StreamApi;
  /** The client's bytes: the region worker asks for usage and adds the cache salt where its region wants it. */
  body: Uint8Array;
  askUsage: boolean;
  cacheNamespace: string;
  clientCacheSalt: string | undefined;
  bodyHasCacheSalt: boolean;
  hashes: string[];
  promptTokens: number;
  /** The completion tokens the body allows, if it sets any (a budgeted request holds them: docs/USAGE.md). */
  maxTokens?: number | undefined;
  /** What the edge read of the body's top level, so the region worker does not read it again (region-service.ts). */
  bodyFields: DispatchRequest["bodyFields"];
  sessionKey: string | undefined;
  previousResponseId?: string | undefined;
  storesResponses: boolean;
  stream: boolean;
  /** Its class and objectives (admission-hints.ts). */
  admission: AdmissionAsk;
  /** Regions to try, nearest first. */
  regions: LoadedRegion[];
  /** The estimated round trip from the client to each region (ms, parallel to `regions`), when its location is known. */
  roundTripMs?: ReadonlyArray<number | undefined> | undefined;
  /** Set when `regions` starts with a farther region that holds more of the prompt's prefix. */
  warm?: WarmRegion | undefined;
}

export async function forward(rc: RequestContext, input: ForwardInput): Promise<Response> {
  const { limits } = rc.config.raw;
  const attempts: Attempt[] = [];
  let retryAfter = Infinity;
  let lastMessage = "no region serves this model";
  /** Regions that refused the tenant as over its fair share (429 if no region could serve it at all). */
  let overShare = 0;
  /** Of those, the regions that refused it as past its commitment, or past its usual rate, rather than over its share (tenant-demand.ts). */
  let pastCommitment = 0;
  let pastUsual = 0;
  /** Regions that could not meet its objective even after their queue (429 `objective_unreachable` if no region served it). */
  let shed = 0;
  /** The last region's shed, for the refusal's decision line (its objective and time queued). */
  let lastShed: Pick<RegionRefusal, "objectiveMs" | "queuedMs" | "estimatedTtftMs" | "demoted"> | undefined;
  /** Regions tried, and those whose worker could not be reached: when it is every one, the answer says so. */
  let asked = 0;
  let unavailable = 0;
  /** Regions that hold no stored response of this tenant by the id the request continues: when it is every one, 400. */
  let unknownResponse = 0;
  /** The reasons the regions refused it, for the refusal line (which one, when several: {@link capacityReason}). */
  const reasons = new Set<string>();
  /**
   * When a saturated region would start the request, in seconds from now as the client sees it
   * (its shortest queue plus its round trip): a farther region serves only if it can beat that.
   */
  let soonest: number | undefined;
  const nodeHeaders: Record<string, string> = {};
  for (const name of NODE_HEADERS) {
    const v = rc.request.headers.get(name);
    if (v !== null) nodeHeaders[name] = v.slice(0, 1024);
  }
  const nearest = input.regions[0]?.config.name;
  const tenant = rc.tenant;
  rc.trace.root.set({ "warmpath.tenant": tenant.id, "gen_ai.request.model": input.model, "warmpath.stream": input.stream });

  for (const [index, region] of input.regions.slice(0, limits.max_region_attempts).entries()) {
    const name = region.config.name;
    asked++;
    const roundTripSeconds = (input.roundTripMs?.[index] ?? 0) / 1000;
    const span = rc.trace.regionCall(name, index, nearest);
    const meta: DispatchRequest = {
      requestId: rc.requestId,
      startedAt: rc.startedAt,
      tenant: {
        id: tenant.id,
        weight: tenant.weight,
        requestsPerMinute: tenant.rate_limits?.requests_per_minute,
        promptTokensPerMinute: tenant.rate_limits?.prompt_tokens_per_minute,
        committedTokensPerMinute: tenant.committed_prompt_tokens_per_minute,
        objectiveMs: input.admission.tenantObjectiveMs,
      },
      priority: input.admission.priority,
      requestObjectiveMs: input.admission.requestObjectiveMs,
      model: input.model,
      path: input.path,
      api: input.api,
      stream: input.stream,
      askUsage: input.askUsage,
      cacheNamespace: input.cacheNamespace,
      clientCacheSalt: input.clientCacheSalt,
      bodyHasCacheSalt: input.bodyHasCacheSalt,
      storesResponses: input.storesResponses,
      hashes: input.hashes,
      promptTokens: input.promptTokens,
      maxTokens: input.maxTokens,
      bodyFields: input.bodyFields,
      sessionKey: input.sessionKey,
      previousResponseId: input.previousResponseId,
      failoverFrom: index > 0 ? nearest : undefined,
      waitToBeatSeconds: soonest === undefined ? undefined : Math.max(0, soonest - roundTripSeconds),
      warm: input.warm,
      attempts,
      headers: nodeHeaders,
      trace: rc.trace.scope(span),
    };
    let answer: Awaited<ReturnType<typeof callRegion>>;
    try {
      answer = await callRegion(rc.env, region, regionPath.dispatch(name), {
        method: "POST",
        body: encodeDispatch(meta, input.body),
        contentType: "application/octet-stream",
      });
    } catch (e) {
      if (!(e instanceof RegionUnavailable)) throw e;
      console.error(JSON.stringify({ event: "region_unavailable", request_id: rc.requestId, region: name, message: e.message }));
      attempts.push({ region: name, outcome: `region worker ${e.why}` });
      span.end({ "warmpath.outcome": `region worker ${e.why}` }, e.message);
      lastMessage = `region ${name} is unavailable`;
      unavailable++;
      retryAfter = Math.min(retryAfter, 1);
      continue;
    }
    if (answer.ok) {
      span.set({ "http.response.status_code": answer.response.status });
      rc.trace.answeredBy(span);
      return clientAnswer(rc, answer.response, input.stream);
    }
    const refusal = answer.refusal;
    span.end({ "warmpath.refusal": refusal.reason }, refusal.message);
    attempts.push(...refusal.attempts);
    reasons.add(refusal.reason);
    if (refusal.reason === "rate-limited") {
      throw ApiError.rateLimited(
        `${refusal.message}. Retry after ${refusal.retryAfterSeconds} s.`,
        refusal.retryAfterSeconds,
        rateLimitHeaders(refusal.rateLimit),
      ).refusedBy(refusalDetail(input, attempts, "rate-limited"));
    }
    if (refusal.reason === "over-budget") {
      // Spent over every region: no other region may serve it either.
      throw ApiError.insufficientQuota(`${refusal.message}.`, refusal.retryAfterSeconds).refusedBy(
        refusalDetail(input, attempts, "over-budget"),
      );
    }
    // Stored elsewhere, perhaps: a farther region may hold it (each region keeps its own).
    if (refusal.reason === "unknown-response") unknownResponse++;
    if (refusal.reason === "over-share") {
      overShare++;
      if (refusal.demoted === "commitment") pastCommitment++;
      if (refusal.demoted === "growth") pastUsual++;
    }
    if (refusal.reason === "shed") {
      shed++;
      lastShed = refusal;
    }
    if (refusal.waitSeconds !== undefined) soonest = Math.min(soonest ?? Infinity, refusal.waitSeconds + roundTripSeconds);
    retryAfter = Math.min(retryAfter, refusal.retryAfterSeconds);
    lastMessage = refusal.message;
  }

  const seconds = Number.isFinite(retryAfter) ? retryAfter : 5;
  const tried = attempts.map((a) => (a.node ? `${a.region}/${a.node}: ${a.outcome}` : `${a.region}: ${a.outcome}`)).join("; ");
  // Every region asked holds no response of this tenant by that id: as OpenAI answers an unknown
  // one. A region that could not be reached, or refused it for another reason, may hold it: then
  // the answer is the capacity's (retry), never a 400 the client would act on by starting over.
  if (unknownResponse > 0 && unknownResponse === asked) {
    throw ApiError.previousResponseNotFound(clientResponseId(input.previousResponseId, rc.tenant.id)).refusedBy(
      refusalDetail(input, attempts, "unknown-response"),
    );
  }
  // A tenant refused for its share somewhere is told to slow down (429); otherwise the fleet is full (503).
  if (overShare > 0) {
    const demoted = pastCommitment === overShare ? "commitment" : pastUsual === overShare ? "growth" : undefined;
    const why =
      demoted === "commitment"
        ? "This tenant is past its committed prompt tokens a minute in the regions that could serve it"
        : demoted === "growth"
          ? "This tenant is sending faster than it usually does, out of step with the others, in the regions that could serve it"
          : "This tenant is over its fair share of the capacity that could serve it";
    throw ApiError.overShare(`${why} (${lastMessage}; tried ${tried}). Retry after ${seconds} s.`, seconds).refusedBy(
      refusalDetail(input, attempts, "over-share", { demoted }),
    );
  }
  if (shed > 0) {
    throw ApiError.objectiveUnreachable(
      `No region can give this request its first token within its objective, even after its queue (${lastMessage}; tried ${tried}). Retry after ${seconds} s.`,
      seconds,
    ).refusedBy(
      refusalDetail(input, attempts, "shed", {
        priority: input.admission.priority,
        objective_ms: lastShed?.objectiveMs !== undefined ? Math.round(lastShed.objectiveMs) : undefined,
        queued_ms: lastShed?.queuedMs !== undefined ? Math.round(lastShed.queuedMs) : undefined,
        estimated_ttft_ms: lastShed?.estimatedTtftMs !== undefined ? Math.round(lastShed.estimatedTtftMs) : undefined,
        demoted: lastShed?.demoted,
      }),
    );
  }
  if (asked > 0 && unavailable === asked) {
    throw ApiError.regionUnavailable(`No region can be reached now (tried ${asked}). Retry after ${seconds} s.`, seconds).refusedBy(
      refusalDetail(input, attempts, "region-unavailable"),
    );
  }
  throw ApiError.noCapacity(
    `No node can take this request now (${lastMessage}; tried ${tried || "nothing"}). Retry after ${seconds} s.`,
    seconds,
  ).refusedBy(refusalDetail(input, attempts, asked === 0 ? "no-region" : capacityReason(reasons, unavailable)));
}

/**
 * Why a 503 `no_capacity` was answered, when regions refused for different reasons: the one an
 * operator acts on first (a full region before a failing node before a missing one), or
 * `region-unavailable` when the others were unreachable.
 */
function capacityReason(reasons: ReadonlySet<string>, unavailable: number): string {
  for (const reason of ["saturated", "failed", "no-node"]) if (reasons.has(reason)) return reason;
  if (unavailable > 0) return "region-unavailable";
  return reasons.has("unknown-response") ? "unknown-response" : "no-node";
}

/** The id as the client sent it: the edge scoped it by tenant (`tenant:id`, inference.ts) for the regions. */
function clientResponseId(scoped: string | undefined, tenant: string): string {
  const prefix = `${tenant}:`;
  return scoped?.startsWith(prefix) ? scoped.slice(prefix.length) : (scoped ?? "");
}

/** What the refusal line says of a request no region served: ids and figures, never what the client sent. */
function refusalDetail(
  input: ForwardInput,
  attempts: Attempt[],
  reason: string,
  admission: Pick<RefusalDetail, "priority" | "objective_ms" | "queued_ms" | "estimated_ttft_ms" | "demoted"> = {},
): RefusalDetail {
  return { reason, model: input.model, prompt_tokens_estimated: input.promptTokens, attempts: [...attempts], ...admission };
}

/** The region's answer as the client gets it: unchanged, less what is between the two workers, its stream guarded. */
function clientAnswer(rc: RequestContext, response: Response, stream: boolean): Response {
  const headers = new Headers(response.headers);
  for (const h of INTERNAL_HEADERS) headers.delete(h);
  headers.set(REQUEST_ID, rc.requestId);
  const sse = (headers.get("content-type") ?? "").includes("text/event-stream") || (stream && response.ok);
  // A stream's trace ends with its body: the client has the whole answer (or lost it) then.
  if (response.body && sse) rc.trace.deferred = true;
  const body =
    response.body && sse
      ? guardStream(response.body, rc.requestId, (end) =>
          rc.trace.finish({ "warmpath.end": end }, end === "region-stream-lost" ? "the region's stream was lost" : undefined),
        )
      : response.body;
  return new Response(body, { status: response.status, headers });
}
