/**
 * The region init contract: everything the region Durable Object needs to (re)build its router,
 * sent by the worker with every call and stored by the object. It lives with the object that
 * consumes it; the worker's configuration loader produces it.
 */
import { z } from "zod";
import { nodeEngineSchema, nodeIdSchema, nodeModelsSchema, nodeUrlSchema } from "./node.ts";
import { regionSettingsSchema } from "../core/region/index.ts";
import { MAX_RETENTION_DAYS } from "../config/usage-schema.ts";

/** A node declared in configuration: it needs no reports and never expires by silence. */
const staticNodeInitSchema = z.strictObject({
  id: nodeIdSchema,
  url: nodeUrlSchema,
  models: nodeModelsSchema,
  kvCapacityTokens: z.number().int().positive(),
  engine: nodeEngineSchema.optional(),
});

/** How the object keeps its usage ledger (configuration `usage`, src/config/usage-schema.ts). */
const usageInitSchema = z.strictObject({
  flushIntervalMs: z.number().int().min(100).max(60_000),
  retentionDays: z.number().int().min(1).max(MAX_RETENTION_DAYS),
  /** The region whose worker's namespace holds the budget ledger (the first configured region). */
  ledgerRegion: z.string().min(1).max(64),
});
export type UsageInit = z.infer<typeof usageInitSchema>;

export const regionInitSchema = z.strictObject({
  /** Changes whenever any field below changes. */
  fingerprint: z.string().min(1),
  settings: regionSettingsSchema,
  staticNodes: z.array(staticNodeInitSchema),
  usage: usageInitSchema,
});

export type RegionInit = z.infer<typeof regionInitSchema>;
