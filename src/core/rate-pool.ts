/**
 * Pools the nodes' measured prefill rates across a region (empirical Bayes shrinkage).
 *
 * Each node measures its own rate from its first bytes, but one node's few samples are noisy:
 * with per-request prefill times spread as a lognormal of sigma 1 (the benchmark's noise check),
 * a moving average over ~50 samples is still off by ~15%, so identical nodes look different, the
 * "slow" one is sent fewer long prompts, takes fewer samples and stays wrong (in the benchmark one
 * node sat at 0.43x its true rate after 3 samples, and per-node rates 10% apart doubled chat-heavy's
 * mean TTFT under noise against one shared rate: 0.39 s vs 0.19 s). A region's nodes usually share
 * hardware, and when they do not, their samples say so. So each node's rate is the region's
 * pooled rate, moved toward the node's own by how much its evidence is worth next to the real
 * spread between nodes:
 *
 *   estimate_i = pooled x exp(w_i x d_i),   w_i = tau^2 / (tau^2 + sigma^2 / n_i)
 *
 * where d_i is the node's mean log time per token less the region's, n_i its effective sample
 * count, sigma the measured spread of one sample, and tau^2 the variance between the nodes' true
 * (log) rates, estimated as the spread of the nodes' log means beyond what sampling explains
 * (DerSimonian-Laird's method of moments, floored at 0). Nodes are compared in logs because
 * lognormal samples are normal there, so the estimate of tau^2 is not thrown by one huge sample.
 * The pooled rate itself is the mean of milliseconds per token over all samples, which is
 * unbiased under noise (node-load.ts). Identical nodes share it, learned 8x faster on 8 nodes (a
 * misconfigured rate is corrected within a few requests per node); a node twice as slow soon
 * shows a large tau^2 and keeps its own.
 */
import type { NodeLoad } from "./node-load.ts";

/**
 * A spread between the nodes' true rates below this (in log: ln 1.2, nodes 20% apart) is taken
 * as none. The router's belief about cached tokens is not exact (a node whose cache the index
 * overestimates looks slower), which biases the estimated spread upwards; and a real difference
 * this small moves a decision only where two nodes' estimates are already this close.
 */
const MIN_REAL_LOG_SPREAD = Math.log(1.2);

/** Re-estimates every node's rate and spread in use from all the nodes' evidence. */
export function poolRates(loads: readonly NodeLoad[]): void {
  const evidence = loads.map((l) => l.rateEvidence());
  let samples = 0;
  let weighted = 0;
  let logWeighted = 0;
  let spreadSquare = 0;
  for (const e of evidence) {
    samples += e.samples;
    weighted += e.samples * e.msPerToken;
    logWeighted += e.samples * e.logMs;
    spreadSquare += e.samples * e.spread * e.spread;
  }
  if (samples === 0) return;
  const pooled = weighted / samples;
  const pooledLog = logWeighted / samples;
  const sigma2 = Math.max(1e-6, spreadSquare / samples);
  let measured = 0;
  let q = 0;
  let sumW = 0;
  let sumW2 = 0;
  for (const e of evidence) {
    if (e.samples < 1) continue;
    const w = e.samples / sigma2;
    measured++;
    q += w * (e.logMs - pooledLog) ** 2;
    sumW += w;
    sumW2 += w * w;
  }
  const tau2Raw = measured > 1 ? Math.max(0, (q - (measured - 1)) / (sumW - sumW2 / sumW)) : 0;
  const tau2 = tau2Raw > MIN_REAL_LOG_SPREAD ** 2 ? tau2Raw : 0;
  const spread = Math.sqrt(sigma2);
  loads.forEach((load, i) => {
    const e = evidence[i]!;
    const w = e.samples >= 1 && tau2 > 0 ? tau2 / (tau2 + sigma2 / e.samples) : 0;
    load.useEstimate(pooled * Math.exp(w * (e.logMs - pooledLog)), spread);
  });
}
