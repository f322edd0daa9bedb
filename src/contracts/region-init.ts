/**
 * The region init contract: everything the region Durable Object needs to (re)build its router,
 * stored by the object. It lives with the object that consumes it; the worker's configuration
 * loader produces it, with its {@link regionInitFingerprint}.
 *
 * A `route` call (one per request) carries only the fingerprint ({@link RegionInitRef}, ~30 bytes):
 * the whole init is ~1.4 KB of settings, and its fingerprint was once the same settings' JSON
 * again: Workers RPC cloned both on every call, the largest JavaScript item of the route call's
 * CPU profile (bench/wan, --one-process). The object answers a fingerprint it does not hold (its first call, a new
 * configuration, a stored init this version no longer accepts) with `initNeeded`
 * (region-object.ts), and the worker calls again once with the whole init. The object's other
 * methods (reports, snapshots, usage) are not per request and still carry the whole init.
 */
import { z } from "zod";
import { hashBlock, hashToHex, seedHash } from "../core/hash.ts";
import { nodeEngineSchema, nodeIdSchema, nodeMaxRunningSchema, nodeModelsSchema, nodeUrlSchema } from "./node.ts";
import { regionSettingsSchema } from "../core/region/index.ts";
import { MAX_RETENTION_DAYS } from "../config/usage-schema.ts";

/** A node declared in configuration: it needs no reports and never expires by silence. */
const staticNodeInitSchema = z.strictObject({
  id: nodeIdSchema,
  url: nodeUrlSchema,
  models: nodeModelsSchema,
  kvCapacityTokens: z.number().int().positive(),
  engine: nodeEngineSchema.optional(),
  maxRunning: nodeMaxRunningSchema.optional(),
});

/** How the object keeps its usage ledger (configuration `usage`, src/config/usage-schema.ts). */
const usageInitSchema = z.strictObject({
  flushIntervalMs: z.number().int().min(100).max(60_000),
  retentionDays: z.number().int().min(1).max(MAX_RETENTION_DAYS),
  /** The region whose worker's namespace holds the budget ledger (the first configured region). */
  ledgerRegion: z.string().min(1).max(64),
});
export type UsageInit = z.infer<typeof usageInitSchema>;

/**
 * The longest fingerprint: {@link regionInitFingerprint}'s are 16 hex digits, a dash and the
 * length in base 36. An init stored before fingerprints were hashed (the whole settings JSON, ~1.4
 * KB) fails this bound and is dropped when the object starts: the next call's fingerprint is then
 * unknown to it, and the worker sends the init again.
 */
export const MAX_FINGERPRINT_CHARS = 64;
const fingerprintSchema = z.string().min(1).max(MAX_FINGERPRINT_CHARS);

export const regionInitSchema = z.strictObject({
  /** Changes whenever any field below but `generation` changes ({@link regionInitFingerprint}). */
  fingerprint: fingerprintSchema,
  /**
   * When the worker version sending it was uploaded (ms epoch; its version metadata binding,
   * VERSION_METADATA_BINDING), if it has one: while two versions run at once, the object keeps the
   * newer one's init (durable-objects/init-order.ts). Not in the fingerprint: a version that only
   * changed code sends the same init.
   */
  generation: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  settings: regionSettingsSchema,
  staticNodes: z.array(staticNodeInitSchema),
  usage: usageInitSchema,
});

export type RegionInit = z.infer<typeof regionInitSchema>;

/** What a `route` call carries when the object already holds the init: its fingerprint only. */
export const regionInitRefSchema = z.strictObject({ fingerprint: fingerprintSchema });
export type RegionInitRef = z.infer<typeof regionInitRefSchema>;

/** Namespaces the fingerprint's hash apart from the prompt hashes the same function makes. */
const FINGERPRINT_SEED = seedHash("warmpath:region-init");

/**
 * The fingerprint of an init's content: a 64-bit hash (src/core/hash.ts) of its JSON and the
 * JSON's length, computed once when the configuration is loaded. Two configurations an operator
 * deploys collide with a probability around 2^-64; the hash is not cryptographic, and need not be:
 * the worker and the object trust each other, the fingerprint only tells a configuration changed.
 */
export function regionInitFingerprint(content: Omit<RegionInit, "fingerprint">): string {
  const json = JSON.stringify([content.settings, content.staticNodes, content.usage]);
  return `${hashToHex(hashBlock(FINGERPRINT_SEED, json, 0, json.length))}-${json.length.toString(36)}`;
}
