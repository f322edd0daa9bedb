/**
 * CORS for the client API, for the origins the configuration allows (`cors_allowed_origins`).
 * Hono's `cors` middleware answers a preflight (`OPTIONS`) itself, before any guard: a browser's
 * preflight carries no credentials. The headers a client sends (its key, Anthropic's version,
 * warmpath's hints) are allowed, and warmpath's explanation headers are exposed to scripts.
 */
import { cors } from "hono/cors";
import { createMiddleware } from "hono/factory";
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-types.ts";
import { ALLOWED_REQUEST_HEADERS, EXPOSED_HEADERS } from "../../contracts/headers.ts";

/** Preflight answers may be cached this long (seconds). */
const MAX_AGE_SECONDS = 600;

/**
 * One `cors` middleware per allowed-origins list: the configuration is parsed once per isolate,
 * so its list is the same array on every request and the middleware is built once, not per request.
 */
const built = new WeakMap<readonly string[], MiddlewareHandler>();

function corsFor(allowed: readonly string[]): MiddlewareHandler {
  let handler = built.get(allowed);
  if (!handler) {
    handler = cors({
      origin: (origin) => (allowed.includes("*") ? "*" : allowed.includes(origin) ? origin : null),
      allowMethods: ["GET", "POST", "OPTIONS"],
      allowHeaders: ALLOWED_REQUEST_HEADERS,
      exposeHeaders: EXPOSED_HEADERS,
      maxAge: MAX_AGE_SECONDS,
    });
    built.set(allowed, handler);
  }
  return handler;
}

export const clientCors = createMiddleware<AppEnv>(async (c, next) => {
  const allowed = c.get("config").raw.cors_allowed_origins;
  if (allowed.length === 0) return next();
  return corsFor(allowed)(c, next);
});
