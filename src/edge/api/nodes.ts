/**
 * The node API: GPU nodes register, push load reports, and leave.
 *
 * `POST /v1/nodes/report` with a body in the node report contract (src/contracts/node.ts):
 *
 *     { "node_id": "gpu-1", "region": "eu-west", "url": "http://10.0.0.5:8000",
 *       "models": ["llama-3.1-8b-instruct"], "kv_capacity_tokens": 500000,
 *       "running": 3, "waiting": 0, "kv_usage": 0.42, "boot_id": "optional-process-id" }
 *
 * - Registration: `Authorization: Bearer <region node token>`, for a node id the region does not
 *   hold. The answer carries `node_secret`, the node's own credential, once (the router keeps its
 *   SHA-256 only; src/core/node-identity.ts).
 * - Every later report: `Authorization: Bearer <node secret>`. A report updates only its own node;
 *   the region token on a registered id is 403 `node_identity_mismatch` (with `Retry-After`: when
 *   the entry expires if nothing reports for it, the way back for a node that lost its secret).
 * - Static nodes (declared in the configuration) have no secret and report with the region token;
 *   their URL is the configuration's.
 * - The `url` must be inside the region's `allowed_origins` (src/core/origins.ts): 400
 *   `invalid_node_url` for a malformed one, 403 `origin_not_allowed` for one outside, both with
 *   `param: "url"`. The router stores and calls the normalised URL it checked.
 *
 * A node leaves after the region's silence timeout, or on `DELETE /v1/nodes/{region}/{node_id}`
 * with its node secret or the admin token (which also revokes the secret). A changed `boot_id` tells
 * the router the node restarted and lost its cache.
 *
 * Why the node secret alone as the bearer, rather than the region token plus a second header
 * carrying the secret: after registration the shared region token is not needed at all, so
 * (1) rotating it (`node_token_secret` may list the old and the new secret) touches no running
 * node: only new registrations need the new token; (2) a report in flight carries only a credential
 * that can act as this one node, not one that can register nodes anywhere in the region; (3) one
 * credential per request, no precedence rules between two. The cost: a bearer that is no region or
 * admin token can only be checked by the region's object (a hash lookup), so the guard admits
 * secret-shaped tokens to it and the object answers 401 for unknown ones.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import type { AppEnv } from "../app-types.ts";
import type { LoadedRegion } from "../../config/load.ts";
import type { ReportOutcome } from "../../contracts/region-object.ts";
import { regionPath } from "../../contracts/region-service.ts";
import { NODE_ID_PATTERN, nodeReportSchema } from "../../contracts/node.ts";
import { checkNodeUrl } from "../../core/origins.ts";
import { NODE_SECRET_PATTERN, newNodeSecret, secretSha256, type IdentityRefusal, type NodeCredential } from "../../core/node-identity.ts";
import { parseJsonBody, readBodyLimited } from "../../http/body.ts";
import { ApiError } from "../../http/errors.ts";
import { bearerGuard } from "../middleware/bearer-guard/index.ts";
import { bearerToken, timingSafeEqual } from "../middleware/bearer-guard/credentials.ts";
import { regionJson } from "../region-client.ts";
import { regionFromPath } from "./admin.ts";
import { firstIssue } from "./schemas.ts";

/**
 * The largest report the contract allows (src/contracts/node.ts), and no more: 64 model names of
 * 256 characters, each character up to 6 bytes as JSON writes it (`\u0000`), is 96 KiB, and the
 * URL's 2,048 characters and the other fields a few KiB more. (16 KiB refused a valid report of 64
 * long names with 413, every time.)
 */
const MAX_REPORT_BYTES = 128 * 1024;

/**
 * Admits a region's node token (any of them, during a rotation), the admin token (removal), and
 * anything shaped like a node secret, which only the region's object can check. Everything else
 * is 401 `invalid_node_token` here; development credentials outside local development are refused
 * by {@link bearerGuard} before this runs.
 */
const nodeCredentialAuth = bearerGuard({
  credential: "node_token",
  label: "node token",
  verifyToken(token, c) {
    const config = c.get("config");
    const regions = config.regions.filter((r) => r.nodeTokens.some((t) => timingSafeEqual(token, t)));
    c.set("nodeRegions", regions);
    if (regions.length > 0) return true;
    if (config.adminToken && timingSafeEqual(token, config.adminToken)) return true;
    return NODE_SECRET_PATTERN.test(token);
  },
});

export const nodesApi = new Hono<AppEnv>();
nodesApi.use("/v1/nodes/*", nodeCredentialAuth);

/**
 * What the request's bearer is for `region`: its node token, the admin token, or a candidate node
 * secret (by its hash). Another region's node token is 403 `wrong_region_token`.
 */
async function credentialFor(c: Context<AppEnv>, region: LoadedRegion): Promise<"region" | "admin" | { secretSha256: string }> {
  const token = bearerToken(c.req.raw) ?? "";
  if (region.nodeTokens.some((t) => timingSafeEqual(token, t))) return "region";
  if (c.get("nodeRegions").length > 0) {
    throw ApiError.permission("wrong_region_token", `This node token is not valid for region '${region.config.name}'`);
  }
  const adminToken = c.get("config").adminToken;
  if (adminToken && timingSafeEqual(token, adminToken)) return "admin";
  return { secretSha256: await secretSha256(token) };
}

