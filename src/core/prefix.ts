/**
 * Prefix keys: the canonical prompt cut into character blocks (fixed, then growing: see
 * block-layout.ts), each named by a chained 64-bit hash (see hash.ts), plus the size estimates
 * routing needs.
 */
import { blockWeight } from "./block-layout.ts";
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
   * Maximum blocks hashed per request. Default 2,048. Blocks grow past the first 512
   * (block-layout.ts), so 2,048 blocks reach 32,768 base blocks (16.8M characters, ~4M tokens
   * at the defaults), past any body the edge accepts: the cap bounds a hostile configuration's
   * work, not a real prompt's.
   */
  maxBlocks: number;
  /** Characters per token, for token estimates without a tokenizer. Default 4 (English BPE). */
  charsPerToken: number;
}

/** Defaults for {@link PrefixSettings}; see each field for the reasoning. */
export const DEFAULT_PREFIX_SETTINGS: PrefixSettings = {
  blockChars: 512,
  maxBlocks: 2048,
  charsPerToken: 4,
};

/** What the router knows about a prompt's prefix. */
interface PrefixKey {
  /** Chained block hashes (16 hex characters each), at most `maxBlocks`; block k spans blockWeight(k) base blocks. */
  hashes: string[];
  /** Total canonical characters (including any part past `maxBlocks`). */
  promptChars: number;
  /** Estimated prompt tokens. */
  promptTokens: number;
  /** Estimated tokens per base block (block k holds blockWeight(k) of them). */
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
  for (let start = 0, k = 0; start < text.length && k < maxBlocks; k++) {
    const end = Math.min(start + blockChars * blockWeight(k), text.length);
    state = hashBlock(state, text, start, end);
    hashes.push(hashToHex(state));
    start = end;
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
