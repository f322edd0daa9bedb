/**
 * The node API: GPU nodes push load reports and leave.
 *
 * `POST /v1/nodes/report` with `Authorization: Bearer <region node token>` and a body in the
 * node report contract (src/contracts/node.ts):
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
import type { Context } from "hono";
import type { AppEnv } from "../app-types.ts";
import { regionStub, type LoadedRegion } from "../config/load.ts";
import { NODE_ID_PATTERN, nodeReportSchema } from "../contracts/node.ts";
import { parseJsonBody, readBodyLimited } from "../http/body.ts";
import { ApiError } from "../http/errors.ts";
import { nodeAuth } from "../middleware/bearer-guard/guards.ts";
import { regionFromPath } from "./admin.ts";
import { firstIssue } from "./schemas.ts";

/** Reports are small; anything larger is not a report. */
const MAX_REPORT_BYTES = 16 * 1024;

export const nodesApi = new Hono<AppEnv>();
nodesApi.use("/v1/nodes/*", nodeAuth);

/** 403 unless the request's node token is `region`'s. */
function requireRegionToken(c: Context<AppEnv>, region: LoadedRegion): void {
  if (!c.get("nodeRegions").includes(region)) {
    throw ApiError.permission("wrong_region_token", `This node token is not valid for region '${region.config.name}'`);
  }
}

nodesApi.post("/v1/nodes/report", async (c) => {
  const config = c.get("config");
  const json = parseJsonBody(await readBodyLimited(c.req.raw, MAX_REPORT_BYTES));
  const parsed = nodeReportSchema.safeParse(json);
  if (!parsed.success) {
    const { message, param } = firstIssue(parsed.error);
    throw ApiError.invalidRequest(message, param, "invalid_report");
  }
  const report = parsed.data;
  const region = config.regionByName.get(report.region);
  if (!region) {
    throw ApiError.invalidRequest(`Invalid report: region: unknown region '${report.region.slice(0, 64)}'`, "region", "unknown_region");
  }
  requireRegionToken(c, region);
  const spec = await regionStub(c.env, region).report(region.init, report);
  return c.json({ ok: true, node_id: spec.id, region: region.config.name, expires_after_ms: region.init.settings.nodeSilenceMs });
});

nodesApi.delete("/v1/nodes/:region/:node_id", async (c) => {
  const region = regionFromPath(c.get("config"), c.req.param("region"));
  requireRegionToken(c, region);
  const nodeId = c.req.param("node_id");
  if (!NODE_ID_PATTERN.test(nodeId)) throw ApiError.invalidRequest("Invalid node id in path", "node_id", "invalid_node_id");
  const removed = await regionStub(c.env, region).removeNode(region.init, nodeId);
  if (!removed) throw ApiError.notFound("unknown_node", `Node '${nodeId}' is not registered in region '${region.config.name}'`);
  return c.json({ ok: true, node_id: nodeId, region: region.config.name, removed: true });
});
