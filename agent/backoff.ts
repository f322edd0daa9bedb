/**
 * Bounded exponential backoff with jitter, for retries against the router.
 *
 * The delay before retry n (1-based) is drawn from [step/2, step], step = min(cap, base x 2^(n-1)):
 * "equal jitter". The random half keeps a fleet of agents that lost the router together (a deploy,
 * a network cut) from retrying in lockstep; the fixed half keeps any one agent from hammering it.
 */
export function backoffDelay(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  const exponent = Math.min(Math.max(0, attempt - 1), 30); // 2^30 x any base is past any cap
  const step = Math.min(capMs, baseMs * 2 ** exponent);
  return Math.round(step / 2 + random() * (step / 2));
}
