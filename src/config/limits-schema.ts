/**
 * `[limits]` and `[prefix]` of the configuration (src/config/schema.ts): request bounds and prefix hashing.
 */
import { z } from "zod";
import { DEFAULT_PREFIX_SETTINGS } from "../core/prefix.ts";
import { MAX_DURATION_MS } from "./schema-names.ts";

/**
 * The largest `max_body_bytes` accepted.
 *
 * Why 8 MiB: the platform would take more (Workers refuse a body past 100 MB on Free and Pro,
 * 200 MB on Business, 500 MB by default on Enterprise), but memory binds first. A stream continued
 * at the bound holds ~13 bytes of the region worker's isolate per body byte at its size check
 * (continue.ts): the body (1), the seam's text, up to `max_body_bytes` characters kept as UTF-16
 * (2, seam.ts), the body decoded and parsed (2 + 2), the continuation's JSON string (4: body and
 * text, UTF-16) and its bytes (2). Measured with V8 (ASCII text holding one character past
 * Latin-1, a two-byte string): 52 MiB at the default 4 MiB, 104 MiB at 8 MiB, 208 MiB at 16 MiB,
 * past an isolate's 128 MB. And a prompt within 8 MiB is at most 8.4M characters (each at least a
 * byte), which the default 2,048 `prefix.max_blocks` (16.8M characters) hash whole.
 */
export const MAX_BODY_BYTES_LIMIT = 8 * 1024 * 1024;

export const limitsSchema = z
  .strictObject({
    max_body_bytes: z
      .number()
      .int()
      .positive()
      .max(MAX_BODY_BYTES_LIMIT)
      .default(4 * 1024 * 1024)
      .describe(
        "Largest request body, at most 8 MiB (8388608): a stream continued at the bound holds ~13x it in the region worker's 128 MB isolate.",
      ),
    max_retries: z.number().int().min(0).max(5).default(2).describe("Extra nodes tried per region before the first byte."),
    max_region_attempts: z.number().int().min(1).max(10).default(3).describe("Regions tried, nearest first."),
    first_byte_timeout_ms: z
      .number()
      .int()
      .positive()
      .max(MAX_DURATION_MS)
      .default(120_000)
      .describe(
        "Longest wait for a node's first body byte. The wait actually allowed adapts to the request: 4x the load model's estimated time to first token on that node, at least `first_byte_timeout_floor_ms`, at most this.",
      ),
    first_byte_timeout_floor_ms: z
      .number()
      .int()
      .positive()
      .max(MAX_DURATION_MS)
      .default(10_000)
      .describe("Shortest first-byte wait, however small the estimate (a cached prompt on an idle node); at most `first_byte_timeout_ms`."),
    stream_idle_timeout_ms: z
      .number()
      .int()
      .positive()
      .max(MAX_DURATION_MS)
      .default(60_000)
      .describe("Longest silence from a node between two chunks of its answer: past it the stream ends with an error event."),
    continuations: z
      .number()
      .int()
      .min(0)
      .max(5)
      .default(2)
      .describe(
        "Times a streamed chat completion or completion whose node failed after its first byte is continued on another node, within the request's deadline (docs/CONTINUATION.md); 0: such a stream ends with an error event.",
      ),
    request_deadline_ms: z
      .number()
      .int()
      .positive()
      .max(MAX_DURATION_MS)
      .default(900_000)
      .describe(
        "Longest a request may take from arrival to its last byte: past it the answer ends with an error event. Each region's `request_timeout_ms` is at least this plus 60 s.",
      ),
  })
  .superRefine((limits, ctx) => {
    // The wait allowed is min(timeout, max(floor, estimate)) (src/region/call-node.ts): a floor
    // above the timeout would be silently ignored, every wait cut to the timeout.
    if (limits.first_byte_timeout_floor_ms > limits.first_byte_timeout_ms)
      ctx.addIssue({
        code: "custom",
        path: ["first_byte_timeout_floor_ms"],
        message: `must be at most first_byte_timeout_ms (${limits.first_byte_timeout_ms})`,
      });
  });

export const prefixSchema = z.strictObject({
  block_chars: z
    .number()
    .int()
    .min(16)
    .max(65_536)
    .default(DEFAULT_PREFIX_SETTINGS.blockChars)
    .describe(
      "Characters per block (~128 tokens) for the first 512 blocks: fine enough to match a shared prompt to within a few percent, coarse enough that a 100k-character prompt is ~200 hashes.",
    ),
  max_blocks: z
    .number()
    .int()
    .min(1)
    .max(4096)
    .default(DEFAULT_PREFIX_SETTINGS.maxBlocks)
    .describe(
      "Blocks hashed per request. Blocks double in size every 256 after the first 512, so 2,048 blocks cover ~16.8M characters: the whole of any prompt the body limit admits, at index work growing with the log of its length.",
    ),
  chars_per_token: z
    .number()
    .positive()
    .max(16)
    .default(DEFAULT_PREFIX_SETTINGS.charsPerToken)
    .describe("For token estimates without a tokenizer."),
});
