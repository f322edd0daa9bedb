/**
 * Can this run's timings be trusted? The demo's client, the simulated fleet (one Node process) and
 * the router (workerd) share the machine's cores. Starved of CPU, the fleet's timers fire late and
 * the router relays late, and every figure in wall milliseconds grows by time the simulation never
 * modelled: issue 32 saw median TTFTs of 1,348 ms (sticky) and 1,401 ms (warmpath) on a busy 2-core
 * machine where a quiet one measures 276 and 79, printed without a word.
 *
 * The yardstick is a phase whose length the simulation fixes whatever the policy: decoding. A
 * simulated node emits token i exactly i decode intervals after the first (fleet/engine.ts:
 * 1000 / decode_tokens_per_second / time factor ms, every running request at once, no queue), so
 * from the first content chunk to the last the client should see (completion_tokens - 1)
 * intervals. What it sees beyond that is the harness's own delay: a late timer in the fleet, a
 * late relay in the router, a late read in the client. TTFT pays the same delays, and more: a
 * node's prefills run one after another, each started from the previous one's (late) timer, so a
 * queue of k prefills is late k times over.
 *
 * Pure: no I/O.
 */
import { percentile } from "../../src/core/stats.ts";
import type { RequestResult } from "./send-request.ts";

/**
 * The median request's decode may take at most this many times its modelled length. On a quiet
 * 2-core machine the demo's decodes run at 1.0x-1.1x their model at time factor 5 (the relay of
 * ~30 chunks, a few ms); a harness that stretches the median one by more than a quarter adds at
 * least that to every first token as well, many times over behind a queue, which is the size of
 * the difference the table is there to show (warmpath's median TTFT is a quarter to a third of
 * sticky's on a quiet machine).
 */
export const MAX_DECODE_STRETCH = 1.25;
/**
 * Requests decoding fewer tokens than this are not used: the interval between the first and the
 * last chunk is then short enough that one scheduling hiccup dominates the ratio.
 */
export const MIN_DECODE_TOKENS = 8;
/** Fewer usable requests than this, and the run cannot vouch for its timings either way. */
export const MIN_SAMPLES = 20;

/** How far the harness stretched the modelled decode, over one policy's answers. */
export interface HarnessStretch {
  /** Answers measured (ok, at least MIN_DECODE_TOKENS tokens, on a node whose pace is known). */
  samples: number;
  /** Observed / modelled decode time: the median answer's, and the 90th percentile's. */
  medianStretch: number;
  p90Stretch: number;
  /** The median answer's decode time beyond the model, wall ms. */
  medianExcessMs: number;
}

/**
 * Measures the stretch over `results`. `decodeIntervalMs` gives a node's modelled wall ms between
 * two tokens (`region/node`, as the x-warmpath-region and x-warmpath-node headers name it), or
 * undefined for a node the harness does not simulate.
 */
export function decodeStretch(results: readonly RequestResult[], decodeIntervalMs: (node: string) => number | undefined): HarnessStretch {
  const ratios: number[] = [];
  const excess: number[] = [];
  for (const r of results) {
    if (!r.ok || r.ttftMs === undefined || r.lastTokenMs === undefined || r.completionTokens === undefined) continue;
    if (r.completionTokens < MIN_DECODE_TOKENS || !r.region || !r.node) continue;
    const interval = decodeIntervalMs(`${r.region}/${r.node}`);
    if (interval === undefined || !(interval > 0)) continue;
    const modelled = (r.completionTokens - 1) * interval;
    const observed = r.lastTokenMs - r.ttftMs;
    ratios.push(observed / modelled);
    excess.push(observed - modelled);
  }
  ratios.sort((a, b) => a - b);
  excess.sort((a, b) => a - b);
  return {
    samples: ratios.length,
    medianStretch: ratios.length ? percentile(ratios, 0.5) : NaN,
    p90Stretch: ratios.length ? percentile(ratios, 0.9) : NaN,
    medianExcessMs: excess.length ? percentile(excess, 0.5) : NaN,
  };
}

export type HarnessVerdict = { trusted: true } | { trusted: false; reason: string; remedy: string };

/**
 * Whether the timings of a comparison hold: every policy's run must have kept the median decode
 * within MAX_DECODE_STRETCH of its model, on at least MIN_SAMPLES answers. One starved run is
 * enough to refuse: a comparison against inflated figures misleads whichever side is inflated.
 */
export function harnessVerdict(runs: ReadonlyArray<{ policy: string; stretch: HarnessStretch }>, timeFactor: number): HarnessVerdict {
  const lower = timeFactor > 1 ? ` --time-factor ${Math.max(1, Math.floor(timeFactor / 2))}` : "";
  const remedy =
    `Rerun when the machine is quieter (other processes are using its cores)` +
    (lower ? `, or slow the simulation down so the harness keeps up: npm run demo --${lower}` : "") +
    ". Hit rates and prefill tokens are printed with --json, but the router also saw the stalls as load.";
  const few = runs.filter((r) => r.stretch.samples < MIN_SAMPLES);
  if (few.length > 0) {
    return {
      trusted: false,
      reason: `too few answers to check the timings against the simulation (${few.map((r) => `${r.policy}: ${r.stretch.samples}`).join(", ")}; at least ${MIN_SAMPLES} needed)`,
      remedy: "Run more requests (--requests).",
    };
  }
  const starved = runs.filter((r) => !(r.stretch.medianStretch <= MAX_DECODE_STRETCH));
  if (starved.length > 0) {
    const detail = starved
      .map(
        (r) =>
          `${r.policy}: the median answer's decode took ${r.stretch.medianStretch.toFixed(2)}x its simulated time ` +
          `(+${Math.round(r.stretch.medianExcessMs)} ms)`,
      )
      .join("; ");
    return {
      trusted: false,
      reason: `this machine was too busy to measure at time factor ${timeFactor}: ${detail}; at most ${MAX_DECODE_STRETCH}x is trusted. The TTFTs would be the harness's own delays, not the fleet's.`,
      remedy,
    };
  }
  return { trusted: true };
}
