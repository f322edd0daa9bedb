/**
 * A region router's settings: the contract the worker's configuration produces and the region
 * Durable Object validates (inside its init, src/contracts/region-init.ts), and their defaults.
 */
import { z } from "zod";
import { parsePolicySpec, policySpecSchema } from "../policies/index.ts";
import { DEFAULT_MAX_INDEX_ENTRIES } from "../prefix-index.ts";
import { MAX_SHARDS } from "../shard.ts";
import { admissionSettingsSchema, DEFAULT_ADMISSION } from "./admission-settings.ts";

/** Settings of one region's router. See the configuration reference for defaults. */
export const regionSettingsSchema = z.strictObject({
  name: z.string().min(1).max(64),
  policy: policySpecSchema,
  /** A reporting node that has been silent this long leaves the region. Default 15,000 ms. */
  nodeSilenceMs: z.number().int().positive(),
  /** Prefill throughput assumed for a node until it is measured, tokens/s. Default 10,000. */
  prefillTokensPerSecond: z.number().positive(),
  /** A node with this many requests in flight from this router takes no more. Default 256. */
  maxInflightPerNode: z.number().int().positive(),
  /** When every node's estimated wait exceeds this, the region is saturated. Default 30 s. */
  maxQueueSeconds: z.number().positive(),
  /** First cool-down after a node fails a request; doubles per consecutive failure, capped at 60 s. Default 2,000 ms. */
  failureCooldownMs: z.number().int().min(0),
  /** An in-flight request not completed after this long is released (its worker was lost). Default 600,000 ms. */
  requestTimeoutMs: z.number().int().positive(),
  /**
   * The short queue a tenant may build (s at the region's rate, shared by weight): past its share
   * of it a tenant keeps off the nodes held for the others, and past this wait on its own nodes a
   * tenant over 1.5x its share of the recent prefill is refused here (fair-share.ts). Default
   * 0.5 s; the full demo (docs/demo.md) refuses none; its quick run, one sticky request in 400.
   */
  fairShareWaitSeconds: z.number().positive(),
  /** Hard cap on prefix index entries (at most about 50 bytes each, src/core/prefix-index.ts). Default 262,144. */
  maxIndexEntries: z.number().int().positive(),
  /** Session hints remembered. Default 100,000. */
  maxSessions: z.number().int().min(0),
  /** Tokens per prefix block (block characters / characters per token). */
  blockTokens: z.number().positive(),
  /** Seed for policies that draw at random. */
  seed: z.number().int(),
  /**
   * Correct the prefix index from the cached tokens nodes report (usage-evidence.ts learnFromUsage).
   * Always on in a deployment; the benchmark turns it off to measure what it is worth.
   */
  learnFromUsage: z.boolean(),
  /** Nodes dedicated to tenants (node id -> tenant ids): only those tenants are sent there. Default none. */
  nodeTenants: z.record(z.string(), z.array(z.string())),
  /** Objects the region's routing is split over, by the prompt's first block (src/core/shard.ts). Default 1. */
  shards: z.number().int().min(1).max(MAX_SHARDS),
  /** A shard's least believed part of a node's cache (RegionRouter.shareForeignLoad). Default {@link DEFAULT_MIN_CACHE_SHARE}. */
  minCacheShare: z.number().min(0).max(1),
  /** Admission by objective and the region's queue (admission.ts, docs/ADMISSION.md). */
  admission: admissionSettingsSchema,
});

export type RegionSettings = z.infer<typeof regionSettingsSchema>;

/**
 * The least part of a node's cache a shard believes its own, whatever its share of the node's
 * recent prefill. Shrinking the index forgets blocks at once, and forgetting a prefix the node
 * still holds costs a full prefill elsewhere, while believing one it lost costs one miss that the
 * answer's usage corrects; and the share, a 60-s average, is noisy for a shard sending a node
 * little. bench/SHARDS.md sweeps it: 0.1 is the lowest floor that keeps every workload's mean
 * TTFT within 5% of the single object's (0.05 forgets too eagerly: agentic 1.12x); higher floors
 * drift back towards believing the whole cache (chat-heavy 1.05x at 0.3, 1.06x at 1).
 */
const DEFAULT_MIN_CACHE_SHARE = 0.1;

export const DEFAULT_REGION_SETTINGS: Omit<RegionSettings, "name" | "blockTokens"> = {
  policy: parsePolicySpec({ name: "warmpath" }),
  nodeSilenceMs: 15_000,
  prefillTokensPerSecond: 10_000,
  maxInflightPerNode: 256,
  maxQueueSeconds: 30,
  fairShareWaitSeconds: 0.5,
  failureCooldownMs: 2_000,
  requestTimeoutMs: 600_000,
  maxIndexEntries: DEFAULT_MAX_INDEX_ENTRIES,
  maxSessions: 100_000,
  seed: 1,
  learnFromUsage: true,
  nodeTenants: {},
  shards: 1,
  minCacheShare: DEFAULT_MIN_CACHE_SHARE,
  admission: DEFAULT_ADMISSION,
};
