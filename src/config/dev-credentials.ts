/**
 * Development credentials: documented, public, and so never to be trusted outside a developer's
 * machine. The worker accepts them only when the configuration says `mode = "development"` AND the
 * request arrived on a loopback host (`wrangler dev`), so a configuration copied into production,
 * or a development build deployed by mistake, still refuses them.
 */

/** API key of the development tenant `dev`. */
export const DEV_API_KEY = "wp-dev-key-local-only";
/** API key of a second development tenant, `dev-2`, to see cache namespaces at work. */
export const DEV_API_KEY_2 = "wp-dev-key-2-local-only";
/** Node token of every development region. */
export const DEV_NODE_TOKEN = "wp-dev-node-token-local-only";
/** Admin token for the state API and dashboard in development. */
export const DEV_ADMIN_TOKEN = "wp-dev-admin-token-local-only";

const DEV_SECRETS = new Set([DEV_API_KEY, DEV_API_KEY_2, DEV_NODE_TOKEN, DEV_ADMIN_TOKEN]);

export function isDevCredential(secret: string): boolean {
  return DEV_SECRETS.has(secret);
}

/** True for localhost, 127.0.0.0/8 and [::1]. */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === "localhost" || hostname === "[::1]" || hostname === "::1" || /^127(\.\d{1,3}){3}$/.test(hostname);
}
