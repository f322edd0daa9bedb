/** The region router module: one region's routing state machine and the types around it. */
export { RegionRouter } from "./router.ts";
export type { RegionHistoryView, TenantCounters } from "./ledger.ts";
export { DEFAULT_REGION_SETTINGS, regionSettingsSchema, type RegionSettings } from "./settings.ts";
export type { NodeSpec } from "./node-table.ts";
export { LATENCY_BUCKETS_MS, MATCHED_BLOCKS_BUCKETS, type NodeMetrics } from "./metrics.ts";
export type { RegionSnapshot } from "./snapshot.ts";
export { HISTORY_BUCKET_MS, HISTORY_BUCKETS, type HistoryBucket } from "./history.ts";
export type { DecisionRecord } from "./recent-decisions.ts";
