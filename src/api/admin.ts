/**
 * The admin API: each region's live state (nodes, load, decisions, predicted and measured hit
 * rates). `Authorization: Bearer <admin token>` (the secret named by `admin_token_secret`); a
 * local development server (mode "development", loopback host) needs no token.
 *
 * - `GET /admin/state`: every region.
 * - `GET /admin/state/{region}`: one region.
 * - `GET /admin/history`: every region's last hour (10 s buckets) and its recent decisions.
 * - `GET /metrics`: every region in Prometheus' text format.
 */
import { Hono } from "hono";
import type { AppEnv } from "../app-types.ts";
import { regionStub, type LoadedConfig, type LoadedRegion } from "../config/load.ts";
import { ApiError } from "../http/errors.ts";
import { adminAuth } from "../middleware/bearer-guard/guards.ts";
import { renderPrometheus } from "./prometheus.ts";

export const adminApi = new Hono<AppEnv>();
adminApi.use("/admin/*", adminAuth);
adminApi.use("/metrics", adminAuth);

async function regionState(env: Env, region: LoadedRegion) {
  const snapshot = await regionStub(env, region).snapshot(region.init);
  return { ...snapshot, location: region.config.location, models: region.config.models };
}

/** The configured region named in the path, or 404 `unknown_region`. */
export function regionFromPath(config: LoadedConfig, name: string): LoadedRegion {
  const region = config.regionByName.get(name);
  if (!region) throw ApiError.notFound("unknown_region", `Unknown region '${name.slice(0, 64)}'`);
  return region;
}

adminApi.get("/admin/state", async (c) => {
  const config = c.get("config");
  const regions = await Promise.all(config.regions.map((r) => regionState(c.env, r)));
  return c.json({ at: Date.now(), regions });
});

/** Every region's state in Prometheus' text format (src/api/prometheus.ts); the admin token, as /admin/state. */
adminApi.get("/metrics", async (c) => {
  const config = c.get("config");
  const regions = await Promise.all(config.regions.map((r) => regionState(c.env, r)));
  return c.body(renderPrometheus(regions, Date.now()), 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
});

adminApi.get("/admin/state/:region", async (c) => {
  return c.json(await regionState(c.env, regionFromPath(c.get("config"), c.req.param("region"))));
});

adminApi.get("/admin/history", async (c) => {
  const config = c.get("config");
  const regions = await Promise.all(config.regions.map((r) => regionStub(c.env, r).history(r.init)));
  return c.json({ at: Date.now(), regions });
});
