/**
 * The Hono application: request id, configuration, the three API surfaces, and one error handler
 * that renders every failure in OpenAI's error shape.
 */
import { Hono } from "hono";
import type { AppEnv } from "./app-types.ts";
import { adminApi } from "./api/admin.ts";
import { nodesApi } from "./api/nodes.ts";
import { CLIENT_PATHS, openaiApi } from "./api/openai.ts";
import { rootIndex } from "./api/root.ts";
import { LOCAL_ASSET_PATHS, localAssets } from "./api/local-assets.ts";
import { ConfigError, loadConfig, type ConfigRole } from "../config/load.ts";
import { JsonBoundsError } from "../core/json-bounds.ts";
import { ApiError } from "../http/errors.ts";
import { clientCors } from "./middleware/cors.ts";
import { refusalLog } from "./middleware/refusal-log.ts";
import { requestBounds } from "./middleware/request-bounds.ts";
import { TRACED_PATHS, traceRequest } from "./middleware/trace.ts";

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

  // The request's trace, before anything may refuse it: the refusal's line names it too.
  for (const path of TRACED_PATHS) app.use(path, traceRequest);

  // Every answer without a node gets a line and a metric (a flood's are bounded).
  app.use("*", refusalLog);

  // URL and header bounds (414, 431) before anything reads them.
  app.use("*", requestBounds);

  app.get("/healthz", (c) => c.json({ ok: true }));
  // Where to go from the bare address (the API, the dashboard, the docs): needs no configuration.
  app.get("/", rootIndex);
  // The dashboard's files, where the runtime does not serve them first (locally: api/local-assets.ts).
  app.on(["GET", "HEAD"], LOCAL_ASSET_PATHS, localAssets);

  app.use("*", async (c, next) => {
    c.set("config", loadConfig(c.env, EDGE));
    await next();
  });

  // The client API only: the node and admin APIs are not for browsers on other origins.
  for (const path of CLIENT_PATHS) app.use(path, clientCors);
  app.route("/", openaiApi);
  app.route("/", nodesApi);
  app.route("/", adminApi);

  // The path is not repeated: errors never echo what the client sent. A path served for other
  // methods is 405 with `Allow` (RFC 9110), not 404.
  const allowedOn = methodsByPath(app);
  app.notFound((c) => {
    const headers = { "x-request-id": c.get("requestId") ?? "" };
    const allowed = allowedOn(c.req.path);
    if (allowed.length > 0) {
      return ApiError.methodNotAllowed(`This path accepts ${allowed.join(", ")}`, allowed).toResponse(headers);
    }
    return ApiError.notFound(
      "route_not_found",
      `No route for ${METHODS.has(c.req.method) ? c.req.method : "this method"} on this path`,
    ).toResponse(headers);
  });

  app.onError((err, c) => {
    const requestId = c.get("requestId") ?? "";
    const headers = { "x-request-id": requestId };
    if (err instanceof ApiError) {
      if (err.refusal) c.set("refusal", err.refusal);
      return err.toResponse(headers);
    }
    // A value over the JSON bounds reached a walk that checks them itself (canonical.ts): the client's input, a 400.
    if (err instanceof JsonBoundsError) return ApiError.invalidRequest(err.message, null, err.code).toResponse(headers);
    if (err instanceof ConfigError) {
      // The detail (which field, which path) is the operator's, in the log; a client learns only
      // that the router is misconfigured, never the configuration's shape.
      console.error(JSON.stringify({ event: "config_error", request_id: requestId, message: err.message }));
      return ApiError.server("invalid_configuration", "The router's configuration is invalid; the operator's log says why").toResponse(
        headers,
      );
    }
    console.error(JSON.stringify({ event: "internal_error", request_id: requestId, message: String(err), stack: (err as Error).stack }));
    return ApiError.server("internal_error", "Internal error in the router").toResponse(headers);
  });

  return app;
}

/**
 * The methods the app's own routes serve on a path (middleware, registered for every method, left
 * out), from Hono's route table: `:param` is one segment, `:param{re}` its pattern, `*` the rest.
 */
function methodsByPath(app: Hono<AppEnv>): (path: string) => string[] {
  let table: Array<{ pattern: RegExp; method: string }> | undefined;
  return (path) => {
    table ??= app.routes
      .filter((r) => r.method !== "ALL")
      .map((r) => ({
        method: r.method,
        pattern: new RegExp(
          "^" +
            r.path
              .split("/")
              .map((seg) => {
                const param = /^:[A-Za-z0-9_]+(?:\{(.+)\})?$/.exec(seg);
                if (param) return param[1] ?? "[^/]+";
                return seg === "*" ? ".*" : seg.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
              })
              .join("/") +
            "$",
        ),
      }));
    return [...new Set(table.filter((r) => r.pattern.test(path)).map((r) => r.method))].sort();
  };
}
