/**
 * The Hono application: request id, configuration, the three API surfaces, and one error handler
 * that renders every failure in OpenAI's error shape.
 */
import { Hono } from "hono";
import type { AppEnv } from "./app-types.ts";
import { adminApi } from "./api/admin.ts";
import { nodesApi } from "./api/nodes.ts";
import { openaiApi } from "./api/openai.ts";
import { ConfigError, loadConfig } from "./config/load.ts";
import { ApiError, apiErrorResponse, errorResponse } from "./http/errors.ts";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function createApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.use("*", async (c, next) => {
    const given = c.req.header("x-request-id");
    c.set("requestId", given && REQUEST_ID.test(given) ? given : crypto.randomUUID());
    await next();
    c.header("x-request-id", c.get("requestId"));
  });

  app.get("/healthz", (c) => c.json({ ok: true }));

  app.use("*", async (c, next) => {
    c.set("config", loadConfig(c.env));
    await next();
  });

  app.route("/", openaiApi);
  app.route("/", nodesApi);
  app.route("/", adminApi);

  app.notFound((c) =>
    errorResponse(404, `No route for ${c.req.method} ${new URL(c.req.url).pathname}`, "not_found_error", "route_not_found", {
      headers: { "x-request-id": c.get("requestId") ?? "" },
    }),
  );

  app.onError((err, c) => {
    const requestId = c.get("requestId") ?? "";
    if (err instanceof ApiError) return apiErrorResponse(err, { "x-request-id": requestId });
    if (err instanceof ConfigError) {
      console.error(JSON.stringify({ event: "config_error", message: err.message }));
      return errorResponse(500, err.message, "server_error", "invalid_configuration", { headers: { "x-request-id": requestId } });
    }
    console.error(JSON.stringify({ event: "internal_error", request_id: requestId, message: String(err), stack: (err as Error).stack }));
    return errorResponse(500, "Internal error in the router", "server_error", "internal_error", { headers: { "x-request-id": requestId } });
  });

  return app;
}
