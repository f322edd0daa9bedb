/**
 * A sharded region's views merged into one (src/core/shard.ts): operators, the dashboard and the
 * Prometheus endpoint see a region, whatever the number of objects it is split over.
 *
 * Counters (requests, tokens, failures, per-tenant and per-node figures) add up: each request is
 * counted by the one shard that decided it. A node's identity, breaker and last report are shard
 * 0's (every shard has every node: the region's exchange hands each report to all of them); its
 * requests in flight add up; its modelled work ahead is the largest shard's estimate (each already
 * includes the others' shared load).
 */
import type { RegionHistoryView } from "./ledger.ts";
import type { HistoryBucket } from "./history.ts";
import type { RegionSnapshot } from "./snapshot.ts";
import { RECENT_DECISIONS } from "./recent-decisions.ts";

/**
 * Adds every number of `b` into a copy of `a`, recursively through plain objects and arrays (a
 * histogram adds bucket by bucket); other values are `a`'s (or `b`'s where `a` has none).
 */
export function addCounters<T>(a: T, b: T): T {
  if (typeof a === "number" && typeof b === "number") return (a + b) as T;
  // Histograms: bucket by bucket.
  if (Array.isArray(a) && Array.isArray(b)) return a.map((v: unknown, i) => (i < b.length ? addCounters(v, b[i]) : v)) as T;
  if (!isPlainObject(a) || !isPlainObject(b)) return a === undefined ? b : a;
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = k in out ? addCounters(out[k], v) : v;
  return out as T;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** One region's snapshot from its shards' (shard 0 first), with how many there are. */
export function mergeSnapshots(shards: readonly RegionSnapshot[]): RegionSnapshot & { shards: number } {
  const [first, ...rest] = shards;
  if (!first) throw new Error("mergeSnapshots needs at least one snapshot");
  const nodes = new Map(first.nodes.map((n) => [n.id, structuredClone(n)]));
  let merged: RegionSnapshot = { ...first };
  // Each shard measures its own answers' hold: a node's is the mean of those the shards measured.
  const holds = new Map<string, number[]>();
  const addHold = (n: RegionSnapshot["nodes"][number]) => {
    if (n.load.decodeMsMean === undefined) return;
    const h = holds.get(n.id);
    if (h) h.push(n.load.decodeMsMean);
    else holds.set(n.id, [n.load.decodeMsMean]);
  };
  first.nodes.forEach(addHold);
  for (const s of rest) {
    for (const n of s.nodes) {
      addHold(n);
      const have = nodes.get(n.id);
      if (!have) {
        nodes.set(n.id, structuredClone(n));
        continue;
      }
      have.load.inflight += n.load.inflight;
      have.load.prefilling += n.load.prefilling;
      have.load.workAheadTokens = Math.max(have.load.workAheadTokens, n.load.workAheadTokens);
      // Each shard's wait for a place already counts the others' requests (the load exchange): the
      // longest is the latest view.
      have.load.slotWaitMs = Math.max(have.load.slotWaitMs, n.load.slotWaitMs);
      have.indexBlocks += n.indexBlocks;
      have.metrics = addCounters(have.metrics, n.metrics);
    }
    merged = {
      ...merged,
      index: addCounters(merged.index, s.index),
      inflight: merged.inflight + s.inflight,
      sessions: merged.sessions + s.sessions,
      rejected: addCounters(merged.rejected, s.rejected),
      retries: merged.retries + s.retries,
      failovers: addCounters(merged.failovers, s.failovers),
      continuations: addCounters(merged.continuations, s.continuations),
      tenants: addCounters(merged.tenants, s.tenants),
      goodput: addCounters(merged.goodput, s.goodput),
      queue: addCounters(merged.queue, s.queue),
    };
  }
  for (const [id, h] of holds) nodes.get(id)!.load.decodeMsMean = Math.round(h.reduce((a, b) => a + b, 0) / h.length);
  return { ...merged, nodes: [...nodes.values()].sort((a, b) => (a.id < b.id ? -1 : 1)), shards: shards.length };
}

/** One region's history from its shards': buckets added by start, decisions interleaved newest first. */
export function mergeHistories(shards: readonly RegionHistoryView[]): RegionHistoryView {
  const [first, ...rest] = shards;
  if (!first) throw new Error("mergeHistories needs at least one history");
  if (rest.length === 0) return first;
  const buckets = new Map<number, HistoryBucket>();
  for (const view of shards) {
    for (const b of view.buckets) {
      const have = buckets.get(b.start);
      buckets.set(b.start, have ? { ...addCounters(have, b), start: b.start } : b);
    }
  }
  // The region shows as many of the newest decisions as one object keeps.
  const decisions = shards
    .flatMap((v) => v.decisions)
    .sort((a, b) => b.at - a.at)
    .slice(0, RECENT_DECISIONS);
  return { ...first, buckets: [...buckets.values()].sort((a, b) => a.start - b.start), decisions };
}
