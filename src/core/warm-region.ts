/**
 * Cache-aware choice across regions: a long prompt whose prefix a farther region already holds
 * goes there first when the prefill it saves beats the extra round trip by a clear margin.
 *
 * The nearest region stays next in line (a farther region that is saturated or down fails over
 * to it as before), regions the tenant may not use or that do not serve the model are never
 * candidates (the caller's list is already filtered), and a prompt shorter than
 * LONG_PREFIX_TOKENS is never looked up: the common case pays nothing.
 *
 * Why it does not flap: the gain must exceed WARM_MARGIN x the extra round trip plus
 * WARM_MIN_GAIN_MS, and the regions' digests change only as prefixes are used or evicted. Once a
 * document's requests go to the region that holds it, the nearest region never learns it, so the
 * choice stays put until the holder evicts it; then the digest drops it and the prompt goes back
 * to the nearest region, which learns it.
 */
import { LONG_PREFIX_TOKENS } from "./region/long-prefixes.ts";

/**
 * The saved prefill must be at least this many times the extra round trip: the digest's depth is
 * a lower bound within 2x, the far region's queue is unknown at the edge, and a wrong move costs a
 * round trip every time.
 */
const WARM_MARGIN = 2;
/** ...and at least this much in absolute terms (ms): below it, measurement noise decides. */
export const WARM_MIN_GAIN_MS = 50;

/**
 * How long the edge uses a region's digest (src/edge/region-digests.ts): long prefixes stay in
 * a region for minutes (KV capacity evicts them, not time), and 10 s keeps an isolate's digest
 * traffic at one small call per region per 10 s.
 */
export const DIGEST_TTL_MS = 10_000;

/** What the edge knows of one region, in the order it would try them (nearest first). */
export interface WarmOption {
  /** Estimated round trip from the client (ms); unknown without the client's location. */
  roundTripMs: number | undefined;
  /** Checkpoint hash -> prefix tokens the region holds (its digest), if the edge has one. */
  digest: ReadonlyMap<string, number> | undefined;
  /** The region's prefill rate, tokens/s. */
  prefillTokensPerSecond: number;
}

interface WarmChoice {
  /** Index of the region to try first. */
  index: number;
  /** Tokens of the prompt's prefix that region holds, and the nearest region holds. */
  heldTokens: number;
  nearestHeldTokens: number;
  /** Prefill saved there against the nearest region (ms), and the extra round trip (ms). */
  savedMs: number;
  extraRoundTripMs: number;
}

/** Tokens of the prompt's prefix in `digest`: the deepest checkpoint among its hashes. */
export function heldTokens(hashes: readonly string[], digest: ReadonlyMap<string, number> | undefined): number {
  if (!digest || digest.size === 0) return 0;
  for (let i = hashes.length - 1; i >= 0; i--) {
    const tokens = digest.get(hashes[i]!);
    if (tokens !== undefined) return tokens;
  }
  return 0;
}

/**
 * The farther region to try first for this prompt, or undefined to keep the nearest-first order.
 * Needs the client's round trip to every region (no location, no trade-off to make).
 */
export function warmestRegion(options: readonly WarmOption[], hashes: readonly string[], promptTokens: number): WarmChoice | undefined {
  if (promptTokens < LONG_PREFIX_TOKENS || options.length < 2) return undefined;
  const nearest = options[0]!;
  if (nearest.roundTripMs === undefined) return undefined;
  const nearestHeld = heldTokens(hashes, nearest.digest);
  let best: WarmChoice | undefined;
  for (let i = 1; i < options.length; i++) {
    const o = options[i]!;
    if (o.roundTripMs === undefined || !o.digest) continue;
    const held = heldTokens(hashes, o.digest);
    if (held <= nearestHeld) continue;
    const savedMs = ((held - nearestHeld) / o.prefillTokensPerSecond) * 1000;
    const extraRoundTripMs = Math.max(0, o.roundTripMs - nearest.roundTripMs);
    if (savedMs < WARM_MARGIN * extraRoundTripMs + WARM_MIN_GAIN_MS) continue;
    if (!best || savedMs - extraRoundTripMs > best.savedMs - best.extraRoundTripMs) {
      best = { index: i, heldTokens: held, nearestHeldTokens: nearestHeld, savedMs, extraRoundTripMs };
    }
  }
  return best;
}
