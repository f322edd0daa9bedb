/**
 * Client authentication: `Authorization: Bearer <key>` identifies the tenant, by the SHA-256 of
 * the key (configuration stores hashes only). Missing or unknown keys are 401; the key is never
 * echoed in a message or a log.
 */
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../app-types.ts";
import { bearerToken, guardDevCredential, sha256Hex } from "../auth/bearer.ts";
import { ApiError } from "../http/errors.ts";

export const tenantAuth = createMiddleware<AppEnv>(async (c, next) => {
  const token = bearerToken(c.req.raw);
  if (!token) {
    throw new ApiError(401, "Missing API key: send it as Authorization: Bearer <key>", "authentication_error", "missing_api_key");
  }
  const config = c.get("config");
  guardDevCredential(token, c.req.raw, config);
  const tenant = config.tenantByKeyHash.get(await sha256Hex(token));
  if (!tenant) throw new ApiError(401, "Invalid API key", "authentication_error", "invalid_api_key");
  c.set("tenant", tenant);
  await next();
});
