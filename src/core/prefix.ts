/**
 * Prefix keys: the canonical prompt cut into fixed character blocks, each named by a chained
 * 64-bit hash (see hash.ts), plus the size estimates routing needs.
 */
import { hashBlock, hashToHex, seedHash, type Hash64 } from "./hash.ts";
import { canonicalText, namespaceSeed, type CacheNamespace, type CanonicalPrompt } from "./canonical.ts";

/** How prompts are cut into blocks. */
export interface PrefixSettings {
  /**
   * Characters per block. Default 512 (about 128 tokens at 4 characters a token, i.e. eight
   * 16-token vLLM blocks): small enough that a shared system prompt or document is matched to
   * within a few percent of its length, large enough that a 100,000-character prompt is ~200
   * hashes, which keeps the route call's payload and the Durable Object's per-request index work
   * small.
   */
  blockChars: number;
  /**
   * Maximum blocks hashed per request. Default 512 (262,144 characters, ~65k tokens). Past it a
   * prompt is treated as matching at most this far: the tail of a very long prompt is rarely
   * shared, and the cap bounds both hashing time and index work per request.
   */
  maxBlocks: number;
  /** Characters per token, for token estimates without a tokenizer. Default 4 (English BPE). */
  charsPerToken: number;
}

/** Defaults for {@link PrefixSettings}; see each field for the reasoning. */
export const DEFAULT_PREFIX_SETTINGS: PrefixSettings = {
  blockChars: 512,
  maxBlocks: 512,
  charsPerToken: 4,
};

/** What the router knows about a prompt's prefix. */
export interface PrefixKey {
  /** Chained block hashes (16 hex characters each), at most `maxBlocks`. */
  hashes: string[];
  /** Total canonical characters (including any part past `maxBlocks`). */
  promptChars: number;
  /** Estimated prompt tokens. */
  promptTokens: number;
  /** Estimated tokens per full block. */
  blockTokens: number;
}

/**
 * Hashes a canonical text into chained block hashes. Only full blocks are hashed, plus the final
 * partial block: an engine can reuse a partial trailing block only if the next request extends
 * the same text, and hashing it lets an identical repeat match all the way.
 */
export function hashCanonicalText(text: string, seed: string, settings: PrefixSettings): PrefixKey {
  const { blockChars, maxBlocks, charsPerToken } = settings;
  const hashes: string[] = [];
  let state: Hash64 = seedHash(seed);
  const limit = Math.min(text.length, blockChars * maxBlocks);
  for (let start = 0; start < limit; start += blockChars) {
    state = hashBlock(state, text, start, Math.min(start + blockChars, limit));
    hashes.push(hashToHex(state));
  }
  return {
    hashes,
    promptChars: text.length,
    promptTokens: Math.max(1, Math.ceil(text.length / charsPerToken)),
    blockTokens: blockChars / charsPerToken,
  };
}

/**
 * Canonicalises and hashes a request prompt in its cache namespace.
 *
 * @example
 * const key = prefixKey(
 *   { kind: "chat", messages: [{ role: "user", content: "hi" }] },
 *   { model: "llama", namespace: "acme" },
 *   DEFAULT_PREFIX_SETTINGS,
 * );
 */
export function prefixKey(prompt: CanonicalPrompt, ns: CacheNamespace, settings: PrefixSettings): PrefixKey {
  return hashCanonicalText(canonicalText(prompt), namespaceSeed(ns), settings);
}
