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
 */
import { Hono } from "hono";
import type { AppEnv } from "../app-types.ts";
import { regionShardStubs, type LoadedConfig, type LoadedRegion } from "../config/load.ts";
import { mergeHistories, mergeSnapshots } from "../core/region/merge.ts";
import { ApiError } from "../http/errors.ts";
import { adminAuth } from "../middleware/bearer-guard/guards.ts";
import { renderPrometheus } from "./prometheus.ts";
import { RESTART_REASON } from "../../durable-objects/region.ts";

export const adminApi = new Hono<AppEnv>();
adminApi.use("/admin/*", adminAuth);
adminApi.use("/metrics", adminAuth);

/** The region's state: its object's snapshot, or its shards' merged (src/core/region/merge.ts). */
async function regionState(env: Env, region: LoadedRegion) {
  const snapshots = await Promise.all(regionShardStubs(env, region).map((s) => s.snapshot(region.init)));
  return { ...mergeSnapshots(snapshots), location: region.config.location, models: region.config.models };
}

/** The region's history, its shards' merged. */
async function regionHistory(env: Env, region: LoadedRegion) {
  return mergeHistories(await Promise.all(regionShardStubs(env, region).map((s) => s.history(region.init))));
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
  const stubs = regionShardStubs(c.env, region);
  await Promise.all(
    stubs.map(async (stub) => {
      try {
        await stub.restart();
      } catch (e) {
        // The abort ends the very call that asked for it (workerd flags it `durableObjectReset`):
        // that is the restart done. Any other error is not.
        if (!(e instanceof Error && e.message.includes(RESTART_REASON))) throw e;
      }
    }),
  );
  return c.json({ region: region.config.name, restarted: true, objects: stubs.length });
});
