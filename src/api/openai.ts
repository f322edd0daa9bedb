/**
 * The client API, OpenAI-compatible: `POST /v1/chat/completions`, `POST /v1/completions`,
 * `GET /v1/models`.
 *
 * Per request: read the body (bounded), validate what routing needs, canonicalise and hash the
 * prompt in its cache namespace, order the regions (pinned, or nearest with failover), and
 * dispatch. The body forwarded to the node is the client's original bytes.
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
import { tenantAuth } from "../middleware/tenant-auth.ts";
import { dispatch, type WaitUntil } from "../proxy/dispatch.ts";
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

openaiApi.post("/v1/chat/completions", (c) =>
  handle(c.req.raw, c.env, c.executionCtx, c.get("config"), c.get("tenant"), c.get("requestId"), "/v1/chat/completions"),
);
openaiApi.post("/v1/completions", (c) =>
  handle(c.req.raw, c.env, c.executionCtx, c.get("config"), c.get("tenant"), c.get("requestId"), "/v1/completions"),
);

type Path = "/v1/chat/completions" | "/v1/completions";

async function handle(
  request: Request,
  env: AppEnv["Bindings"],
  ctx: WaitUntil,
  config: LoadedConfig,
  tenant: TenantConfig,
  requestId: string,
  path: Path,
): Promise<Response> {
  const startedAt = Date.now();
  const contentType = request.headers.get("content-type") ?? "";
  if (contentType && !contentType.toLowerCase().includes("application/json")) {
    throw new ApiError(
      415,
      `Content-Type must be application/json, not ${contentType.slice(0, 64)}`,
      "invalid_request_error",
      "unsupported_media_type",
    );
  }
  const body = await readBodyLimited(request, config.raw.limits.max_body_bytes);
  const json = parseJsonBody(body);
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw new ApiError(400, "Request body must be a JSON object", "invalid_request_error", "invalid_request");
  }
  const parsed = validate(path, json);

  if (!config.models.includes(parsed.request.model)) {
    throw new ApiError(
      404,
      `The model '${parsed.request.model.slice(0, 256)}' does not exist or is not served here`,
      "invalid_request_error",
      "model_not_found",
      {
        param: "model",
      },
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

  return dispatch(env, ctx, config, {
    requestId,
    tenant: tenant.id,
    model: parsed.request.model,
    path,
    body,
    headers: request.headers,
    hashes: key.hashes,
    promptTokens: key.promptTokens,
    // Namespaced by tenant: two tenants' session ids never collide.
    sessionKey: hint ? `${tenant.id}:${hint.slice(0, 512)}` : undefined,
    regions,
    startedAt,
  });
}

function validate(path: Path, json: object): { request: ChatCompletionRequest | CompletionRequest; prompt: CanonicalPrompt } {
  const fail = (error: z.ZodError): never => {
    const { message, param } = firstIssue(error);
    throw new ApiError(400, message, "invalid_request_error", "invalid_request", { param });
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
    throw new ApiError(
      403,
      `This API key may not use cache namespace '${asked.slice(0, 64)}'`,
      "permission_error",
      "namespace_not_allowed",
      {
        param: "x-warmpath-namespace",
      },
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
      throw new ApiError(400, `Unknown region '${pinned.slice(0, 64)}' in x-warmpath-region`, "invalid_request_error", "unknown_region", {
        param: "x-warmpath-region",
      });
    }
    if (!region.config.models.includes(model)) {
      throw new ApiError(
        400,
        `Region '${pinned}' does not serve model '${model.slice(0, 256)}'`,
        "invalid_request_error",
        "model_not_in_region",
        {
          param: "x-warmpath-region",
        },
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
