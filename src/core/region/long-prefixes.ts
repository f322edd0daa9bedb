/**
 * A region's digest of the long prefixes it holds: what lets the global entry point send a long
 * prompt to a farther region that already holds its prefix (src/core/warm-region.ts).
 *
 * For a 100,000-token prompt the prefill a cached prefix saves is seconds; an intercontinental
 * round trip is tens of milliseconds. Short prompts cannot gain enough to pay a round trip, so the
 * digest only records prompts of at least LONG_PREFIX_TOKENS, and the worker only consults it for
 * such prompts: the common case pays nothing.
 *
 * Per long prompt dispatched, the region records a few checkpoint blocks: where its prefix first
 * reaches LONG_PREFIX_TOKENS x 2^k tokens, and its last block. Block hashes are chained, so a new
 * prompt that shares the block at a checkpoint shares everything before it: matching the new
 * prompt's hashes against the digest gives the depth held, within 2x, from a handful of entries
 * per document. The digest keeps the most recently used checkpoints still held by a node (the
 * prefix index's belief), at most DIGEST_MAX_ENTRIES: a few KB on the wire.
 */
import { baseBlocksBefore } from "../block-layout.ts";
import { BoundedLru } from "../lru.ts";

/**
 * The shortest prompt the digest records and the worker looks up: 4,096 tokens take ~0.4 s to
 * prefill at 10,000 tokens/s, several intercontinental round trips; below it a farther region
 * rarely gains enough to be worth the trip.
 */
export const LONG_PREFIX_TOKENS = 4_096;

/** Checkpoints in a region's digest (each a 16-character hash and a depth: ~40 bytes in JSON). */
export const DIGEST_MAX_ENTRIES = 256;

/** A checkpoint: a block hash and the tokens of the prefix it closes. */
interface DigestEntry {
  hash: string;
  tokens: number;
}

/** What a region tells the edge about its long prefixes. */
export interface RegionDigest {
  region: string;
  /** The region's prefill rate (tokens/s, the mean of its nodes' learned rates): what a held token saves. */
  prefillTokensPerSecond: number;
  /** Most recently used first. */
  entries: DigestEntry[];
}

/** Tokens of the prefix that ends with block `i` (0-based) of a prompt of `blocks` blocks and `promptTokens` tokens. */
function depthTokens(i: number, blocks: number, promptTokens: number, blockTokens: number): number {
  return i === blocks - 1 ? promptTokens : Math.min(promptTokens, baseBlocksBefore(i + 1) * blockTokens);
}

/** The checkpoint block indices of a prompt: where it first reaches 4k, 8k, 16k... tokens, and its last block. */
export function checkpoints(blocks: number, promptTokens: number, blockTokens: number): number[] {
  const out: number[] = [];
  let next = LONG_PREFIX_TOKENS;
  for (let i = 0; i < blocks; i++) {
    const tokens = depthTokens(i, blocks, promptTokens, blockTokens);
    if (tokens >= next || i === blocks - 1) {
      if (tokens >= LONG_PREFIX_TOKENS) out.push(i);
      while (next <= tokens) next *= 2;
    }
  }
  return out;
}

export class LongPrefixes {
  /** Checkpoint hash -> depth in tokens, most recently used last. */
  private readonly recent = new BoundedLru<string, number>(DIGEST_MAX_ENTRIES * 4);

  private readonly blockTokens: number;

  constructor(blockTokens: number) {
    this.blockTokens = blockTokens;
  }

  /** Records a dispatched prompt's checkpoints (nothing for a short prompt). */
  record(hashes: readonly string[], promptTokens: number): void {
    if (promptTokens < LONG_PREFIX_TOKENS) return;
    for (const i of checkpoints(hashes.length, promptTokens, this.blockTokens)) {
      this.recent.set(hashes[i]!, depthTokens(i, hashes.length, promptTokens, this.blockTokens));
    }
  }

  /** The most recently used checkpoints that `held` says a node still holds, at most DIGEST_MAX_ENTRIES. */
  digest(held: (hash: string) => boolean): DigestEntry[] {
    const out: DigestEntry[] = [];
    for (const [hash, tokens] of [...this.recent.entries()].reverse()) {
      if (out.length >= DIGEST_MAX_ENTRIES) break;
      if (held(hash)) out.push({ hash, tokens });
    }
    return out;
  }
}
