/**
 * Shared placement helpers: rendezvous ordering and consistent hashing with bounded loads.
 */
import { rendezvousScore } from "../hash.ts";
import type { Candidate } from "./types.ts";

/**
 * Candidate indices ordered by rendezvous score for `key` (best first). Deterministic per key. Only
 * the ids are read, so the region worker's stateless fallback (src/region/stateless.ts), which has
 * no load model, passes bare ids.
 */
export function rendezvousOrder(candidates: readonly Pick<Candidate, "id">[], key: string): number[] {
  const scored = candidates.map((c, i) => ({ i, s: rendezvousScore(key, c.id) }));
  scored.sort((a, b) => b.s - a.s || a.i - b.i);
  return scored.map((x) => x.i);
}

/**
 * Consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, 2018): walk the key's
 * preference order and take the first node whose load is within `loadFactor` times the mean load,
 * the mean counting the new request. Repeats of a key land on the same node until it is
 * overloaded, and no node is given work while above `loadFactor` times its share. The least
 * loaded node is always within the bound, so the walk always ends.
 *
 * @param loads current load per candidate (any unit)
 * @param cost the new request's load in the same unit
 * @returns index into `candidates`, and whether it was the key's first choice
 */
export function boundedLoadChoice(
  candidates: readonly Pick<Candidate, "id">[],
  key: string,
  loads: readonly number[],
  cost: number,
  loadFactor: number,
): { index: number; firstChoice: boolean } {
  const order = rendezvousOrder(candidates, key);
  const bound = loadBound(loads, cost, loadFactor);
  for (let k = 0; k < order.length; k++) {
    const i = order[k]!;
    if (loads[i]! <= bound) return { index: i, firstChoice: k === 0 };
  }
  // Unreachable in exact arithmetic; kept so float rounding can never leave the walk without a node.
  const best = argMin(loads);
  return { index: best, firstChoice: order[0] === best };
}

/** The bounded-load limit: `loadFactor` times the mean load, counting the new request's `cost`. */
function loadBound(loads: readonly number[], cost: number, loadFactor: number): number {
  let total = cost;
  for (const l of loads) total += l;
  return (loadFactor * total) / loads.length;
}

/** Index of the minimum of `values`, ties to the earlier index. */
export function argMin(values: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! < values[best]!) best = i;
  return best;
}
