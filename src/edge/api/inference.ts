/**
 * The inference endpoints, one table: OpenAI's chat completions, completions and Responses API,
 * and Anthropic's Messages API. Each entry validates what routing needs and turns the body into a
 * canonical prompt (src/core/canonical.ts, canonical-apis.ts) and routing hints; everything else
 * is shared: read the body (bounded), hash the prompt in its cache namespace, order the regions,
 * dispatch. The body forwarded to the node is the client's original bytes (with usage asked for on
 * a chat or completion stream that did not: src/proxy/stream-usage.ts; the Responses and Messages
 * streams carry usage in their last event anyway).
 */
import { admissionAsk } from "../admission-hints.ts";
import type { z } from "zod";
import type { LoadedConfig, LoadedRegion } from "../../config/load.ts";
import { HINT } from "../../contracts/headers.ts";
import { EDGE_CEILING_PERIOD_SECONDS, edgeCeilingPerMinute } from "../../config/edge-ceiling.ts";
import type { TenantConfig } from "../../config/schema.ts";
import type { CanonicalPrompt } from "../../core/canonical.ts";
import { anthropicPrompt, responsesPrompt } from "../../core/canonical-apis.ts";
import { prefixKey } from "../../core/prefix.ts";
import { requestedMaxTokens } from "../../core/usage/reservations.ts";
import { orderRegions, roundTripMs, type ClientLocation, type RegionLocation } from "../../core/region-select.ts";
import { LONG_PREFIX_TOKENS } from "../../core/region/long-prefixes.ts";
import { warmestRegion } from "../../core/warm-region.ts";
import { cachedDigest, refreshDigests } from "../region-digests.ts";
import type { InferencePath, StreamApi, WarmRegion } from "../../contracts/region-service.ts";
import { parseJsonBody, readBodyLimited } from "../../http/body.ts";
import { ApiError } from "../../http/errors.ts";
import { forward } from "../forward.ts";
import { parsedBodyFields } from "../../proxy/completion-budget.ts";
import { asksNoUsage } from "../../proxy/stream-usage.ts";
import type { RequestContext } from "./request-context.ts";
import { chatCompletionSchema, completionSchema, fastSchemas, firstIssue, messagesSchema, responsesSchema } from "./schemas.ts";

/** What an endpoint's body says that routing uses. */
interface Parsed {
  model: string;
  prompt: CanonicalPrompt;
  /** Session hints, strongest first (the `x-session-id` header comes before all of them). */
  hints: Array<string | null | undefined>;
  cacheSalt: string | null | undefined;
  /** Responses API: the stored response this request continues (only its node holds it). */
  previousResponseId?: string | null | undefined;
}

interface Endpoint {
  path: InferencePath;
  parse(json: Record<string, unknown>): Parsed;
  /** Whether a stream carries usage only when asked (`stream_options.include_usage`). */
  usageOnRequest: boolean;
  /** Whether the node's answer carries a response id a later request may continue from. */
  storesResponses: boolean;
  /** How the API's stream says it finished (src/proxy/stream-end.ts). */
  api: StreamApi;
}

/**
 * The body as `schema` takes it: first by `fast` (its long lists checked by one loop each,
 * schemas.ts fastSchemas), and only when that refuses by `schema` itself, whose first issue is the
 * client's error.
 */
function parseWith<S extends z.ZodType>(schema: S, fast: z.ZodType<z.output<S>>, json: unknown): z.output<S> {
  const quick = fast.safeParse(json);
  if (quick.success) return quick.data;
  const r = schema.safeParse(json);
  if (r.success) return r.data;
  const { message, param } = firstIssue(r.error);
  throw ApiError.invalidRequest(message, param);
}

export const CHAT: Endpoint = {
  path: "/v1/chat/completions",
  usageOnRequest: true,
  storesResponses: false,
  api: "openai",
  parse(json) {
    const r = parseWith(chatCompletionSchema, fastSchemas.chat, json);
    return {
      model: r.model,
      prompt: { kind: "chat", messages: r.messages, tools: r.tools ?? undefined },
      hints: [r.prompt_cache_key, r.user],
      cacheSalt: r.cache_salt,
    };
  },
};

export const COMPLETIONS: Endpoint = {
  path: "/v1/completions",
  usageOnRequest: true,
  storesResponses: false,
  api: "openai",
  parse(json) {
    const r = parseWith(completionSchema, fastSchemas.completion, json);
    return {
      model: r.model,
      prompt: { kind: "completion", prompt: r.prompt },
      hints: [r.prompt_cache_key, r.user],
      cacheSalt: r.cache_salt,
    };
  },
};

export const RESPONSES: Endpoint = {
  path: "/v1/responses",
  usageOnRequest: false,
  storesResponses: true,
  api: "responses",
  parse(json) {
    const r = parseWith(responsesSchema, fastSchemas.responses, json);
    return {
      model: r.model,
      prompt: responsesPrompt(r),
      hints: [r.prompt_cache_key, r.user],
      cacheSalt: r.cache_salt,
      previousResponseId: r.previous_response_id,
    };
  },
};

