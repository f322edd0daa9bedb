/**
 * The Hono application: request id, configuration, the three API surfaces, and one error handler
 * that renders every failure in OpenAI's error shape.
 */
import { Hono } from "hono";
import type { AppEnv } from "./app-types.ts";
import { adminApi } from "./api/admin.ts";
import { nodesApi } from "./api/nodes.ts";
import { CLIENT_PATHS, openaiApi } from "./api/openai.ts";
import { ConfigError, loadConfig, type ConfigRole } from "../config/load.ts";
import { JsonBoundsError } from "../core/json-bounds.ts";
import { ApiError } from "../http/errors.ts";
import { clientCors } from "./middleware/cors.ts";
import { refusalLog } from "./middleware/refusal-log.ts";
import { requestBounds } from "./middleware/request-bounds.ts";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The edge holds the node and admin tokens, never an origin token (src/config/load.ts). */
const EDGE: ConfigRole = { kind: "edge" };

/** Methods named in a 404's message; any other method the client invented is not repeated. */
const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

export function createApp(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  app.use("*", async (c, next) => {
    const given = c.req.header("x-request-id");
    c.set("requestId", given && REQUEST_ID.test(given) ? given : crypto.randomUUID());
    await next();
    c.header("x-request-id", c.get("requestId"));
  });

  // Every answer without a node gets a line and a metric (a flood's are bounded).
  app.use("*", refusalLog);

  // URL and header bounds (414, 431) before anything reads them.
  app.use("*", requestBounds);

  app.get("/healthz", (c) => c.json({ ok: true }));

  app.use("*", async (c, next) => {
    c.set("config", loadConfig(c.env, EDGE));
    await next();
  });

  // The client API only: the node and admin APIs are not for browsers on other origins.
  for (const path of CLIENT_PATHS) app.use(path, clientCors);
  app.route("/", openaiApi);
  app.route("/", nodesApi);
  app.route("/", adminApi);

  // The path is not repeated: errors never echo what the client sent.
  app.notFound((c) =>
    ApiError.notFound(
      "route_not_found",
      `No route for ${METHODS.has(c.req.method) ? c.req.method : "this method"} on this path`,
    ).toResponse({
      "x-request-id": c.get("requestId") ?? "",
    }),
  );

  app.onError((err, c) => {
    const requestId = c.get("requestId") ?? "";
    const headers = { "x-request-id": requestId };
    if (err instanceof ApiError) {
      if (err.logged) c.set("decisionLogged", true);
      return err.toResponse(headers);
    }
    // A value over the JSON bounds reached a walk that checks them itself (canonical.ts): the client's input, a 400.
    if (err instanceof JsonBoundsError) return ApiError.invalidRequest(err.message, null, err.code).toResponse(headers);
    if (err instanceof ConfigError) {
      console.error(JSON.stringify({ event: "config_error", message: err.message }));
      return ApiError.server("invalid_configuration", err.message).toResponse(headers);
    }
    console.error(JSON.stringify({ event: "internal_error", request_id: requestId, message: String(err), stack: (err as Error).stack }));
    return ApiError.server("internal_error", "Internal error in the router").toResponse(headers);
  });

  return app;
}
