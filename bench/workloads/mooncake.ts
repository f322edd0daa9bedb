/**
 * The Mooncake conversation trace (Kimi, FAST '25) as a workload.
 *
 * Router view: every hash id becomes a deterministic 2,048-character text block (512 tokens at
 * 4 characters a token), the last one cut to the request's input_length, and the concatenation is
 * canonicalised as a completion prompt and hashed by the production `prefixKey`. Shared ids
 * therefore give shared text, and the router's 512-character blocks line up inside them.
 *
 * Fleet view: the engine's cache works at the trace's own 512-token granularity on the trace's
 * hash ids, so the true hit rate follows the trace's (a cached prefix counts min(blocks x 512,
 * input_length - 1) tokens: an engine always computes the last prompt token, see
 * Fleet.cachedTokensOn) and does not depend on our text synthesis or on the router's hashing.
 *
 * The trace has no user or session ids. A conversation is identified by its first two hash ids:
 * block 0 is shared by every request (a fleet-wide system prompt), block 1 starts the conversation
 * (7,373 distinct pairs over 12,031 requests; the busiest pair has 43 requests). That pair is the
 * request's sessionKey, the key a sticky router (and warmpath's session hint) would have had from
 * a `user` or session field. Keyed on block 0 alone, sticky sessions would send every request to
 * one node, which no real sticky router does.
 */
import { readFileSync } from "node:fs";
import { prefixKey, DEFAULT_PREFIX_SETTINGS } from "../../src/core/prefix.ts";
import { entityText, KIND } from "../text.ts";
import type { BenchRequest, Workload } from "./types.ts";

const TRACE_BLOCK_TOKENS = 512;
const CHARS_PER_TOKEN = DEFAULT_PREFIX_SETTINGS.charsPerToken;

interface TraceLine {
  timestamp: number;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}

export interface MooncakeOptions {
  path: string;
  /** Keep only the first `limit` requests (the --quick slice). */
  limit?: number | undefined;
}

export function loadMooncake({ path, limit }: MooncakeOptions): Workload {
  const lines = readFileSync(path, "utf8").split("\n");
  const requests: BenchRequest[] = [];
  const blockChars = TRACE_BLOCK_TOKENS * CHARS_PER_TOKEN;
  for (const line of lines) {
    if (limit !== undefined && requests.length >= limit) break;
    if (line.trim() === "") continue;
    const r = JSON.parse(line) as TraceLine;
    const chars = r.input_length * CHARS_PER_TOKEN;
    const parts: string[] = [];
    let left = chars;
    for (const id of r.hash_ids) {
      if (left <= 0) break;
      const n = Math.min(blockChars, left);
      parts.push(entityText(KIND.traceBlock, id, n));
      left -= n;
    }
    // A trace line whose ids cover less than input_length (none seen) is padded with request-unique text.
    if (left > 0) parts.push(entityText(KIND.answer, 1_000_000_000 + requests.length, left));
    const key = prefixKey(
      { kind: "completion", prompt: parts.join("") },
      { model: "bench-model", namespace: "mooncake" },
      DEFAULT_PREFIX_SETTINGS,
    );
    requests.push({
      id: requests.length,
      arrival: r.timestamp,
      sessionKey: r.hash_ids.length >= 2 ? `${r.hash_ids[0]}/${r.hash_ids[1]}` : undefined,
      hashes: key.hashes,
      promptTokens: key.promptTokens,
      trueBlocks: r.hash_ids,
      outputTokens: Math.max(1, r.output_length),
    });
  }
  return {
    name: "mooncake",
    description: `Mooncake conversation trace (${requests.length} requests), replayed at its own timestamps`,
    trueBlockTokens: TRACE_BLOCK_TOKENS,
    requests,
  };
}