/** One JSON line per refused report or removal (never a token, secret or userinfo): attempts to act as another node show in the logs. */
function logRefusal(c: Context<AppEnv>, region: string, node: string, reason: string, extra: Record<string, unknown> = {}): void {
  console.warn(JSON.stringify({ event: "node_request_refused", request_id: c.get("requestId"), region, node, reason, ...extra }));
}

/** The answer to a refusal from the region object. */
function identityError(reason: IdentityRefusal, region: string, nodeId: string, retryAfterMs?: number): Response {
  switch (reason) {
    case "node_identity_mismatch": {
      const err = ApiError.permission(
        "node_identity_mismatch",
        `Node '${nodeId}' is registered in region '${region}' with its own node secret: its reports and its removal must carry that secret ` +
          "(Authorization: Bearer <node secret>, from the registration answer). A node that lost its secret registers its id again " +
          "with the region's node token once the entry expires (node_silence_ms without reports) or an operator removes it.",
        "node_id",
      );
      return err.toResponse(retryAfterMs === undefined ? {} : { "retry-after": String(Math.max(1, Math.ceil(retryAfterMs / 1000))) });
    }
    case "unknown_node_secret":
      return ApiError.authentication(
        "invalid_node_token",
        `Invalid node token: neither region '${region}''s node token nor the secret of node '${nodeId}' (a node whose entry expired or was removed registers again with the region's node token)`,
      ).toResponse();
    case "static_node_url":
      return ApiError.permission(
        "static_node_url",
        `Node '${nodeId}' is declared in the configuration with another URL: a report cannot move a static node`,
        "url",
      ).toResponse();
    case "unknown_node":
      return ApiError.notFound("unknown_node", `No node of that id is registered in region '${region}'`).toResponse();
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
    throw ApiError.invalidRequest("Invalid report: region: no region of that name is configured", "region", "unknown_region");
  }
  const name = region.config.name;
  const who = await credentialFor(c, region);

  const url = checkNodeUrl(report.url, region.origins);
  if (!url.ok) {
    logRefusal(c, name, report.node_id, url.code);
    if (url.status === 400) throw ApiError.invalidRequest(url.message, "url", url.code);
    throw ApiError.permission(url.code, url.message, "url");
  }

  // The secret this report hands out if it registers the node; the region object only sees its hash.
  const secret = who === "region" ? newNodeSecret() : undefined;
  const credential: NodeCredential =
    who === "region"
      ? { kind: "region", registerSha256: await secretSha256(secret!) }
      : who === "admin"
        ? { kind: "admin" }
        : { kind: "node", secretSha256: who.secretSha256 };
  const outcome = await regionJson<ReportOutcome>(c.env, region, regionPath.report(name), {
    report: { ...report, url: url.url },
    credential,
  });
  if (!outcome.ok) {
    logRefusal(c, name, report.node_id, outcome.reason);
    return identityError(outcome.reason, name, report.node_id, outcome.retryAfterMs);
  }
  const body = {
    ok: true,
    node_id: outcome.spec.id,
    region: name,
    expires_after_ms: region.init.settings.nodeSilenceMs,
    registered: outcome.registered,
  };
  if (!outcome.registered) return c.json(body);
  console.log(
    JSON.stringify({
      event: "node_registered",
      request_id: c.get("requestId"),
      region: name,
      node: outcome.spec.id,
      url: outcome.spec.url,
    }),
  );
  // The one answer that carries the secret: never stored by a cache on the way.
  return c.json({ ...body, node_secret: secret }, 200, { "cache-control": "no-store" });
});

nodesApi.delete("/v1/nodes/:region/:node_id", async (c) => {
  const region = regionFromPath(c.get("config"), c.req.param("region"));
  const who = await credentialFor(c, region);
  const nodeId = c.req.param("node_id");
  if (!NODE_ID_PATTERN.test(nodeId)) throw ApiError.invalidRequest("Invalid node id in path", "node_id", "invalid_node_id");
  // The region token removes no node: only the node's own secret or an operator does.
  const credential: NodeCredential =
    who === "region" ? { kind: "region" } : who === "admin" ? { kind: "admin" } : { kind: "node", secretSha256: who.secretSha256 };
  const outcome = await regionJson<{ ok: true } | { ok: false; reason: IdentityRefusal }>(
    c.env,
    region,
    regionPath.remove(region.config.name),
    {
      nodeId,
      credential,
    },
  );
  if (!outcome.ok) {
    if (outcome.reason !== "unknown_node") logRefusal(c, region.config.name, nodeId, outcome.reason);
    return identityError(outcome.reason, region.config.name, nodeId);
  }
  console.log(
    JSON.stringify({
      event: "node_removed",
      request_id: c.get("requestId"),
      region: region.config.name,
      node: nodeId,
      by: credential.kind,
    }),
  );
  return c.json({ ok: true, node_id: nodeId, region: region.config.name, removed: true });
});
