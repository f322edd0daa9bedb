/**
 * The client API, OpenAI-compatible: `POST /v1/chat/completions`, `POST /v1/completions`,
 * `POST /v1/responses`, `GET /v1/models`, `GET /v1/models/{id}`; and Anthropic's
 * `POST /v1/messages`, which engines such as vLLM and SGLang serve beside them. The inference
 * endpoints share one path (inference.ts).
 */
import { Hono } from "hono";
import type { AppEnv } from "../app-types.ts";
import type { LoadedConfig } from "../../config/load.ts";
import { ApiError } from "../../http/errors.ts";
import { tenantAuth } from "../middleware/bearer-guard/guards.ts";
import { CHAT, COMPLETIONS, MESSAGES, RESPONSES, handleInference } from "./inference.ts";
import { requestContext } from "./request-context.ts";

export const openaiApi = new Hono<AppEnv>();

/** The client API's paths (tenant keys; CORS where configured). */
export const CLIENT_PATHS = ["/v1/models", "/v1/models/*", "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"];

for (const path of CLIENT_PATHS) openaiApi.use(path, tenantAuth);

/** A model as OpenAI's API lists it, with the regions serving it. */
function modelObject(config: LoadedConfig, id: string) {
  return {
    id,
    object: "model",
    created: 0,
    owned_by: "warmpath",
    regions: config.regions.filter((r) => r.config.models.includes(id)).map((r) => r.config.name),
  };
}

openaiApi.get("/v1/models", (c) => {
  const config = c.get("config");
  return c.json({ object: "list", data: config.models.map((id) => modelObject(config, id)) });
});

// Model ids may contain slashes (`meta-llama/Llama-3.1-8B-Instruct`): the rest of the path is the id.
openaiApi.get("/v1/models/:id{.+}", (c) => {
  const config = c.get("config");
  const id = c.req.param("id");
  if (!config.models.includes(id)) {
    // The id is not repeated: errors never echo what the client sent.
    throw ApiError.notFound(
      "model_not_found",
      "The model named in the path does not exist or is not served here (GET /v1/models lists them)",
      "model",
      "invalid_request_error",
    );
  }
  return c.json(modelObject(config, id));
});

openaiApi.post("/v1/chat/completions", (c) => handleInference(requestContext(c), CHAT));
openaiApi.post("/v1/completions", (c) => handleInference(requestContext(c), COMPLETIONS));
openaiApi.post("/v1/responses", (c) => handleInference(requestContext(c), RESPONSES));
openaiApi.post("/v1/messages", (c) => handleInference(requestContext(c), MESSAGES));
