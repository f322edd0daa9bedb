/**
 * The region's state as operators and the dashboard see it (GET state API): everything needed to
 * see why requests went where they did. A read-only view, built on demand, never per request.
 */
import type { LoadReport } from "../node-load.ts";
import type { PrefixIndex } from "../prefix-index.ts";
import type { LedgerCounters } from "./ledger.ts";
import type { NodeMetrics } from "./metrics.ts";
import type { BreakerState, NodeTable } from "./node-table.ts";

export interface RegionSnapshot extends LedgerCounters {
  region: string;
  policy: string;
  at: number;
  nodes: Array<{
    id: string;
    url: string;
    models: string[];
    kvCapacityTokens: number;
    /** Its engine as reported or configured (`other` when it said none): where a stream may be continued. */
    engine: string;
    /** The most requests it runs at once, as configured or reported (node-load.ts slotWaitMs); absent: not said. */
    maxRunning?: number | undefined;
    static: boolean;
    available: boolean;
    lastSeenMsAgo: number;
    cooldownMs: number;
    consecutiveFailures: number;
    /** Its circuit breaker (node-table.ts): closed, open (cooling down) or half-open (one trial request). */
    breaker: BreakerState;
    load: {
      inflight: number;
      prefilling: number;
      workAheadTokens: number;
      prefillTokensPerSecond: number;
      /** How long its requests ran after their first byte, on average (ms); absent before one completed. */
      decodeMsMean?: number | undefined;
      /** The modelled wait for a place among its running requests (ms): 0 unless `maxRunning` are in flight. */
      slotWaitMs: number;
      report: (LoadReport & { ageMs: number }) | undefined;
    };
    indexBlocks: number;
    metrics: NodeMetrics;
  }>;
  /** Entries, distinct blocks, the hard cap, and entries evicted for capacity so far. */
  index: { entries: number; distinctBlocks: number; capacity: number; evictions: number };
  inflight: number;
  sessions: number;
  /** The region's queue (admission-queue.ts): requests waiting by class (interactive, standard, batch) and the prompt blocks they hold. */
  queue: { depth: number[]; blocks: number };
}

interface SnapshotSource {
  region: string;
  policy: string;
  table: NodeTable;
  index: PrefixIndex;
  /** Requests in flight (tickets held). */
  inflight: number;
  sessions: number;
  ledger: LedgerCounters;
  queue: RegionSnapshot["queue"];
}

export function buildSnapshot(s: SnapshotSource, now: number): RegionSnapshot {
  const nodes = [...s.table.values()]
    .sort((a, b) => (a.spec.id < b.spec.id ? -1 : 1))
    .map((n) => ({
      id: n.spec.id,
      url: n.spec.url,
      models: n.spec.models,
      engine: n.spec.engine ?? "other",
      ...(n.spec.maxRunning === undefined ? {} : { maxRunning: n.spec.maxRunning }),
      kvCapacityTokens: n.spec.kvCapacityTokens,
      static: n.spec.static,
      available: s.table.isAvailable(n, now),
      lastSeenMsAgo: Math.max(0, now - n.spec.lastSeen),
      cooldownMs: Math.max(0, n.cooldownUntil - now),
      consecutiveFailures: n.consecutiveFailures,
      breaker: s.table.breakerAt(n, now),
      load: {
        inflight: n.load.inflight,
        prefilling: n.load.prefilling,
        workAheadTokens: Math.round(n.load.workAhead(now)),
        prefillTokensPerSecond: Math.round(n.load.prefillRate),
        ...(n.load.meanDecodeMs === undefined ? {} : { decodeMsMean: Math.round(n.load.meanDecodeMs) }),
        slotWaitMs: Math.round(n.load.slotWaitMs()),
        report: n.load.lastReport ? { ...n.load.lastReport, ageMs: Math.max(0, now - n.load.lastReport.at) } : undefined,
      },
      indexBlocks: s.index.blocksOf(n.spec.id),
      metrics: n.metrics,
    }));
  return {
    region: s.region,
    policy: s.policy,
    at: now,
    nodes,
    index: { entries: s.index.size, distinctBlocks: s.index.distinctBlocks, capacity: s.index.capacity, evictions: s.index.evictions },
    inflight: s.inflight,
    sessions: s.sessions,
    queue: s.queue,
    ...s.ledger,
  };
}
