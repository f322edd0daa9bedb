/**
 * Chained 64-bit block hashing.
 *
 * The hash is a two-lane multiply/xor-shift hash in the style of cyrb53: each lane is a 32-bit
 * state updated with `Math.imul`, which V8 and workerd compile to a single integer multiply, so a
 * character costs two multiplies and no allocation. The two lanes are cross-mixed at the end of
 * each block, so the 64 output bits depend on every input character. It is **not** cryptographic:
 * it only has to make accidental collisions between prompt prefixes negligible (with 2^64 outputs,
 * a fleet indexing 10^7 blocks has a collision probability around 3·10^-6).
 *
 * Chaining is what makes a block hash name a whole prefix: block i is hashed starting from the
 * state of block i-1 (`h_i = H(h_{i-1}, block_i)`), so two prompts share block i's hash only if
 * they agree on every character up to the end of block i.
 */
import { byteHex } from "./hex.ts";

/** A 64-bit hash as two unsigned 32-bit halves. */
export interface Hash64 {
  hi: number;
  lo: number;
}

const LANE_A_INIT = 0xdeadbeef;
const LANE_B_INIT = 0x41c6ce57;
const MUL_A = 2654435761;
const MUL_B = 1597334677;
const FINAL_A = 2246822507;
const FINAL_B = 3266489909;

/**
 * Hashes `text[start, end)` starting from the chaining state `prev`.
 * The block length is mixed in, so blocks of different lengths never alias.
 */
export function hashBlock(prev: Hash64, text: string, start: number, end: number): Hash64 {
  let a = LANE_A_INIT ^ prev.hi;
  let b = LANE_B_INIT ^ prev.lo;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, MUL_A);
    b = Math.imul(b ^ c, MUL_B);
  }
  const length = end - start;
  a = Math.imul(a ^ length, MUL_A);
  b = Math.imul(b ^ length, MUL_B);
  a = Math.imul(a ^ (a >>> 16), FINAL_A);
  a ^= Math.imul(b ^ (b >>> 13), FINAL_B);
  b = Math.imul(b ^ (b >>> 16), FINAL_A);
  b ^= Math.imul(a ^ (a >>> 13), FINAL_B);
  return { hi: a >>> 0, lo: b >>> 0 };
}

/** The chaining state for a namespace: hashing the seed string from the zero state. */
export function seedHash(seed: string): Hash64 {
  return hashBlock({ hi: 0, lo: 0 }, seed, 0, seed.length);
}

/** Characters of a hash in its hex form ({@link hashToHex}): 64 bits, 16 hex digits. */
export const HASH_HEX_CHARS = 16;

/** Formats a hash as {@link HASH_HEX_CHARS} lowercase hex characters (the form used as an index key and on the wire). */
export function hashToHex(h: Hash64): string {
  const { hi, lo } = h;
  return (
    byteHex(hi >>> 24) +
    byteHex(hi >>> 16) +
    byteHex(hi >>> 8) +
    byteHex(hi) +
    byteHex(lo >>> 24) +
    byteHex(lo >>> 16) +
    byteHex(lo >>> 8) +
    byteHex(lo)
  );
}

/**
 * Rendezvous (highest random weight) score of `nodeId` for `key`. Ordering nodes by this score
 * gives every key its own stable preference list, so a tie or a cold placement is deterministic for
 * a key but spreads over nodes across keys, and removing a node only moves that node's keys.
 */
export function rendezvousScore(key: string, nodeId: string): number {
  const h = hashBlock(seedHash(nodeId), key, 0, key.length);
  return h.lo;
}
