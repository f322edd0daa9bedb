/**
 * A prompt's prefix block hashes on the wire: the route call (routing.ts) and the dispatch message
 * (region-service.ts) carry them, and both check them with this one schema.
 */
import { z } from "zod";
import { HASH_HEX_CHARS } from "../core/hash.ts";

/** The most prefix block hashes a request carries. */
export const MAX_BLOCK_HASHES = 4096;
/** Characters of one block hash: its hex form, 16 digits of 64 bits (src/core/hash.ts). */
export const BLOCK_HASH_CHARS = HASH_HEX_CHARS;

/**
 * A prompt's prefix block hashes, first block first: at most {@link MAX_BLOCK_HASHES} strings of
 * {@link BLOCK_HASH_CHARS} characters. One loop over the array, not a schema per element: zod
 * runs without its JIT in Workers (no eval there), where `z.array(z.string().length(16))` costs
 * ~0.15 us a hash (Node 22, jitless: 2 us for a 2,000-token prompt's 17 hashes, 32 us for 32,000
 * tokens' 250, 105 us for 100,000 tokens' 647; this loop 1.4 us at 647), and every request is
 * checked twice, by the region worker (its dispatch) and by its object (the route call). Indexed,
 * so a structured clone's hole is refused as the undefined it reads as.
 */
export const blockHashesSchema = z.custom<string[]>(
  (v) => {
    if (!Array.isArray(v) || v.length > MAX_BLOCK_HASHES) return false;
    for (let i = 0; i < v.length; i++) {
      const h: unknown = v[i];
      if (typeof h !== "string" || h.length !== BLOCK_HASH_CHARS) return false;
    }
    return true;
  },
  { message: `hashes: expected at most ${MAX_BLOCK_HASHES} block hashes of ${BLOCK_HASH_CHARS} characters each` },
);
