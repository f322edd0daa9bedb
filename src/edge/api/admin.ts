/**
 * The admin API: each region's live state (nodes, load, decisions, predicted and measured hit
 * rates). `Authorization: Bearer <admin token>` (the secret named by `admin_token_secret`); a
 * local development server (mode "development", loopback host) needs no token.
 *
 * - `GET /admin/state`: every region.
 * - `GET /admin/state/{region}`: one region.
 * - `GET /admin/history`: every region's last hour (10 s buckets) and its recent decisions.
 * - `GET /metrics`: every region in Prometheus' text format.
 * - `POST /admin/regions/{region}/restart`: restarts the region's Durable Object (every shard's).
 * - `GET /admin/usage`: the usage ledger (usage.ts).
 */
import { Hono } from "hono";
import type { AppEnv } from "../app-types.ts";
import type { LoadedConfig, LoadedRegion } from "../../config/load.ts";
import { regionPath } from "../../contracts/region-service.ts";
import type { RegionHistoryView, RegionSnapshot } from "../../core/region/index.ts";
import { ApiError } from "../../http/errors.ts";
import { adminAuth } from "../middleware/bearer-guard/guards.ts";
import { edgeRefusalTotals } from "../middleware/refusal-log.ts";
import { renderPrometheus } from "./prometheus.ts";
import { usageApi } from "./usage.ts";
import { regionAnswer, regionJson } from "../region-client.ts";
import { regionHistorySchema, regionSnapshotSchema } from "../../contracts/admin.ts";

export const adminApi = new Hono<AppEnv>();
adminApi.use("/admin/*", adminAuth);
adminApi.use("/metrics", adminAuth);
adminApi.route("/", usageApi);

/** The region's state, from its worker: its object's snapshot, or its shards' merged (src/core/region/merge.ts). */
async function regionState(env: Env, region: LoadedRegion) {
  const snapshot = await regionAnswer(env, region, regionPath.state(region.config.name), regionSnapshotSchema);
  return { ...snapshot, location: region.config.location, models: region.config.models };
}

/** The region's history, its shards' merged, from its worker. */
async function regionHistory(env: Env, region: LoadedRegion) {
  return regionAnswer(env, region, regionPath.history(region.config.name), regionHistorySchema);
}

/** The configured region named in the path, or 404 `unknown_region`. */
export function regionFromPath(config: LoadedConfig, name: string): LoadedRegion {
  const region = config.regionByName.get(name);
  if (!region) throw ApiError.notFound("unknown_region", "No region of that name is configured");
  return region;
}

adminApi.get("/admin/state", async (c) => {
  const config = c.get("config");
  const regions = await Promise.all(config.regions.map((r) => regionState(c.env, r)));
  return c.json({ at: Date.now(), regions });
});

/** Every region's state in Prometheus' text format (src/edge/api/prometheus.ts); the admin token, as /admin/state. */
adminApi.get("/metrics", async (c) => {
  const config = c.get("config");
  const regions = await Promise.all(config.regions.map((r) => regionState(c.env, r)));
  return c.body(renderPrometheus(regions, Date.now(), edgeRefusalTotals()), 200, {
    "content-type": "text/plain; version=0.0.4; charset=utf-8",
  });
});

adminApi.get("/admin/state/:region", async (c) => {
  return c.json(await regionState(c.env, regionFromPath(c.get("config"), c.req.param("region"))));
});

adminApi.get("/admin/history", async (c) => {
  const config = c.get("config");
  const regions = await Promise.all(config.regions.map((r) => regionHistory(c.env, r)));
  return c.json({ at: Date.now(), regions });
});

/**
 * Restarts the region's Durable Object (an operator's remedy for a wedged object; a fault for
 * scripts/faults/run.ts): its soft state (index, load model, history) starts again, the node table
 * and configuration are read back from storage on the next call.
 */
adminApi.post("/admin/regions/:region/restart", async (c) => {
  const region = regionFromPath(c.get("config"), c.req.param("region"));
  const { objects } = await regionJson<{ objects: number }>(c.env, region, regionPath.restart(region.config.name), {});
  return c.json({ region: region.config.name, restarted: true, objects });
});
