/**
 * The admin API's answers (`GET /admin/state`, `/admin/state/{region}`, `/admin/history`), and what
 * a region worker answers the edge for them (`/region/v1/{region}/state`, `/history`): one zod
 * contract, with the types derived from it, that the edge parses at its boundary with the region
 * worker (src/edge/api/admin.ts) and every reader of the admin API uses (the demo, the fault suite,
 * the llama.cpp end to end, the tests); the dashboard (public/dashboard/, plain JavaScript) reads
 * the same fields. test/contracts/admin.test.ts checks the region's own types and these agree, so
 * neither can drift from the other.
 *
 * Unknown keys are dropped, not refused: a newer region worker may add a field during a deploy,
 * and a reader must still read the fields it knows (the edge serves what this contract knows).
 */
import { z } from "zod";
import { consideredSchema, decisionSchema, failureReasonSchema, completionOutcomeSchema, priorityClassSchema } from "./routing.ts";

const count = z.number().min(0);

const nodeMetricsSchema = z.object({
  routed: count,
  decisions: z.record(z.string(), count),
  completed: count,
  failed: count,
  failures: z.record(failureReasonSchema, count),
  cooldowns: count,
  refused: count,
  streamErrors: count,
  cancelled: count,
  promptTokens: count,
  predictedCachedTokens: count,
  measuredRequests: count,
  measuredPromptTokens: count,
  measuredCachedTokens: count,
  completionTokens: count,
  compared: count,
  agreed: count,
  corrections: count,
  correctedBlocks: count,
  silentRestarts: count,
  firstByteMsSum: count,
  firstByteCount: count,
  firstByteHistogram: z.array(count),
  durationHistogram: z.array(count),
  durationMsSum: count,
  matchedBlocksHistogram: z.array(count),
  matchedBlocksSum: count,
});

const loadReportSchema = z.object({ running: count, waiting: count, kvUsage: z.number(), at: z.number() });

const snapshotNodeSchema = z.object({
  id: z.string(),
  url: z.string(),
  models: z.array(z.string()),
  engine: z.string(),
  maxRunning: count.optional(),
  kvCapacityTokens: count,
  static: z.boolean(),
  available: z.boolean(),
  lastSeenMsAgo: count,
  cooldownMs: count,
  consecutiveFailures: count,
  breaker: z.enum(["closed", "open", "half-open"]),
  load: z.object({
    inflight: count,
    prefilling: count,
    workAheadTokens: count,
    prefillTokensPerSecond: count,
    decodeMsMean: count.optional(),
    slotWaitMs: count,
    report: loadReportSchema.extend({ ageMs: count }).optional(),
  }),
  indexBlocks: count,
  metrics: nodeMetricsSchema,
});

const tenantCountersSchema = z.object({
  requests: count,
  promptTokens: z.number(),
  predictedCachedTokens: z.number(),
  measuredPromptTokens: count,
  measuredCachedTokens: count,
  completionTokens: count,
});

const classGoodputSchema = z.object({
  placed: count,
  within: count,
  late: count,
  shed: z.object({ objective: count, deadline: count, "queue-full": count }),
  queued: count,
  queuedMs: count,
});

/** GoodputCounters (src/core/region/goodput-counters.ts). */
const goodputCountersSchema = z.object({
  classes: z.object({ interactive: classGoodputSchema, standard: classGoodputSchema, batch: classGoodputSchema }),
  tenants: z.record(
    z.string(),
    z.object({
      within: count,
      late: count,
      shed: count,
      /** Absent from a region older than commitments; `growth` from one older than tenant-growth.ts. */
      demoted: z.object({ share: count, commitment: count, growth: count.optional() }).optional(),
    }),
  ),
});

