/**
 * A node's prefill rate and its spread, as the load model (node-load.ts) measures them: every first
 * byte is a sample of milliseconds per uncached token (the time since its prefill started, over its
 * uncached tokens), the configured rate a prior worth one sample, the estimate bounded within
 * [0.1x, 10x] the configured rate; and the spread (lognormal sigma) of real over predicted prefill
 * times. In a region the pooled estimate (rate-pool.ts) replaces the node's own with {@link PrefillRate.use}.
 *
 * Benchmark-tuned (bench/RESULTS.md): the average is over milliseconds per token, not tokens per
 * second: with per-request noise of mean 1 the mean of the *rates* is biased high (by e^(sigma^2),
 * 2.7x at sigma 1), the mean of the times is not. Pure state, no clock.
 */

/** Bounds on the learned prefill rate, relative to the configured one. */
const MIN_RATE_FACTOR = 0.1;
const MAX_RATE_FACTOR = 10;
/**
 * Weight of a new sample in the prefill-rate average once the node is measured. Smaller than the
 * request-size weight (node-load.ts, 0.2; benchmark-tuned): a node's hardware rate changes rarely, and with
 * per-request noise in prefill time a jumpy estimate makes identical nodes look different, which
 * misroutes.
 */
const RATE_EWMA_WEIGHT = 0.02;
/**
 * Weight of the configured rate, counted as this many samples, in the first estimates. Operators
 * rarely know a node's rate to within 2x (it moves with batch mix, quantisation, context length),
 * so the configured figure is a prior worth one measurement: until 1 / RATE_EWMA_WEIGHT samples
 * have been seen the estimate is the plain mean of the prior and the samples (weight 1 / (n + 1)),
 * which is the least-noisy estimate for that many samples, and only then does it become a moving
 * average. With a rate configured 4x wrong, ten samples bring the estimate within 30% (the bench's
 * rate check); the moving average alone needed about 70.
 */
const RATE_PRIOR_SAMPLES = 1;
/** Smallest uncached prefill (tokens) that is a trustworthy rate sample: shorter ones are dominated by network and scheduling latency. */
const MIN_RATE_SAMPLE_TOKENS = 2_000;
/**
 * Spread (lognormal sigma) of real over predicted prefill time assumed before any is measured: a
 * middle value, so that an overrunning prefill is neither taken as done nor as endless. It is
 * worth PRIOR_SPREAD_SAMPLES measurements; the measured spread takes over from there.
 */
const PRIOR_SPREAD = 0.5;
const PRIOR_SPREAD_SAMPLES = 5;

/** What a node's own measurements say, for the region's pool (rate-pool.ts). */
export interface RateEvidence {
  /** Mean milliseconds per uncached token. */
  msPerToken: number;
  /** Mean of their logarithms: what nodes are compared on. */
  logMs: number;
  /** Samples behind it, as an effective count (a moving average remembers about 1 / RATE_EWMA_WEIGHT). */
  samples: number;
  /** Measured spread (lognormal sigma of real over predicted prefill time). */
  spread: number;
}

export class PrefillRate {
  /** The rate in use, tokens per second. */
  tokensPerSecond: number;
  /** The rate in use, as milliseconds per uncached token: the node's own, or the region's pooled estimate (rate-pool.ts). */
  msPerToken: number;
  private readonly configuredRate: number;
  /** The node's own measured rate, as milliseconds per uncached token (what is averaged; see {@link sample}). */
  private ownMsPerToken: number;
  /** The spread in use (lognormal sigma of real over predicted prefill time): the node's own, or the region's. */
  private spreadInUse = PRIOR_SPREAD;
  /** Rate samples taken so far. */
  private rateSamples = 0;
  /** Mean and mean square of ln(real / predicted prefill time) over the rate samples. */
  private logRatioMean = 0;
  private logRatioSquare = PRIOR_SPREAD * PRIOR_SPREAD;
  /** Mean of ln(milliseconds per token) over the rate samples: what nodes are compared on (rate-pool.ts). */
  private logMsMean = 0;

  /** @param configuredRate the operator's figure, tokens per second: the prior and the centre of the bounds */
  constructor(configuredRate: number) {
    this.configuredRate = configuredRate;
    this.tokensPerSecond = configuredRate;
    this.msPerToken = 1000 / configuredRate;
    this.ownMsPerToken = this.msPerToken;
  }

  /** Spread (lognormal sigma) of real over predicted prefill times, as in use. */
  spread(): number {
    return this.spreadInUse;
  }

  /**
   * A request's prefill took `elapsedMs` for `uncachedTokens`: a sample when it is long enough to
   * be trusted (MIN_RATE_SAMPLE_TOKENS). Alone, the node's own estimate is then the one in use.
   * @returns whether it was a sample
   */
  sample(elapsedMs: number, uncachedTokens: number): boolean {
    if (!(uncachedTokens >= MIN_RATE_SAMPLE_TOKENS && elapsedMs > 0)) return false;
    const sample = elapsedMs / uncachedTokens;
    this.rateSamples++;
    const spreadWeight = Math.max(RATE_EWMA_WEIGHT, 1 / (this.rateSamples + PRIOR_SPREAD_SAMPLES));
    const logRatio = Math.log(sample / this.ownMsPerToken);
    this.logRatioMean += spreadWeight * (logRatio - this.logRatioMean);
    this.logRatioSquare += spreadWeight * (logRatio * logRatio - this.logRatioSquare);
    const weight = Math.max(RATE_EWMA_WEIGHT, 1 / (this.rateSamples + RATE_PRIOR_SAMPLES));
    this.ownMsPerToken += weight * (sample - this.ownMsPerToken);
    this.logMsMean += Math.max(RATE_EWMA_WEIGHT, 1 / this.rateSamples) * (Math.log(sample) - this.logMsMean);
    // Alone, the node's own estimate is the one in use; in a region the pool replaces it (rate-pool.ts).
    this.use(this.ownMsPerToken, this.ownSpread());
    return true;
  }

  /** What the node's own measurements say (see {@link RateEvidence}). */
  evidence(): RateEvidence {
    return {
      msPerToken: this.ownMsPerToken,
      logMs: this.logMsMean,
      samples: Math.min(this.rateSamples, 1 / RATE_EWMA_WEIGHT),
      spread: this.ownSpread(),
    };
  }

  /** Sets the rate and spread in use, the rate within the bounds around the configured one. */
  use(msPerToken: number, spread: number): void {
    const configuredMsPerToken = 1000 / this.configuredRate;
    this.msPerToken = Math.min(configuredMsPerToken / MIN_RATE_FACTOR, Math.max(configuredMsPerToken / MAX_RATE_FACTOR, msPerToken));
    this.tokensPerSecond = 1000 / this.msPerToken;
    this.spreadInUse = spread;
  }

  private ownSpread(): number {
    return Math.sqrt(Math.max(0, this.logRatioSquare - this.logRatioMean * this.logRatioMean));
  }
}
