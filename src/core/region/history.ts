/**
 * The region's recent past, kept by the router so a dashboard is useful the moment it opens: per
 * time bucket, the requests routed and the tokens predicted and measured, region-wide and per
 * node. Bounded: a ring of {@link HISTORY_BUCKETS} buckets of {@link HISTORY_BUCKET_MS} (the last
 * hour at 10 s resolution), each holding at most {@link MAX_HISTORY_NODES} nodes. At 64 nodes a
 * full hour is about 360 x 64 x 5 numbers, ~1 MB; most regions hold far less.
 *
 * Requests are counted in the bucket they were routed in; tokens in the bucket their answer
 * completed in (a long answer's tokens all land at its end, which a 10 s bucket smooths for
 * anything but minute-long generations). Predicted cached tokens are counted at completion too,
 * and only for answers the node computed: a refused or failed request predicted nothing.
 */

/** Width of one history bucket: 10 s, the dashboard's resolution. */
export const HISTORY_BUCKET_MS = 10_000;
/** Buckets kept: 360 x 10 s, the last hour. */
export const HISTORY_BUCKETS = 360;
/** Nodes counted per bucket; a region larger than this counts its first nodes only. */
const MAX_HISTORY_NODES = 256;

/** One node's figures in a bucket. */
interface NodeHistory {
  routed: number;
  /** Prompt tokens the node reported computing (measured prompt minus cached). */
  prefillTokens: number;
  /** Cached prompt tokens it reported (prefill saved). */
  cachedTokens: number;
  /** Completion tokens it reported. */
  decodeTokens: number;
  failed: number;
}

export interface HistoryBucket {
  /** Bucket start, ms epoch (a multiple of the bucket width). */
  start: number;
  routed: number;
  /** Requests the region could not place (saturated or no node). */
  rejected: number;
  /** Router-estimated prompt tokens of computed answers, and how many of them it predicted cached. */
  promptTokens: number;
  predictedCachedTokens: number;
  /** From the nodes' usage: prompt tokens of answers that reported cached tokens, and those cached. */
  measuredPromptTokens: number;
  measuredCachedTokens: number;
  nodes: Record<string, NodeHistory>;
}

/** What a completed request adds to the history. */
interface CompletedSample {
  nodeId: string;
  /** The node computed the answer (not refused, not failed before it). */
  computed: boolean;
  failed: boolean;
  promptTokens: number;
  predictedCachedTokens: number;
  measured: { promptTokens: number; cachedTokens: number } | undefined;
  completionTokens: number;
}

export class RegionHistory {
  private readonly ring: Array<HistoryBucket | undefined> = new Array(HISTORY_BUCKETS);

  routed(nodeId: string, now: number): void {
    const b = this.bucket(now);
    b.routed++;
    const n = node(b, nodeId);
    if (n) n.routed++;
  }

  rejected(now: number): void {
    this.bucket(now).rejected++;
  }

  completed(s: CompletedSample, now: number): void {
    const b = this.bucket(now);
    const n = node(b, s.nodeId);
    if (s.failed && n) n.failed++;
    if (s.computed) {
      b.promptTokens += s.promptTokens;
      b.predictedCachedTokens += s.predictedCachedTokens;
    }
    if (n) n.decodeTokens += s.completionTokens;
    if (s.measured) {
      b.measuredPromptTokens += s.measured.promptTokens;
      b.measuredCachedTokens += s.measured.cachedTokens;
      if (n) {
        n.prefillTokens += Math.max(0, s.measured.promptTokens - s.measured.cachedTokens);
        n.cachedTokens += s.measured.cachedTokens;
      }
    }
  }

  /** The buckets of the last hour with anything in them, oldest first (empty intervals omitted). */
  buckets(now: number): HistoryBucket[] {
    const oldest = bucketStart(now) - (HISTORY_BUCKETS - 1) * HISTORY_BUCKET_MS;
    return this.ring.filter((b): b is HistoryBucket => b !== undefined && b.start >= oldest).sort((a, b) => a.start - b.start);
  }

  private bucket(now: number): HistoryBucket {
    const start = bucketStart(now);
    const slot = Math.floor(start / HISTORY_BUCKET_MS) % HISTORY_BUCKETS;
    let b = this.ring[slot];
    // A slot still holding an older bucket (an hour ago, or before a quiet spell) is reused.
    if (b === undefined || b.start !== start) {
      b = {
        start,
        routed: 0,
        rejected: 0,
        promptTokens: 0,
        predictedCachedTokens: 0,
        measuredPromptTokens: 0,
        measuredCachedTokens: 0,
        nodes: {},
      };
      this.ring[slot] = b;
    }
    return b;
  }
}

function bucketStart(now: number): number {
  return now - (((now % HISTORY_BUCKET_MS) + HISTORY_BUCKET_MS) % HISTORY_BUCKET_MS);
}

function node(b: HistoryBucket, nodeId: string): NodeHistory | undefined {
  // Own keys only: a node may be named `constructor`, which every object inherits.
  let n = Object.hasOwn(b.nodes, nodeId) ? b.nodes[nodeId] : undefined;
  if (n === undefined) {
    if (Object.keys(b.nodes).length >= MAX_HISTORY_NODES) return undefined;
    b.nodes[nodeId] = n = { routed: 0, prefillTokens: 0, cachedTokens: 0, decodeTokens: 0, failed: 0 };
  }
  return n;
}
