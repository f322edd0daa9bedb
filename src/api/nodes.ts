/**
 * The node API: GPU nodes push load reports and leave.
 *
 * `POST /v1/nodes/report` with `Authorization: Bearer <region node token>` and
 *
 *     { "node_id": "gpu-1", "region": "eu-west", "url": "http://10.0.0.5:8000",
 *       "models": ["llama-3.1-8b-instruct"], "kv_capacity_tokens": 500000,
 *       "running": 3, "waiting": 0, "kv_usage": 0.42, "boot_id": "optional-process-id" }
 *
 * A node joins its region on its first valid report and leaves after the region's silence
 * timeout, or on `DELETE /v1/nodes/{region}/{node_id}` (same token). A changed `boot_id` tells the
 * router the node restarted and lost its cache.
 */
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-types.ts";
import { bearerToken, guardDevCredential, timingSafeEqual } from "../auth/bearer.ts";
import type { LoadedConfig, LoadedRegion } from "../config/load.ts";
import { parseJsonBody, readBodyLimited } from "../http/body.ts";
import { ApiError } from "../http/errors.ts";
import { firstIssue } from "./schemas.ts";

/** Reports are small; anything larger is not a report. */
const MAX_REPORT_BYTES = 16 * 1024;

const NODE_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

export const nodeReportBodySchema = z.object({
  node_id: z.string().regex(NODE_ID, "must be lowercase letters, digits and dashes (max 63)"),
  region: z.string().min(1),
  url: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }),
  models: z.array(z.string().min(1).max(256)).min(1).max(64),
  kv_capacity_tokens: z.number().int().positive(),
  running: z.number().int().min(0),
  waiting: z.number().int().min(0),
  kv_usage: z.number().min(0).max(1),
  boot_id: z.string().min(1).max(128).optional(),
});

export const nodesApi = new Hono<AppEnv>();

/** The region whose node token the request carries; 401 otherwise. */
function authenticateNode(request: Request, config: LoadedConfig): LoadedRegion[] {
  const token = bearerToken(request);
  if (!token)
    throw new ApiError(401, "Missing node token: send it as Authorization: Bearer <token>", "authentication_error", "missing_node_token");
  guardDevCredential(token, request, config);
  const regions = config.regions.filter((r) => timingSafeEqual(token, r.nodeToken));
  if (regions.length === 0) throw new ApiError(401, "Invalid node token", "authentication_error", "invalid_node_token");
  return regions;
}

nodesApi.post("/v1/nodes/report", async (c) => {
  const config = c.get("config");
  const allowed = authenticateNode(c.req.raw, config);
  const json = parseJsonBody(await readBodyLimited(c.req.raw, MAX_REPORT_BYTES));
  const parsed = nodeReportBodySchema.safeParse(json);
  if (!parsed.success) {
    const { message, param } = firstIssue(parsed.error);
    throw new ApiError(400, message, "invalid_request_error", "invalid_report", { param });
  }
  const r = parsed.data;
  const region = config.regionByName.get(r.region);
  if (!region)
    throw new ApiError(
      400,
      `Invalid report: region: unknown region '${r.region.slice(0, 64)}'`,
      "invalid_request_error",
      "unknown_region",
      { param: "region" },
    );
  if (!allowed.includes(region)) {
    throw new ApiError(403, `This node token is not valid for region '${r.region}'`, "permission_error", "wrong_region_token");
  }
  const spec = await c.env.REGION.getByName(region.config.name).report(region.init, {
    nodeId: r.node_id,
    url: r.url,
    models: r.models,
    kvCapacityTokens: r.kv_capacity_tokens,
    running: r.running,
    waiting: r.waiting,
    kvUsage: r.kv_usage,
    bootId: r.boot_id,
  });
  return c.json({ ok: true, node_id: spec.id, region: region.config.name, expires_after_ms: region.init.settings.nodeSilenceMs });
});

nodesApi.delete("/v1/nodes/:region/:node_id", async (c) => {
  const config = c.get("config");
  const allowed = authenticateNode(c.req.raw, config);
  const region = config.regionByName.get(c.req.param("region"));
  if (!region) throw new ApiError(404, `Unknown region '${c.req.param("region").slice(0, 64)}'`, "not_found_error", "unknown_region");
  if (!allowed.includes(region))
    throw new ApiError(403, `This node token is not valid for region '${region.config.name}'`, "permission_error", "wrong_region_token");
  const nodeId = c.req.param("node_id");
  if (!NODE_ID.test(nodeId))
    throw new ApiError(400, "Invalid node id in path", "invalid_request_error", "invalid_node_id", { param: "node_id" });
  const removed = await c.env.REGION.getByName(region.config.name).removeNode(region.init, nodeId);
  if (!removed)
    throw new ApiError(404, `Node '${nodeId}' is not registered in region '${region.config.name}'`, "not_found_error", "unknown_node");
  return c.json({ ok: true, node_id: nodeId, region: region.config.name, removed: true });
});