/** One region's state, as its worker answers (its shards' merged). */
export const regionSnapshotSchema = z.object({
  region: z.string(),
  policy: z.string(),
  at: z.number(),
  nodes: z.array(snapshotNodeSchema),
  index: z.object({ entries: count, distinctBlocks: count, capacity: count, evictions: count }),
  inflight: count,
  sessions: count,
  /** `shed`: absent from a region older than admission. */
  rejected: z.object({ saturated: count, noNode: count, overShare: count, rateLimited: count, overBudget: count, shed: count.optional() }),
  retries: count,
  failovers: z.record(z.string(), count),
  /** By `reason:outcome` (src/contracts/routing.ts continuationOutcomeSchema). */
  continuations: z.record(z.string(), count),
  tenants: z.record(z.string(), tenantCountersSchema),
  /** Admission (docs/ADMISSION.md): answers within objective, late and shed, by class and tenant. Absent from a region older than admission. */
  goodput: goodputCountersSchema.optional(),
  /** The region's queue: requests waiting by class (interactive, standard, batch) and the prompt blocks they hold. */
  queue: z.object({ depth: z.array(count), blocks: count }).optional(),
  /** Objects merged (a sharded region's shards). */
  shards: z.number().int().min(1).optional(),
});
export type RegionSnapshotAnswer = z.infer<typeof regionSnapshotSchema>;

/** `GET /admin/state/{region}`: the region's state, with where it is and what it serves. */
export const adminRegionStateSchema = regionSnapshotSchema.extend({
  location: z.object({ lat: z.number(), lon: z.number(), continent: z.string().optional() }),
  models: z.array(z.string()),
});
export type AdminRegionState = z.infer<typeof adminRegionStateSchema>;

/** `GET /admin/state`: every region. */
export const adminStateSchema = z.object({ at: z.number(), regions: z.array(adminRegionStateSchema) });
export type AdminState = z.infer<typeof adminStateSchema>;

const nodeHistorySchema = z.object({
  routed: count,
  prefillTokens: count,
  cachedTokens: count,
  decodeTokens: count,
  failed: count,
});

const historyBucketSchema = z.object({
  start: z.number(),
  routed: count,
  rejected: count,
  promptTokens: z.number(),
  predictedCachedTokens: z.number(),
  measuredPromptTokens: count,
  measuredCachedTokens: count,
  nodes: z.record(z.string(), nodeHistorySchema),
});

const decisionRecordSchema = z.object({
  at: z.number(),
  requestId: z.string(),
  tenant: z.string().nullable(),
  model: z.string(),
  node: z.string().nullable(),
  decision: z.union([decisionSchema, z.enum(["saturated", "no-node", "over-share", "rate-limited", "over-budget", "shed"])]),
  matchBlocks: count,
  totalBlocks: count,
  promptTokens: count,
  predictedCachedTokens: count,
  estimatedTtftMs: count.nullable(),
  considered: z.array(consideredSchema),
  status: z.union([completionOutcomeSchema.shape.status, z.enum(["in-flight", "rejected"])]),
  firstByteMs: count.nullable(),
  /** Absent from a region older than the field. */
  firstByteKind: z.enum(["stream", "whole"]).nullable().optional(),
  durationMs: count.nullable(),
  measuredPromptTokens: count.nullable(),
  measuredCachedTokens: count.nullable(),
  /** Its class, objective (ms; 0: admission off) and time queued (ms); absent from a region older than admission. */
  priority: priorityClassSchema.optional(),
  objectiveMs: count.optional(),
  queuedMs: count.optional(),
});

/** One region's last hour and recent decisions, as its worker answers. */
export const regionHistorySchema = z.object({
  region: z.string(),
  at: z.number(),
  bucketMs: z.number().positive(),
  buckets: z.array(historyBucketSchema),
  decisions: z.array(decisionRecordSchema),
});
export type RegionHistoryAnswer = z.infer<typeof regionHistorySchema>;

/** `GET /admin/history`: every region's. */
export const adminHistorySchema = z.object({ at: z.number(), regions: z.array(regionHistorySchema) });
