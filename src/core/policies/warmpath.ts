/**
 * warmpath's default policy: send a request where its first token comes soonest, counting both
 * the prefill its cached prefix saves and the prefill work already queued on the node.
 *
 * For each candidate the router knows (a) the believed cached prefix, hence the uncached tokens
 * this request would cost there, and (b) the uncached prefill tokens queued ahead of it (the load
 * model in node-load.ts). The estimated time to first token is `(work ahead + uncached) / rate`.
 *
 * - When the prefix match *discriminates* between nodes, the node with the lowest estimate wins.
 *   That is the holder of the longest prefix (`prefix-hit`) until its queue costs more than the
 *   prefill it saves, then a less loaded node (`hot-spill`). A popular system prompt therefore
 *   spreads over as many nodes as its traffic needs, and the spill copies it there (the index
 *   records the dispatch), so later requests find several holders.
 * - When no node holds a useful prefix (or all hold the same one, e.g. a fleet-wide system
 *   prompt), the request is placed by consistent hashing with bounded loads (`cold-spread`, or
 *   `prefix-hit` when the shared prefix is cached everywhere), keyed on the first block no node
 *   holds: the key's rendezvous order picks among the nodes whose load is within the bound, so
 *   repeats of a new prefix converge on one node and distinct prompts spread. The default bound
 *   is additive and tight, "no more than `tie_tolerance_seconds` of queued prefill above the least
 *   loaded node"; setting `load_factor` selects the classic multiplicative bound ("at most
 *   load_factor x the mean work"), which the benchmark measured as slower (see `choose`).
 * - Estimates within `tie_tolerance_seconds` of the best are ties; a session hint breaks them first
 *   (`session`), then a rendezvous hash of the request's placement key, so ties are deterministic
 *   per prompt but spread across prompts.
 * - A node under KV pressure (reported usage above `kv_pressure_threshold`) is evicting, so its
 *   believed prefix is discounted by half.
 */
import { z } from "zod";
import { rendezvousScore } from "../hash.ts";
import { RECENT_WORK_TAU_MS } from "../node-load.ts";
import { boundedLoadChoice } from "./placement.ts";
import type { Candidate, PolicyChoice, PolicyDefinition, PolicyInput, RoutingPolicy } from "./types.ts";

export const warmpathOptionsSchema = z.strictObject({
  name: z.literal("warmpath"),
  // No default: unset selects the tight additive bound, measured faster (see `choose`).
  load_factor: z
    .number()
    .min(1)
    .max(10)
    .optional()
    .describe(
      "Classic bounded-load factor for cold placement: a node is eligible while its queued prefill is at most this multiple of the mean. Unset: within tie_tolerance_seconds of the least loaded node.",
    ),
  // Below the noise of a load report and of network latency, so a tie is decided by affinity rather than by noise.
  tie_tolerance_seconds: z
    .number()
    .min(0)
    .max(10)
    .default(0.05)
    .describe("Estimated times to first token closer than this many seconds are a tie, broken by the session hint then by hash."),
  kv_pressure_threshold: z
    .number()
    .min(0)
    .max(1)
    .default(0.95)
    .describe("Reported KV cache usage above which a node is taken to be evicting, and its believed prefix is discounted by half."),
});

type WarmpathOptions = z.output<typeof warmpathOptionsSchema>;

/** Recent prefill work differing by less than this (tokens) is equal, so rendezvous hashing decides. */
const RECENT_WORK_TIE_TOKENS = 1_000;

/** The key cold placement and tie-breaks hash on: the first block no candidate holds. */
function placementKey(candidates: readonly Candidate[], hashes: readonly string[], fallback: string): string {
  let deepest = 0;
  for (const c of candidates) if (c.matchBlocks > deepest) deepest = c.matchBlocks;
  return hashes[Math.min(deepest, hashes.length - 1)] ?? fallback;
}

class WarmpathPolicy implements RoutingPolicy {
  readonly name = "warmpath";
  private readonly options: WarmpathOptions;
  constructor(options: WarmpathOptions) {
    this.options = options;
  }

