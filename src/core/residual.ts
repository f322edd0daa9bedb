/**
 * How much longer a prefill that has already run a while is expected to take, when prefill times
 * are lognormal around their prediction.
 *
 * A node's real prefill time varies around what the router predicts (batch mix, preemption,
 * chunking, a cache hit that was smaller than believed); measured as the ratio X of real to
 * predicted time it is well described by a lognormal of mean 1 and spread sigma. A prefill that
 * has run for t (in units of its prediction) without finishing has an expected remainder
 * E[X - t | X > t], which for a heavy tail *grows* with t: a job that has overrun its prediction
 * is likely a long one. Treating it as nearly done sends new requests into a queue stuck behind
 * it; treating it as just started wastes a free node. With sigma = 0 the remainder is exactly
 * max(0, 1 - t).
 *
 * For X = exp(mu + sigma Z) with mu = -sigma^2 / 2 (mean 1):
 *   E[X 1{X > t}] = Phi((sigma^2 / 2 - ln t) / sigma),  P(X > t) = Phi((-sigma^2 / 2 - ln t) / sigma).
 */

/** Below this spread the prediction is treated as exact. */
const EXACT_SIGMA = 0.05;

/** Standard normal CDF (Abramowitz and Stegun 7.1.26 via erfc, absolute error under 1.5e-7). */
export function normalCdf(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  const erfc = poly * Math.exp(-x * x);
  return z >= 0 ? 1 - erfc / 2 : erfc / 2;
}

/**
 * Expected remaining time of a job that has run `elapsed` (as a fraction of its predicted time,
 * >= 0) without finishing, in units of its predicted time, for lognormal spread `sigma`.
 */
export function expectedResidual(elapsed: number, sigma: number): number {
  if (elapsed <= 0) return 1;
  if (sigma < EXACT_SIGMA) return Math.max(0, 1 - elapsed);
  const lnT = Math.log(elapsed);
  const half = (sigma * sigma) / 2;
  const tail = normalCdf((-half - lnT) / sigma);
  // Far in the tail the ratio of two tiny CDFs loses precision; there the remainder tends to
  // elapsed x sigma^2 / ln(elapsed) (the lognormal's mean residual life), a safe stand-in.
  if (tail < 1e-9) return (elapsed * sigma * sigma) / Math.max(1, lnT);
  return Math.max(0, normalCdf((half - lnT) / sigma) / tail - elapsed);
}
