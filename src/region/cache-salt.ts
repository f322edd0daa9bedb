/**
 * Engine-level cache isolation: the tenant's cache namespace, carried to the engine as
 * `cache_salt`, so identical prompts of two tenants never share KV blocks on a node.
 *
 * The router's own index is partitioned by namespace (src/core/canonical.ts), but an engine's
 * prefix cache is not unless the request says so: forwarded unchanged, tenant B's first request
 * for tenant A's prompt is a cache hit on the node, visible in `cached_tokens` and in its time to
 * first token (a published side channel: Gu et al., "Auditing Prompt Caching in Language Model
 * APIs", arXiv:2502.07776, 2025). Engines that partition by a per-request salt:
 * - vLLM: `cache_salt` on /v1/chat/completions, /v1/completions, /v1/responses (and /v1/messages
 *   since PR #49498, 2026-07), folded into the first block's hash, so every later block differs
 *   too (vllm/v1/core/kv_cache_utils.py, generate_block_hash_extra_keys). Validated as a non-empty
 *   string of at most 128 characters without `@ / \` or NUL (PR #51444, 2026-09).
 * - SGLang: `cache_salt` on its OpenAI-compatible requests, part of the radix tree's key
 *   (python/sglang/srt/mem_cache/radix_cache.py, RadixKey extra_key; effective from PR #23300,
 *   2026-04: before it the salt never reached the scheduler).
 * - llama.cpp's server has no salt (v0.4.0, as shipped by node-llama-cpp 3.21.1): its nodes are
 *   isolated by dedicating them to tenants (`regions[].node_tenants`), not by this.
 *
 * The salt is 32 hex characters of SHA-256 over the namespace and the client's own `cache_salt`:
 * a client may partition its namespace further, never reach into another's (whatever it sends is
 * replaced), and the value passes every engine's validation. Namespaces declared shared
 * (`shared_namespaces`) get one salt, so their tenants do share blocks, as they asked.
 */

import { concatBytes } from "../http/body.ts";
import { bytesToHex } from "../core/hex.ts";

/** Domain separation: a salt of this scheme never equals another use of the same hash. */
const SALT_CONTEXT = "warmpath-cache-salt-v1";
/** 128 bits: collisions between namespaces are out of reach; well under vLLM's 128-character bound. */
const SALT_HEX_CHARS = 32;
const OPEN_BRACE = 0x7b;

/**
 * Salts of namespaces without a client salt, by namespace: computed once per isolate rather than
 * per request (a SHA-256 through WebCrypto was 1.3% of the worker's CPU per request, bench/e2e's profile at 43f19cc).
 * Bounded: one entry per tenant and shared namespace in the configuration, so at most a few
 * thousand; cleared past SALT_CACHE_MAX, never a promise (only the computed string).
 */
const saltCache = new Map<string, string>();
const SALT_CACHE_MAX = 10_000;

/** The engine salt of a cache namespace (`tenant:acme`, `shared:commons`) and the client's own salt. */
export async function engineCacheSalt(namespace: string, clientSalt: string | undefined): Promise<string> {
  const cached = clientSalt === undefined ? saltCache.get(namespace) : undefined;
  if (cached !== undefined) return cached;
  const data = new TextEncoder().encode(`${SALT_CONTEXT}\u0000${namespace}\u0000${clientSalt ?? ""}`);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  const salt = bytesToHex(digest).slice(0, SALT_HEX_CHARS);
  if (clientSalt === undefined) {
    if (saltCache.size >= SALT_CACHE_MAX) saltCache.clear();
    saltCache.set(namespace, salt);
  }
  return salt;
}

/**
 * The body with `cache_salt` set to `salt`. Without a `cache_salt` of the client's, the field is
 * added right after the opening brace and every other byte is forwarded as sent; with one, the
 * body is serialised again from `parsed` with it replaced (the client's salt is already part of
 * `salt`), since a duplicate key would be read differently by different engines' JSON parsers.
 */
export function withCacheSalt(raw: Uint8Array, parsed: Record<string, unknown>, salt: string): Uint8Array {
  if (Object.hasOwn(parsed, "cache_salt")) return new TextEncoder().encode(JSON.stringify({ ...parsed, cache_salt: salt }));
  let at = 0;
  while (at < raw.length && raw[at] !== OPEN_BRACE) at++;
  if (at >= raw.length) return raw;
  // A body of only `{}` takes no trailing comma.
  let next = at + 1;
  while (next < raw.length && (raw[next] === 0x20 || raw[next] === 0x0a || raw[next] === 0x0d || raw[next] === 0x09)) next++;
  const field = new TextEncoder().encode(`"cache_salt":"${salt}"${raw[next] === 0x7d ? "" : ","}`);
  return concatBytes([raw.subarray(0, at + 1), field, raw.subarray(at + 1)]);
}