export const MESSAGES: Endpoint = {
  path: "/v1/messages",
  usageOnRequest: false,
  storesResponses: false,
  api: "messages",
  parse(json) {
    const r = parseWith(messagesSchema, fastSchemas.messages, json);
    return { model: r.model, prompt: anthropicPrompt(r), hints: [r.metadata?.user_id], cacheSalt: undefined };
  },
};

export async function handleInference(rc: RequestContext, endpoint: Endpoint): Promise<Response> {
  const { request, config, tenant } = rc;
  await edgeCeiling(rc);
  // 415 unless the Content-Type is exactly JSON, 413 over the limit, 400 unless UTF-8 JSON within
  // the depth and size bounds (src/http/body.ts): all before anything walks the body.
  const body = await readBodyLimited(request, config.raw.limits.max_body_bytes);
  const json = parseJsonBody(body);
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw ApiError.invalidRequest("Request body must be a JSON object");
  }
  const parsed = endpoint.parse(json as Record<string, unknown>);

  // Messages name the field or header at fault, never its value: an error repeats nothing the client sent.
  if (tenantRegionsServing(config, tenant, parsed.model).length === 0) throw modelNotFound("`model`");
  const namespace = resolveNamespace(request, tenant);
  const admission = admissionAsk(request, tenant);
  const key = prefixKey(parsed.prompt, { model: parsed.model, namespace, cacheSalt: parsed.cacheSalt ?? undefined }, config.prefix);
  const chosen = chooseRegions(request, config, parsed.model, tenant);
  // A long prompt may go first to a farther region that already holds its prefix (warm-region.ts).
  const { regions, roundTrips, warm } = preferWarmRegion(rc, chosen.regions, chosen.roundTrips, key.hashes, key.promptTokens);
  const hint = [request.headers.get(HINT.session), ...parsed.hints].find((h) => typeof h === "string" && h !== "");

  // The region worker asks the node for usage on a stream that did not, so every answer is
  // measured, and carries the cache namespace to engines that partition their cache by it.
  const object = json as Record<string, unknown>;
  const response = await forward(rc, {
    model: parsed.model,
    path: endpoint.path,
    body,
    askUsage: endpoint.usageOnRequest && asksNoUsage(object),
    cacheNamespace: namespace,
    clientCacheSalt: parsed.cacheSalt ?? undefined,
    bodyHasCacheSalt: Object.hasOwn(object, "cache_salt"),
    hashes: key.hashes,
    promptTokens: key.promptTokens,
    maxTokens: requestedMaxTokens(endpoint.path, object),
    bodyFields: parsedBodyFields(object),
    // Namespaced by tenant: two tenants' session ids never collide.
    sessionKey: hint ? `${tenant.id}:${hint.slice(0, 512)}` : undefined,
    // Response ids are the node's own (random): scoped by tenant as well, so one tenant cannot steer another's.
    previousResponseId: parsed.previousResponseId ? `${tenant.id}:${parsed.previousResponseId}` : undefined,
    storesResponses: endpoint.storesResponses,
    api: endpoint.api,
    stream: object.stream === true,
    admission,
    regions,
    roundTripMs: roundTrips,
    warm,
  });
  // Once this request is placed (its region's digest now includes it), refresh stale digests.
  if (consultsDigests(key.promptTokens, regions, roundTrips)) refreshDigests(rc, regions, Date.now());
  return response;
}

/** Whether a request is long enough, and has a choice to make, for the regions' digests to matter. */
function consultsDigests(promptTokens: number, regions: readonly LoadedRegion[], roundTrips: unknown[] | undefined): boolean {
  return promptTokens >= LONG_PREFIX_TOKENS && regions.length >= 2 && roundTrips !== undefined;
}

/**
 * The region order with a warm farther region first, when one holds enough more of this long
 * prompt's prefix to beat the extra round trip (src/core/warm-region.ts), from the regions' digests
 * as this isolate last fetched them (src/edge/region-digests.ts).
 */
function preferWarmRegion(
  rc: RequestContext,
  regions: LoadedRegion[],
  roundTrips: Array<number | undefined> | undefined,
  hashes: readonly string[],
  promptTokens: number,
): { regions: LoadedRegion[]; roundTrips: Array<number | undefined> | undefined; warm: WarmRegion | undefined } {
  if (!consultsDigests(promptTokens, regions, roundTrips)) return { regions, roundTrips, warm: undefined };
  const options = regions.map((r, i) => {
    const digest = cachedDigest(r.config.name);
    return {
      roundTripMs: roundTrips![i],
      digest: digest?.hashes,
      prefillTokensPerSecond: digest?.prefillTokensPerSecond ?? r.init.settings.prefillTokensPerSecond,
    };
  });
  const choice = warmestRegion(options, hashes, promptTokens);
  if (!choice) return { regions, roundTrips, warm: undefined };
  const order = [choice.index, ...regions.map((_, i) => i).filter((i) => i !== choice.index)];
  return {
    regions: order.map((i) => regions[i]!),
    roundTrips: order.map((i) => roundTrips![i]),
    warm: { ...choice, region: regions[choice.index]!.config.name, nearest: regions[0]!.config.name },
  };
}

