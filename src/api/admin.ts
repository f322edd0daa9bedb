/**
 * The admin API: each region's live state (nodes, load, decisions, predicted and measured hit
 * rates). `Authorization: Bearer <admin token>` (the secret named by `admin_token_secret`); a
 * local development server (mode "development", loopback host) needs no token.
 *
 * - `GET /admin/state`: every region.
 * - `GET /admin/state/{region}`: one region.
 */
import { Hono } from "hono";
import type { AppEnv } from "../app-types.ts";
import { bearerToken, guardDevCredential, timingSafeEqual } from "../auth/bearer.ts";
import type { LoadedRegion } from "../config/load.ts";
import type { Env } from "../env.ts";
import { isLoopbackHost } from "../config/dev-credentials.ts";
import { ApiError } from "../http/errors.ts";
import { createMiddleware } from "hono/factory";

export const adminAuth = createMiddleware<AppEnv>(async (c, next) => {
  const config = c.get("config");
  const token = bearerToken(c.req.raw);
  // A local development server shows its state without a token (the dashboard just works).
  if (!token && config.raw.mode === "development" && isLoopbackHost(new URL(c.req.url).hostname)) return next();
  if (!token)
    throw new ApiError(401, "Missing admin token: send it as Authorization: Bearer <token>", "authentication_error", "missing_admin_token");
  guardDevCredential(token, c.req.raw, config);
  if (!config.adminToken) {
    throw new ApiError(
      401,
      `The admin API is disabled: secret ${config.raw.admin_token_secret} is not set`,
      "authentication_error",
      "admin_disabled",
    );
  }
  if (!timingSafeEqual(token, config.adminToken))
    throw new ApiError(401, "Invalid admin token", "authentication_error", "invalid_admin_token");
  await next();
});

export const adminApi = new Hono<AppEnv>();
adminApi.use("/admin/*", adminAuth);

export async function regionState(env: Env, region: LoadedRegion) {
  const snapshot = await env.REGION.getByName(region.config.name).snapshot(region.init);
  return { ...snapshot, location: region.config.location, models: region.config.models };
}

adminApi.get("/admin/state", async (c) => {
  const config = c.get("config");
  const regions = await Promise.all(config.regions.map((r) => regionState(c.env, r)));
  return c.json({ at: Date.now(), regions });
});

adminApi.get("/admin/state/:region", async (c) => {
  const region = c.get("config").regionByName.get(c.req.param("region"));
  if (!region) throw new ApiError(404, `Unknown region '${c.req.param("region").slice(0, 64)}'`, "not_found_error", "unknown_region");
  return c.json(await regionState(c.env, region));
});
