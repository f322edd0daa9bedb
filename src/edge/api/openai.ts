/**
 * The client API, OpenAI-compatible: `POST /v1/chat/completions`, `POST /v1/completions`,
 * `POST /v1/responses`, `GET /v1/models`, `GET /v1/models/{id}`; and Anthropic's
 * `POST /v1/messages`, which engines such as vLLM and SGLang serve beside them. The inference
 * endpoints share one path (inference.ts).
 */
import { Hono } from "hono";
import type { AppEnv } from "../app-types.ts";
import type { LoadedConfig } from "../../config/load.ts";
import type { TenantConfig } from "../../config/schema.ts";
import { tenantAuth } from "../middleware/bearer-guard/guards.ts";
import { CHAT, COMPLETIONS, MESSAGES, RESPONSES, handleInference, modelNotFound, tenantRegionsServing } from "./inference.ts";
import { requestContext } from "./request-context.ts";

export const openaiApi = new Hono<AppEnv>();

/** The client API's paths (tenant keys; CORS where configured). */
export const CLIENT_PATHS = ["/v1/models", "/v1/models/*", "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"];

for (const path of CLIENT_PATHS) openaiApi.use(path, tenantAuth);

/**
 * A model as OpenAI's API lists it, with the regions serving it that the tenant may use; undefined
 * when there are none, so a tenant sees (and may retrieve) only the models it may send requests to.
 */
function modelObject(config: LoadedConfig, tenant: TenantConfig, id: string) {
  const regions = tenantRegionsServing(config, tenant, id);
  if (regions.length === 0) return undefined;
  return { id, object: "model", created: 0, owned_by: "warmpath", regions: regions.map((r) => r.config.name) };
}

openaiApi.get("/v1/models", (c) => {
  const config = c.get("config");
  const data = config.models.map((id) => modelObject(config, c.get("tenant"), id)).filter((m) => m !== undefined);
  return c.json({ object: "list", data });
});

// Model ids may contain slashes (`meta-llama/Llama-3.1-8B-Instruct`): the rest of the path is the id.
openaiApi.get("/v1/models/:id{.+}", (c) => {
  // The id is not repeated: errors never echo what the client sent.
  const model = modelObject(c.get("config"), c.get("tenant"), c.req.param("id"));
  if (!model) throw modelNotFound("the path");
  return c.json(model);
});

openaiApi.post("/v1/chat/completions", (c) => handleInference(requestContext(c), CHAT));
openaiApi.post("/v1/completions", (c) => handleInference(requestContext(c), COMPLETIONS));
openaiApi.post("/v1/responses", (c) => handleInference(requestContext(c), RESPONSES));
openaiApi.post("/v1/messages", (c) => handleInference(requestContext(c), MESSAGES));
