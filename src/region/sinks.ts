import type { DecisionSinks } from "../proxy/decision-log.ts";

/** Where a request's decision line goes: the log (sampled) and, if bound, the Analytics Engine dataset. */
export function regionSinks(rc: { env: Env; config: { raw: { decision_log_sample_rate: number } } }): DecisionSinks {
  return { dataset: rc.env.ANALYTICS, sampleRate: rc.config.raw.decision_log_sample_rate, random: Math.random };
}
