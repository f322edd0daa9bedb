/**
 * The body a node is sent, built once per request by the region worker that calls the node: the
 * client's bytes, with the tenant's cache namespace as `cache_salt` where the region's engines
 * partition their cache by it (cache-salt.ts), and usage asked for on every stream whose client did
 * not ask for it, whatever its `stream_options` said (src/proxy/stream-usage.ts, whose filter takes
 * the usage event back out of the answer). What the body's top level says (its completion budget,
 * the usage is later checked against in bill.ts, and whether it has `stream_options`) comes from
 * the edge, which parsed it (the dispatch's `bodyFields`); from an older edge, from one scan of
 * the body's top level (src/proxy/body-fields.ts), a look at each byte of a prompt of up to 4 MiB.
 */
import type { LoadedRegion } from "../config/load.ts";
import type { DispatchRequest } from "../contracts/region-service.ts";
import { fieldValue, topLevelFields, type Field } from "../proxy/body-fields.ts";
import { COMPLETION_BUDGET_KEYS, completionBudget } from "../proxy/completion-budget.ts";
import { STREAM_OPTIONS, requestStreamUsage } from "../proxy/stream-usage.ts";
import { engineCacheSalt, withCacheSalt } from "./cache-salt.ts";

/** The top-level keys read from a body, with and without usage to ask for. */
const BUDGET_KEYS: readonly string[] = COMPLETION_BUDGET_KEYS;
const USAGE_AND_BUDGET_KEYS: readonly string[] = [STREAM_OPTIONS, ...COMPLETION_BUDGET_KEYS];

/** A `stream_options` the edge said is absent: nothing to read, usage is added after the opening brace. */
const ABSENT: Field = { present: false };

/**
 * What the body's top level says: as the edge read it, or (an older edge) from one scan of its
 * bytes. `streamOptions` undefined: the body has one the edge did not read, and requestStreamUsage
 * reads it (a client's that says something else than `include_usage: true` is rare).
 */
function topLevel(request: DispatchRequest, clientBody: Uint8Array): { budget: number | undefined; streamOptions: Field | undefined } {
  const read = request.bodyFields;
  if (read) return { budget: read.completionBudget, streamOptions: read.hasStreamOptions ? undefined : ABSENT };
  const fields = topLevelFields(clientBody, request.askUsage ? USAGE_AND_BUDGET_KEYS : BUDGET_KEYS);
  return { budget: completionBudget((key) => fieldValue(fields, key)), streamOptions: fields.get(STREAM_OPTIONS) };
}

export async function nodeBody(
  region: LoadedRegion,
  request: DispatchRequest,
  clientBody: Uint8Array,
): Promise<{ body: Uint8Array; usageInjected: boolean; completionBudget: number | undefined }> {
  // The client's body has the same top-level keys as the node's but `cache_salt`, added below.
  const { budget, streamOptions } = topLevel(request, clientBody);
  let body = clientBody;
  if (region.config.engine_cache_isolation === "cache_salt") {
    const salt = await engineCacheSalt(request.cacheNamespace, request.clientCacheSalt);
    // Only a body with a `cache_salt` of its own is parsed again (to replace it): the rest get the
    // field added after the opening brace, every other byte as sent.
    const parsed = request.bodyHasCacheSalt ? (JSON.parse(new TextDecoder().decode(clientBody)) as Record<string, unknown>) : {};
    body = withCacheSalt(body, parsed, salt);
  }
  if (!request.askUsage) return { body, usageInjected: false, completionBudget: budget };
  // The edge said this stream's client did not ask for usage.
  const asked = requestStreamUsage(body, undefined, streamOptions);
  return { body: asked.body, usageInjected: asked.injected, completionBudget: budget };
}