  choose({ candidates, request }: PolicyInput): PolicyChoice {
    const { tie_tolerance_seconds: tieToleranceSeconds, kv_pressure_threshold: kvPressureThreshold } = this.options;
    const key = placementKey(candidates, request.hashes, request.sessionKey ?? "");

    let maxMatch = 0;
    let minMatch = Infinity;
    const uncached = candidates.map((c) => {
      const discounted = c.kvUsage > kvPressureThreshold ? c.matchTokens / 2 : c.matchTokens;
      if (c.matchBlocks > maxMatch) maxMatch = c.matchBlocks;
      if (c.matchBlocks < minMatch) minMatch = c.matchBlocks;
      return request.promptTokens - discounted;
    });

    // Cold placement. Benchmark-tuned (bench/RESULTS.md): the classic bound (eligible while at
    // most 1.25 x the mean work) sends a request that gains nothing from any node to a node up to
    // 25% busier than the mean when the least busy one would answer sooner. The default bound is
    // therefore additive: eligible while within `tie_tolerance_seconds` of the least loaded node,
    // and the key's rendezvous order (via `prefer`) picks among those. Repeats of a new prefix
    // converge (the same key ranks nodes the same way, and the first dispatch is recorded in the
    // index, so the second finds a holder) and distinct prompts spread. On the Mooncake trace,
    // where ~80% of requests are cold, heavy-load mean TTFT fell from 4.7 s to 2.7 s with it.
    if (maxMatch === minMatch && this.options.load_factor !== undefined) {
      const loads = candidates.map((c) => c.workAheadTokens);
      const { index } = boundedLoadChoice(candidates, key, loads, uncached[0]!, this.options.load_factor);
      return { index, decision: maxMatch > 0 ? "prefix-hit" : "cold-spread" };
    }

    const gamma = externality(candidates);
    const estimates = candidates.map((c, i) => (c.workAheadTokens + uncached[i]! * (1 + gamma)) / c.prefillRate);
    const best = Math.min(...estimates);
    let chosen = -1;
    for (let i = 0; i < candidates.length; i++) {
      if (estimates[i]! > best + tieToleranceSeconds) continue;
      if (chosen < 0 || this.prefer(candidates, i, chosen, request.sessionNode, key)) chosen = i;
    }
    const c = candidates[chosen]!;
    if (maxMatch === minMatch) {
      const bySession = c.id === request.sessionNode && ties(estimates, best, tieToleranceSeconds) > 1;
      // A prefix every candidate holds (a fleet-wide system prompt, or a single node) is still a hit.
      return { index: chosen, decision: bySession ? "session" : maxMatch > 0 ? "prefix-hit" : "cold-spread" };
    }
    if (c.matchBlocks < maxMatch) return { index: chosen, decision: "hot-spill" };
    const tiedHolders = candidates.filter((o, i) => o.matchBlocks === maxMatch && estimates[i]! <= best + tieToleranceSeconds);
    const bySession = c.id === request.sessionNode && tiedHolders.length > 1;
    return { index: chosen, decision: bySession ? "session" : "prefix-hit" };
  }

  /**
   * Tie-break order: longer match, then the session's node, then the node given less prefill work
   * lately, then rendezvous on the key. The recent-work step spreads what ties at light load (new
   * sessions, cold prompts) by work rather than by hash, so nodes that happened to draw long
   * sessions are not also handed the next ones.
   */
  private prefer(candidates: readonly Candidate[], i: number, j: number, sessionNode: string | undefined, key: string): boolean {
    const a = candidates[i]!;
    const b = candidates[j]!;
    if (a.matchBlocks !== b.matchBlocks) return a.matchBlocks > b.matchBlocks;
    if (sessionNode !== undefined && (a.id === sessionNode) !== (b.id === sessionNode)) return a.id === sessionNode;
    if (Math.abs(a.recentPrefillTokens - b.recentPrefillTokens) > RECENT_WORK_TIE_TOKENS)
      return a.recentPrefillTokens < b.recentPrefillTokens;
    return rendezvousScore(key, a.id) > rendezvousScore(key, b.id);
  }
}

/**
 * Cap on {@link externality}: reached at a fleet utilisation of 8/9. Past it the utilisation
 * estimate (a minute of dispatched work) is too coarse to tell 95% from 150%; 4 and 16 gave the
 * same figures within 3% at x2 and x3 on the Mooncake trace.
 */
const MAX_EXTERNALITY = 8;

/**
 * What a token of prefill costs the requests that come after this one, as a multiple of what it
 * costs this one: rho / (1 - rho) at fleet prefill utilisation rho, the ratio of queueing delay to
 * service time in an M/M/1 queue, i.e. how many later requests each unit of work delays.
 *
 * Why: choosing by this request's own time to first token alone (what the oracle reference does)
 * is right while queues drain, but near and past saturation every token a spill recomputes is
 * queued ahead of everyone after it, and throughput is set by how much prefill the fleet avoids.
 * Pricing uncached tokens at (1 + externality) keeps a prefix on its holder while the wait saved
 * elsewhere is smaller than the recomputation's cost to the whole queue. Measured (bench, Mooncake
 * trace): hit rate 14.4% -> 17.4% and mean TTFT 192 s -> 164 s at x3, 2.06 s -> 1.89 s at x2, no
 * change at x0.5 where rho is ~0.2. Utilisation is estimated from the minute of dispatched
 * prefill each candidate carries (recentPrefillTokens, decayed over RECENT_WORK_TAU_MS) over the
 * candidates' learned rates: no configuration, and it follows the rate the router has learned.
 */
function externality(candidates: readonly Candidate[]): number {
  let work = 0;
  let rate = 0;
  for (const c of candidates) {
    work += c.recentPrefillTokens;
    rate += c.prefillRate;
  }
  const rho = rate > 0 ? work / ((RECENT_WORK_TAU_MS / 1000) * rate) : 0;
  return rho >= 1 ? MAX_EXTERNALITY : Math.min(MAX_EXTERNALITY, rho / (1 - rho));
}

/** How many estimates are within `tolerance` of the best. */
function ties(estimates: readonly number[], best: number, tolerance: number): number {
  let n = 0;
  for (const e of estimates) if (e <= best + tolerance) n++;
  return n;
}

export const warmpath: PolicyDefinition<WarmpathOptions> = {
  options: warmpathOptionsSchema,
  create: (options) => new WarmpathPolicy(options),
};
