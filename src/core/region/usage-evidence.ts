/**
 * What a node's answer says about its cache: the cached tokens it reports against what the
 * prefix index predicted for the request (tickets.ts, on a completion with usage). No I/O: it
 * corrects the index and the node's counters it is given, and drops claims through its context.
 */
import { BLOCK_HASH_CHARS } from "../../contracts/block-hashes.ts";
import type { PrefixIndex } from "../prefix-index.ts";
import { baseBlocksBefore } from "../block-layout.ts";
import { ENGINE_BLOCK_ALLOWANCE_TOKENS, compareShares } from "./agreement.ts";
import { countAgreement } from "./metrics.ts";
import type { NodeEntry } from "./node-table.ts";
import type { RegionSettings } from "./settings.ts";

/** A ticket's joined hashes, one string per block again. */
export function chainHashes(chain: string): string[] {
  const out = new Array<string>(chain.length / BLOCK_HASH_CHARS);
  for (let k = 0; k < out.length; k++) out[k] = chain.slice(k * BLOCK_HASH_CHARS, (k + 1) * BLOCK_HASH_CHARS);
  return out;
}

/**
 * A node whose answers show nothing cached (within one engine block) this many times in a row,
 * each predicted to reuse at least MIN_EVIDENCE_BLOCKS, has lost its cache (restarted without a new boot id): forget all it
 * was believed to hold. Three: one such answer is an eviction, three in a row on different
 * prompts is the whole cache.
 */
const SILENT_RESTART_MISSES = 3;
/**
 * A miss counts towards a cache loss only on a prefix touched within the most recent half of the
 * node's believed capacity: an LRU evicts a block only once about its capacity in newer blocks has
 * come in, so only a node whose real capacity is under half what it reports could have evicted it.
 * Measured: counting every near-empty answer instead (no recency) cleared nodes under ordinary
 * evictions and cost a point of hit rate on Mooncake with the capacity overstated 2x (17.0% ->
 * 16.0%, bench "Index agreement"); a quarter missed a node that lost a third of its capacity's
 * worth of documents (bench/test/router-e2e.test.ts).
 */
const CAPACITY_MISESTIMATE_FACTOR = 2;
/** A prediction below this many blocks is too small to say anything about the node's cache. */
const MIN_EVIDENCE_BLOCKS = 2;

/** What of a request in flight its answer is compared with (tickets.ts Ticket). */
export interface Predicted {
  nodeId: string;
  promptTokens: number;
  /** The prompt's hashes, joined (16 characters a block). */
  chain: string;
  /** The believed cached prefix at dispatch, in blocks and tokens. */
  matchBlocks: number;
  predictedCachedTokens: number;
  /** When the index last touched blocks of that prefix before this dispatch (touchedSamples). */
  touched: ReadonlyArray<readonly [number, number]>;
}

/** What learnFromUsage works on: the region's index and settings, and how to drop a node's claims (tickets.ts). */
export interface EvidenceContext {
  index: PrefixIndex;
  settings: Pick<RegionSettings, "blockTokens" | "learnFromUsage">;
  /** The node's cache is gone: the claims of its requests in flight go with it. */
  dropClaims(nodeId: string): void;
}

/**
 * Compares what the node says it had cached for a request with what the index predicted, and
 * corrects the index. The comparison is in shares of the prompt, since the router counts
 * tokens by characters and the node by its tokenizer; within one engine block (plus 2%) is
 * agreement.
 *
 * Fewer cached than predicted: the node evicted the predicted prefix past what it reported. Its
 * cache evicts least recently used first, so every block the index last touched no later than the
 * first missing one is gone too: forget them all (the oldest part of the node's LRU). Along a
 * chain, deeper blocks were touched earlier (every insert touches a prompt last-to-first), so the
 * touch time sampled at or just past the first missing block bounds what is forgotten from
 * below. (Bounding by the prompt's first block instead wiped whole nodes: a fleet-wide system
 * prompt is touched by every request, so "older than it" is nearly everything.) More cached
 * than predicted needs no correction: the dispatch already recorded the whole prompt as held.
 * Several answers in a row with nothing cached (within one engine block), each predicted to reuse
 * a real prefix, mean the node lost its whole cache (a restart, or a prefix-cache reset, without a
 * new boot id): forget everything it was believed to hold but the prompt it has just computed.
 */
export function learnFromUsage(
  ctx: EvidenceContext,
  n: Pick<NodeEntry, "metrics" | "silentMisses">,
  t: Predicted,
  promptTokens: number,
  cachedTokens: number,
): void {
  const cmp = compareShares(t.predictedCachedTokens, t.promptTokens, cachedTokens, promptTokens, ctx.settings.blockTokens);
  countAgreement(n.metrics, cmp.agreed);
  if (!ctx.settings.learnFromUsage) return;
  if (cachedTokens > ENGINE_BLOCK_ALLOWANCE_TOKENS) n.silentMisses = 0;
  if (cmp.predicted - cmp.measured <= cmp.tolerance) return;
  // The first block surely missing: past the measured share and its tolerance, in the router's tokens.
  const heldTokens = (cmp.measured + cmp.tolerance) * t.promptTokens;
  let missing = 0;
  while (missing < t.matchBlocks && baseBlocksBefore(missing + 1) * ctx.settings.blockTokens <= heldTokens) missing++;
  // Blocks deeper in a chain were touched earlier, so the sample at or past it bounds what is gone.
  const sample = t.touched.find(([depth]) => depth >= missing);
  if (sample === undefined) return;
  const held = ctx.index.blocksOf(t.nodeId);
  const forgotten = ctx.index.forgetOlderThan(t.nodeId, sample[1]);
  if (forgotten > 0) {
    n.metrics.corrections++;
    n.metrics.correctedBlocks += forgotten;
  }
  // A cache loss rather than an eviction: nothing cached (within one engine block: the first
  // answer after a loss caches the chat template's first block again, and every later one
  // reports it) of a prefix used so recently that an LRU of even a fraction of the node's
  // believed capacity would still hold it.
  const newer = held - forgotten;
  const nothingCached = cachedTokens <= ENGINE_BLOCK_ALLOWANCE_TOKENS && t.predictedCachedTokens > 2 * ENGINE_BLOCK_ALLOWANCE_TOKENS;
  const recent = newer < ctx.index.capacityOf(t.nodeId) / CAPACITY_MISESTIMATE_FACTOR;
  if (nothingCached && recent && t.matchBlocks >= MIN_EVIDENCE_BLOCKS && ++n.silentMisses >= SILENT_RESTART_MISSES) {
    n.silentMisses = 0;
    n.metrics.silentRestarts++;
    ctx.index.clearNode(t.nodeId);
    ctx.dropClaims(t.nodeId);
    // What it does hold: the prompt it has just computed.
    ctx.index.insert(t.nodeId, chainHashes(t.chain));
  }
}

/** When the index last touched the node's blocks of `hashes` at depths 0, 1, 2, 4, ... and `depth - 1`. */
export function touchedSamples(index: PrefixIndex, nodeId: string, hashes: readonly string[], depth: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let d = 0; d < depth; d = d === 0 ? 1 : d * 2) {
    const seq = index.touchedAt(nodeId, hashes[d]!);
    if (seq !== undefined) out.push([d, seq]);
  }
  const last = depth - 1;
  if (depth > 0 && out.at(-1)?.[0] !== last) {
    const seq = index.touchedAt(nodeId, hashes[last]!);
    if (seq !== undefined) out.push([last, seq]);
  }
  return out;
}
