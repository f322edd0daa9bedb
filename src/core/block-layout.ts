/**
 * Where a prompt is cut into prefix blocks: fixed-size blocks first, then blocks that double in
 * size every {@link BLOCKS_PER_DOUBLING} blocks.
 *
 * Why not fixed blocks all the way: a block's hash is one prefix-index entry, one route-payload
 * hash and one index lookup per node, so fixed 512-character blocks cost 8,192 entries for a
 * 1M-token prompt, and capping the count forgets the tail (the old default hashed only the first
 * ~65k tokens, so two agentic sessions sharing 100k tokens looked alike only to 65k). What routing
 * needs is the matched prefix to within a small *fraction* of its length: a match at 300k tokens
 * known to within 1k tokens decides as well as one known to the token. Doubling the block size
 * every 256 blocks keeps the granularity at or below 1/256 of the position (0.4%), so the block
 * count grows with the logarithm of the prompt's length: 768 blocks at 128k tokens, 1,536 at 1M
 * (bench/HASHING.md has the cost). Prompts within the first {@link FINE_BLOCKS} blocks (65k tokens
 * at the default 512 characters) are cut exactly as before.
 *
 * Sizes are counted in *base blocks* (one base block = `block_chars` characters), so the layout
 * does not depend on the block size and the region object, which only knows tokens per base
 * block, shares it with the edge.
 */

/** Blocks of the base size before the first doubling (512 x 512 characters, ~65k tokens). */
export const FINE_BLOCKS = 512;
/** Blocks per size: after FINE_BLOCKS, every this many blocks the block size doubles. */
export const BLOCKS_PER_DOUBLING = 256;

/** Size of block `k` (0-based), in base blocks: 1 for the fine blocks, then 2, 4, 8, ... */
export function blockWeight(k: number): number {
  if (k < FINE_BLOCKS) return 1;
  return 2 ** (Math.floor((k - FINE_BLOCKS) / BLOCKS_PER_DOUBLING) + 1);
}

/** Base blocks covered by the first `depth` blocks (where block `depth` starts). */
export function baseBlocksBefore(depth: number): number {
  if (depth <= FINE_BLOCKS) return Math.max(0, depth);
  const d = depth - FINE_BLOCKS;
  const octaves = Math.floor(d / BLOCKS_PER_DOUBLING);
  const rest = d - octaves * BLOCKS_PER_DOUBLING;
  // Octave j (from 0) has BLOCKS_PER_DOUBLING blocks of 2^(j+1): a geometric sum, then the partial octave.
  return FINE_BLOCKS + BLOCKS_PER_DOUBLING * (2 ** (octaves + 1) - 2) + rest * 2 ** (octaves + 1);
}
