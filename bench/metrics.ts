/** Figures of one run (one workload, one load level, one policy). */
import { percentile } from "../src/core/stats.ts";
import { compareShares } from "../src/core/region/agreement.ts";
import { DEFAULT_PREFIX_SETTINGS } from "../src/core/prefix.ts";

const ROUTER_BLOCK_TOKENS = DEFAULT_PREFIX_SETTINGS.blockChars / DEFAULT_PREFIX_SETTINGS.charsPerToken;
import type { Fleet, Live } from "./fleet.ts";

export interface RunMetrics {
  workload: string;
  speed: number;
  policy: string;
  noiseSigma: number;
  requests: number;
  /** Token-weighted prefix hit rate: true cached tokens / prompt tokens. */
  hitRate: number;
  promptTokens: number;
  /** Prefill tokens actually computed (uncached). */
  prefillTokens: number;
  ttftMean: number;
  ttftP50: number;
  ttftP90: number;
  ttftP99: number;
  e2eMean: number;
  /** max / mean over nodes of prefill tokens computed, and of requests. */
  prefillImbalance: number;
  requestImbalance: number;
  slotWaits: number;
  /** Prefill busy time / (nodes x arrival span): offered prefill load; above 1 the queues grow. */
  prefillLoad: number;
  /**
   * Share of requests whose cached share the router predicted within the region router's own
   * tolerance of what the node really had cached (src/core/region/agreement.ts); NaN for references.
   */
  indexAgreement: number;
}

function maxOverMean(values: readonly number[]): number {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return mean > 0 ? Math.max(...values) / mean : 1;
}

export function summarise(
  workload: string,
  speed: number,
  policy: string,
  noiseSigma: number,
  lives: readonly Live[],
  fleet: Fleet,
): RunMetrics {
  let prompt = 0;
  let cached = 0;
  let e2e = 0;
  let ttftSum = 0;
  let slotWaits = 0;
  const ttfts = new Float64Array(lives.length);
  lives.forEach((l, i) => {
    prompt += l.req.promptTokens;
    cached += l.cachedTokens;
    const t = l.firstToken - l.arrival;
    ttfts[i] = t;
    ttftSum += t;
    e2e += l.end - l.arrival;
    if (l.slotWait) slotWaits++;
  });
  ttfts.sort();
  const sorted = Array.from(ttfts);
  const span = lives.length > 1 ? lives[lives.length - 1]!.arrival - lives[0]!.arrival : 1;
  const busy = fleet.nodes.reduce((a, n) => a + n.prefillBusyMs, 0);
  // The pooled reference is one node with nodes x the prefill rate, so its busy fraction is
  // directly comparable; its imbalance is 1 by definition.
  const n = lives.length;
  return {
    workload,
    speed,
    policy,
    noiseSigma,
    requests: n,
    hitRate: prompt > 0 ? cached / prompt : 0,
    promptTokens: prompt,
    prefillTokens: prompt - cached,
    ttftMean: ttftSum / n,
    ttftP50: percentile(sorted, 0.5),
    ttftP90: percentile(sorted, 0.9),
    ttftP99: percentile(sorted, 0.99),
    e2eMean: e2e / n,
    prefillImbalance: maxOverMean(fleet.nodes.map((x) => x.prefillTokens)),
    requestImbalance: maxOverMean(fleet.nodes.map((x) => x.requests)),
    slotWaits,
    prefillLoad: busy / (fleet.nodes.length * span),
    indexAgreement: indexAgreement(lives),
  };
}

/**
 * Share of `lives` whose cached share the router predicted within the region router's tolerance
 * of what the node really had cached; NaN when none was routed by a router (the references).
 */
export function indexAgreement(lives: readonly Live[]): number {
  let compared = 0;
  let agreed = 0;
  for (const l of lives) {
    if (Number.isNaN(l.predictedCachedTokens)) continue;
    compared++;
    const { promptTokens } = l.req;
    if (compareShares(l.predictedCachedTokens, promptTokens, l.cachedTokens, promptTokens, ROUTER_BLOCK_TOKENS).agreed) agreed++;
  }
  return compared > 0 ? agreed / compared : NaN;
}
