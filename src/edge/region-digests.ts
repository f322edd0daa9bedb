/**
 * The edge's copy of each region's long-prefix digest (src/core/region/long-prefixes.ts), for the
 * cross-region choice (src/core/warm-region.ts).
 *
 * A short-lived cache the worker can lose: an isolate without a digest simply routes
 * nearest-first. A request that finds a region's digest missing or older than DIGEST_TTL_MS asks
 * the region for a fresh one after it has answered (`waitUntil`), so no request waits for a
 * digest, and an isolate asks each region at most once per DIGEST_TTL_MS. The cache holds data
 * only, never a promise: a promise made by one request and awaited by another is something
 * workerd cancels as hung.
 */
import type { RequestContext } from "./api/request-context.ts";
import type { LoadedRegion } from "../config/load.ts";
import { regionPath } from "../contracts/region-service.ts";
import type { RegionDigest } from "../core/region/long-prefixes.ts";
import { DIGEST_TTL_MS } from "../core/warm-region.ts";
import { regionJson } from "./region-client.ts";

/** A refresh not back after this long (its request's isolate went away) may be started again. */
const REFRESH_STALE_MS = 30_000;

interface Cached {
  hashes: Map<string, number>;
  prefillTokensPerSecond: number;
  fetchedAt: number;
  refreshingSince: number | undefined;
}

const cache = new Map<string, Cached>();

/** The region's digest as the edge last saw it (hash -> tokens), or undefined. */
export function cachedDigest(region: string): { hashes: ReadonlyMap<string, number>; prefillTokensPerSecond: number } | undefined {
  const c = cache.get(region);
  // A placeholder for a first refresh under way, or a region with no rate to price its prefixes by.
  return c && Number.isFinite(c.fetchedAt) && c.prefillTokensPerSecond > 0 ? c : undefined;
}

/** Merges a region's shards' digests (each shard holds its own prompts) into the cache. */
function storeDigest(region: string, digests: readonly RegionDigest[], now: number): void {
  const hashes = new Map<string, number>();
  let rate = 0;
  for (const d of digests) {
    rate += d.prefillTokensPerSecond;
    for (const e of d.entries) hashes.set(e.hash, Math.max(e.tokens, hashes.get(e.hash) ?? 0));
  }
  cache.set(region, {
    hashes,
    prefillTokensPerSecond: digests.length ? rate / digests.length : 0,
    fetchedAt: now,
    refreshingSince: undefined,
  });
}

/** Asks, after the response, for the digests of `regions` that are missing or stale. */
export function refreshDigests(rc: RequestContext, regions: readonly LoadedRegion[], now: number): void {
  for (const region of regions) {
    const name = region.config.name;
    const have = cache.get(name);
    if (have && now - have.fetchedAt < DIGEST_TTL_MS) continue;
    if (have?.refreshingSince !== undefined && now - have.refreshingSince < REFRESH_STALE_MS) continue;
    if (have) have.refreshingSince = now;
    else cache.set(name, { hashes: new Map(), prefillTokensPerSecond: 0, fetchedAt: -Infinity, refreshingSince: now });
    const asked = regionJson<RegionDigest[]>(rc.env, region, regionPath.digest(name));
    rc.ctx.waitUntil(
      asked.then(
        (digests) => storeDigest(name, digests, Date.now()),
        (e: unknown) => {
          const entry = cache.get(name);
          if (entry) entry.refreshingSince = undefined;
          console.error(JSON.stringify({ event: "region_digest_error", region: name, message: String(e) }));
        },
      ),
    );
  }
}