/**
 * The edge's request ceiling (the `RATE_LIMITER` binding, its limit derived from the configuration:
 * src/config/edge-ceiling.ts), for tenants with a configured request limit only: checked before the
 * body is read or any region object is asked, so a flood costs one counter check.
 */
async function edgeCeiling(rc: RequestContext): Promise<void> {
  const limiter = (rc.env as Partial<Env>).RATE_LIMITER;
  if (!limiter || rc.tenant.rate_limits?.requests_per_minute === undefined) return;
  const { success } = await limiter.limit({ key: `tenant:${rc.tenant.id}` });
  if (!success) throw ApiError.edgeRateLimited(edgeCeilingPerMinute(rc.config.raw) ?? 0, EDGE_CEILING_PERIOD_SECONDS);
}

/** The cache namespace: the tenant's own, or a shared one it may use (`x-warmpath-namespace`). */
function resolveNamespace(request: Request, tenant: TenantConfig): string {
  const asked = request.headers.get(HINT.namespace);
  if (asked === null || asked === tenant.id) return `tenant:${tenant.id}`;
  if (!tenant.shared_namespaces.includes(asked)) {
    throw ApiError.permission(
      "namespace_not_allowed",
      "This API key may not use the cache namespace named in x-warmpath-namespace",
      "x-warmpath-namespace",
    );
  }
  return `shared:${asked}`;
}

/** Whether the tenant may send requests to `region` (`tenants[].regions`: every region when it names none). */
export function tenantMayUse(tenant: TenantConfig, region: LoadedRegion): boolean {
  return tenant.regions === undefined || tenant.regions.includes(region.config.name);
}

/**
 * The regions that serve `model` and that the tenant may use, in configuration order. None: the
 * model is not found for this tenant, whether no region serves it or only regions it may not use.
 */
export function tenantRegionsServing(config: LoadedConfig, tenant: TenantConfig, model: string): LoadedRegion[] {
  return config.regions.filter((r) => tenantMayUse(tenant, r) && r.config.models.includes(model));
}

/**
 * 404 `model_not_found` (param `model`), as OpenAI answers a model that does not exist or that the
 * key may not use: not retryable, unlike a 503 for want of a region. One message for both, so an
 * answer does not tell a tenant that a model exists in regions closed to it; it never repeats the
 * name. `where`: where the request named the model.
 */
export function modelNotFound(where: "`model`" | "the path"): ApiError {
  return ApiError.notFound(
    "model_not_found",
    `The model named in ${where} does not exist or is not served here (GET /v1/models lists them)`,
    "model",
    "invalid_request_error",
  );
}

/**
 * Regions to try: the pinned one (`x-warmpath-region`), or those serving the model, nearest first,
 * with the estimated round trip from the client to each (when its location is known).
 */
function chooseRegions(
  request: Request,
  config: LoadedConfig,
  model: string,
  tenant: TenantConfig,
): { regions: LoadedRegion[]; roundTrips: Array<number | undefined> | undefined } {
  const pinned = request.headers.get(HINT.region);
  if (pinned !== null) {
    const region = config.regionByName.get(pinned);
    if (!region) {
      throw ApiError.invalidRequest("The region named in x-warmpath-region is not configured", "x-warmpath-region", "unknown_region");
    }
    if (!tenantMayUse(tenant, region)) {
      throw ApiError.permission(
        "region_not_allowed",
        "This API key may not use the region named in x-warmpath-region",
        "x-warmpath-region",
      );
    }
    if (!region.config.models.includes(model)) {
      throw ApiError.invalidRequest(
        "The region named in x-warmpath-region does not serve the model named in `model`",
        "x-warmpath-region",
        "model_not_in_region",
      );
    }
    return { regions: [region], roundTrips: undefined };
  }
  const cf = (request as Request & { cf?: IncomingRequestCfProperties }).cf;
  const client: ClientLocation = {
    lat: cf?.latitude !== undefined ? Number(cf.latitude) : undefined,
    lon: cf?.longitude !== undefined ? Number(cf.longitude) : undefined,
    continent: cf?.continent,
  };
  const places = placesOf(config).filter((p) => tenantMayUse(tenant, p.region));
  const ordered = orderRegions(places, model, client);
  return { regions: ordered.map((p) => p.region), roundTrips: ordered.map((p) => roundTripMs(p, client)) };
}

/** Each region as nearest-region choice sees it, built once per configuration (not per request). */
const places = new WeakMap<LoadedConfig, Array<RegionLocation & { region: LoadedRegion }>>();
function placesOf(config: LoadedConfig): Array<RegionLocation & { region: LoadedRegion }> {
  let out = places.get(config);
  if (!out) {
    out = config.regions.map((region) => ({
      name: region.config.name,
      location: region.config.location,
      models: region.config.models,
      region,
    }));
    places.set(config, out);
  }
  return out;
}
