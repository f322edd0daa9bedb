/**
 * The client API, OpenAI-compatible: `POST /v1/chat/completions`, `POST /v1/completions`,
 * `GET /v1/models`.
 *
 * Per request: read the body (bounded), validate what routing needs, canonicalise and hash the
 * prompt in its cache namespace, order the regions (pinned, or nearest with failover), and
 * dispatch. The body forwarded to the node is the client's original bytes (with usage asked for
 * on a stream that did not ask: src/proxy/stream-usage.ts).
 */
import { Hono } from "hono";
import type { z } from "zod";
import type { AppEnv } from "../app-types.ts";
import type { LoadedConfig, LoadedRegion } from "../config/load.ts";
import type { TenantConfig } from "../config/schema.ts";
import type { CanonicalPrompt } from "../core/canonical.ts";
import { prefixKey } from "../core/prefix.ts";
import { orderRegions, type ClientLocation } from "../core/region-select.ts";
import { parseJsonBody, readBodyLimited } from "../http/body.ts";
import { ApiError } from "../http/errors.ts";
import { tenantAuth } from "../middleware/bearer-guard/guards.ts";
import { dispatch } from "../proxy/dispatch.ts";
import { requestStreamUsage } from "../proxy/stream-usage.ts";
import { requestContext, type RequestContext } from "./request-context.ts";
import { chatCompletionSchema, completionSchema, firstIssue, type ChatCompletionRequest, type CompletionRequest } from "./schemas.ts";

export const openaiApi = new Hono<AppEnv>();

openaiApi.use("/v1/models", tenantAuth);
openaiApi.use("/v1/chat/completions", tenantAuth);
openaiApi.use("/v1/completions", tenantAuth);

openaiApi.get("/v1/models", (c) => {
  const config = c.get("config");
  return c.json({
    object: "list",
    data: config.models.map((id) => ({
      id,
      object: "model",
      created: 0,
      owned_by: "warmpath",
      regions: config.regions.filter((r) => r.config.models.includes(id)).map((r) => r.config.name),
    })),
  });
});

openaiApi.post("/v1/chat/completions", (c) => handle(requestContext(c), "/v1/chat/completions"));
openaiApi.post("/v1/completions", (c) => handle(requestContext(c), "/v1/completions"));

type Path = "/v1/chat/completions" | "/v1/completions";

async function handle(rc: RequestContext, path: Path): Promise<Response> {
  const { request, config, tenant } = rc;
  const contentType = request.headers.get("content-type") ?? "";
  if (contentType && !contentType.toLowerCase().includes("application/json")) {
    throw ApiError.unsupportedMediaType(`Content-Type must be application/json, not ${contentType.slice(0, 64)}`);
  }
  const body = await readBodyLimited(request, config.raw.limits.max_body_bytes);
  const json = parseJsonBody(body);
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw ApiError.invalidRequest("Request body must be a JSON object");
  }
  const parsed = validate(path, json);

  if (!config.models.includes(parsed.request.model)) {
    throw ApiError.notFound(
      "model_not_found",
      `The model '${parsed.request.model.slice(0, 256)}' does not exist or is not served here`,
      "model",
      "invalid_request_error",
    );
  }
  const namespace = resolveNamespace(request, tenant);
  const key = prefixKey(
    parsed.prompt,
    { model: parsed.request.model, namespace, cacheSalt: parsed.request.cache_salt ?? undefined },
    config.prefix,
  );
  const regions = chooseRegions(request, config, parsed.request.model);
  const hint = request.headers.get("x-session-id") ?? parsed.request.prompt_cache_key ?? parsed.request.user ?? undefined;

  // Ask the node for usage on a stream that did not, so every answer is measured.
  const forwarded = requestStreamUsage(body, json as Record<string, unknown>);
  return dispatch(rc, {
    model: parsed.request.model,
    path,
    body: forwarded.body,
    usageInjected: forwarded.injected,
    hashes: key.hashes,
    promptTokens: key.promptTokens,
    // Namespaced by tenant: two tenants' session ids never collide.
    sessionKey: hint ? `${tenant.id}:${hint.slice(0, 512)}` : undefined,
    regions,
  });
}

function validate(path: Path, json: object): { request: ChatCompletionRequest | CompletionRequest; prompt: CanonicalPrompt } {
  const fail = (error: z.ZodError): never => {
    const { message, param } = firstIssue(error);
    throw ApiError.invalidRequest(message, param);
  };
  if (path === "/v1/chat/completions") {
    const r = chatCompletionSchema.safeParse(json);
    if (!r.success) return fail(r.error);
    return { request: r.data, prompt: { kind: "chat", messages: r.data.messages, tools: r.data.tools ?? undefined } };
  }
  const r = completionSchema.safeParse(json);
  if (!r.success) return fail(r.error);
  return { request: r.data, prompt: { kind: "completion", prompt: r.data.prompt } };
}

/** The cache namespace: the tenant's own, or a shared one it may use (`x-warmpath-namespace`). */
function resolveNamespace(request: Request, tenant: TenantConfig): string {
  const asked = request.headers.get("x-warmpath-namespace");
  if (asked === null || asked === tenant.id) return `tenant:${tenant.id}`;
  if (!tenant.shared_namespaces.includes(asked)) {
    throw ApiError.permission(
      "namespace_not_allowed",
      `This API key may not use cache namespace '${asked.slice(0, 64)}'`,
      "x-warmpath-namespace",
    );
  }
  return `shared:${asked}`;
}

/** Regions to try: the pinned one (`x-warmpath-region`), or those serving the model, nearest first. */
function chooseRegions(request: Request, config: LoadedConfig, model: string): LoadedRegion[] {
  const pinned = request.headers.get("x-warmpath-region");
  if (pinned !== null) {
    const region = config.regionByName.get(pinned);
    if (!region) {
      throw ApiError.invalidRequest(`Unknown region '${pinned.slice(0, 64)}' in x-warmpath-region`, "x-warmpath-region", "unknown_region");
    }
    if (!region.config.models.includes(model)) {
      throw ApiError.invalidRequest(
        `Region '${pinned}' does not serve model '${model.slice(0, 256)}'`,
        "x-warmpath-region",
        "model_not_in_region",
      );
    }
    return [region];
  }
  const cf = (request as Request & { cf?: IncomingRequestCfProperties }).cf;
  const client: ClientLocation = {
    lat: cf?.latitude !== undefined ? Number(cf.latitude) : undefined,
    lon: cf?.longitude !== undefined ? Number(cf.longitude) : undefined,
    continent: cf?.continent,
  };
  const ordered = orderRegions(
    config.regions.map((r) => ({ ...r, name: r.config.name, location: r.config.location, models: r.config.models })),
    model,
    client,
  );
  return ordered;
}
