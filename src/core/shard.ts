/**
 * Which of a region's objects owns a prompt, when the region is split over several (`shards`).
 *
 * A prompt's shard is chosen by its first block's hash, with rendezvous (highest random weight)
 * hashing over the shard numbers. Block hashes are chained (hash.ts), so every block of a prompt
 * names a prefix that starts with that first block: all requests that share any whole block share
 * the first one and land on the same shard. Each prefix therefore has exactly one writer, and no
 * two shards can believe different owners for it; the index loses nothing by the split. What a
 * shard does not see is the others' dispatches, so its load model learns them from the nodes'
 * own reports (the region's exchange ingests each report once and hands it to every shard) and
 * from the shards' exchange of what they have queued, rather than at dispatch.
 *
 * Rendezvous rather than `hash mod shards`: raising `shards` from N to N+1 moves only the ~1/(N+1)
 * of prefixes the new shard wins (their affinity is relearned there); a modulo would move nearly
 * all of them.
 *
 * The cost of the split is balance: a shard carries the traffic of its first blocks, so one very
 * hot system prompt stays on one object. bench/SHARDS.md measures the largest shard's share on
 * the benchmark's workloads.
 */

/** Upper bound on `shards` per region: every shard exchanges with the region's exchange (52 ms apart at 31 shards, 107 ms at 64). */
export const MAX_SHARDS = 64;

/** FNV-1a offset basis and prime (32-bit). */
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** A 32-bit score of (block, shard), well mixed (FNV-1a, then a murmur3 finaliser). */
function score(block: string, shard: number): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < block.length; i++) h = Math.imul(h ^ block.charCodeAt(i), FNV_PRIME);
  h = Math.imul(h ^ shard, FNV_PRIME);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * The shard (0..shards-1) that owns prompts starting with `firstBlock`. A prompt with no block
 * (empty) and every prompt of an unsharded region go to shard 0.
 */
export function shardOf(firstBlock: string | undefined, shards: number): number {
  if (shards <= 1 || !firstBlock) return 0;
  let best = 0;
  let bestScore = -1;
  for (let k = 0; k < shards; k++) {
    const s = score(firstBlock, k);
    if (s > bestScore) {
      best = k;
      bestScore = s;
    }
  }
  return best;
}

/**
 * The block a prompt is sharded by: its `keyBlocks`-th block, or its last if it is shorter. With
 * the default of 1 (the first block) every prefix has exactly one writer; deeper keys spread a
 * workload whose prompts all open with one shared block (a fleet-wide system prompt) over the
 * shards, at the price that a prefix shorter than the key is learned by each shard that sends it
 * somewhere (each belief still true of the node it names).
 */
export function shardKey(hashes: readonly string[], keyBlocks: number): string | undefined {
  if (hashes.length === 0) return undefined;
  return hashes[Math.min(keyBlocks, hashes.length) - 1];
}

/**
 * The name of a region's shard object: the region's own name for shard 0, so a region that goes
 * from one object to several keeps its first object (its node table and its index) as shard 0.
 */
export function shardObjectName(region: string, shard: number): string {
  return shard === 0 ? region : `${region}#shard-${shard}`;
}

/**
 * The name of a sharded region's load exchange: the object through which its shards share what
 * they have queued on each node, and which ingests the region's node reports and hands them to the
 * shards (durable-objects/region.ts, `exchange`). `#` cannot appear in a
 * region name, so it never collides with a region or a shard.
 */
export function loadExchangeName(region: string): string {
  return `${region}#load`;
}
