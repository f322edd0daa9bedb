/**
 * The Hono application: request id, configuration, the three API surfaces, and one error handler
 * that renders every failure in OpenAI's error shape.
 */
import { Hono } from "hono";
import type { AppEnv } from "./app-types.ts";
import { adminApi } from "./api/admin.ts";
import { nodesApi } from "./api/nodes.ts";
import { CLIENT_PATHS, openaiApi } from "./api/openai.ts";
import { ConfigError, loadConfig } from "./config/load.ts";
import { ApiError } from "./http/errors.ts";
import { clientCors } from "./middleware/cors.ts";

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

  // The client API only: the node and admin APIs are not for browsers on other origins.
  for (const path of CLIENT_PATHS) app.use(path, clientCors);
  app.route("/", openaiApi);
  app.route("/", nodesApi);
  app.route("/", adminApi);

  app.notFound((c) =>
    ApiError.notFound("route_not_found", `No route for ${c.req.method} ${new URL(c.req.url).pathname}`).toResponse({
      "x-request-id": c.get("requestId") ?? "",
    }),
  );

  app.onError((err, c) => {
    const requestId = c.get("requestId") ?? "";
    const headers = { "x-request-id": requestId };
    if (err instanceof ApiError) return err.toResponse(headers);
    if (err instanceof ConfigError) {
      console.error(JSON.stringify({ event: "config_error", message: err.message }));
      return ApiError.server("invalid_configuration", err.message).toResponse(headers);
    }
    console.error(JSON.stringify({ event: "internal_error", request_id: requestId, message: String(err), stack: (err as Error).stack }));
    return ApiError.server("internal_error", "Internal error in the router").toResponse(headers);
  });

  return app;
}
