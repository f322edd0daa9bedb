/**
 * The credentials the edge's guards accept, each a {@link bearerGuard}:
 * - tenants: `Authorization: Bearer <API key>` (or `x-api-key`, as Anthropic's SDKs send it), identified by the key's SHA-256 (configuration
 *   stores hashes only); sets `tenant`;
 * (nodes' tokens are checked by src/edge/api/nodes.ts's own guard, which also admits node secrets);
 * - operators: the admin token (secret named by `admin_token_secret`); a local development
 *   server needs none, so the dashboard just works.
 */
import { ApiError } from "../../../http/errors.ts";
import { bearerGuard } from "./index.ts";
import { sha256Hex } from "../../../core/hex.ts";
import { isLocalDevelopment, timingSafeEqual } from "./credentials.ts";

export const tenantAuth = bearerGuard({
  credential: "api_key",
  label: "API key",
  keyHeader: "x-api-key",
  async verifyToken(token, c) {
    const tenant = c.get("config").tenantByKeyHash.get(await sha256Hex(token));
    if (!tenant) return false;
    c.set("tenant", tenant);
    return true;
  },
});

export const adminAuth = bearerGuard({
  credential: "admin_token",
  label: "admin token",
  tokenless: (c) => isLocalDevelopment(c.req.raw, c.get("config")),
  verifyToken(token, c) {
    const config = c.get("config");
    if (!config.adminToken) {
      throw ApiError.authentication("admin_disabled", `The admin API is disabled: secret ${config.raw.admin_token_secret} is not set`);
    }
    return timingSafeEqual(token, config.adminToken);
  },
});
