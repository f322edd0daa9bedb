/**
 * The body a node is sent, built once per request by the region worker that calls the node: the
 * client's bytes, with the tenant's cache namespace as `cache_salt` where the region's engines
 * partition their cache by it (cache-salt.ts), and usage asked for on every stream whose client did
 * not ask for it, whatever its `stream_options` said (src/proxy/stream-usage.ts, whose filter takes
 * the usage event back out of the answer).
 */
import type { LoadedRegion } from "../config/load.ts";
import type { DispatchRequest } from "../contracts/region-service.ts";
import { requestStreamUsage } from "../proxy/stream-usage.ts";
import { engineCacheSalt, withCacheSalt } from "./cache-salt.ts";

export async function nodeBody(
  region: LoadedRegion,
  request: DispatchRequest,
  clientBody: Uint8Array,
): Promise<{ body: Uint8Array; usageInjected: boolean }> {
  let body = clientBody;
  if (region.config.engine_cache_isolation === "cache_salt") {
    const salt = await engineCacheSalt(request.cacheNamespace, request.clientCacheSalt);
    // Only a body with a `cache_salt` of its own is parsed again (to replace it): the rest get the
    // field added after the opening brace, every other byte as sent.
    const parsed = request.bodyHasCacheSalt ? (JSON.parse(new TextDecoder().decode(clientBody)) as Record<string, unknown>) : {};
    body = withCacheSalt(body, parsed, salt);
  }
  if (!request.askUsage) return { body, usageInjected: false };
  // The edge said this stream's client did not ask for usage; its `stream_options` (if any) is found in the bytes.
  const asked = requestStreamUsage(body);
  return { body: asked.body, usageInjected: asked.injected };
}
