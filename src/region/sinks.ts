import type { DecisionSinks } from "../proxy/decision-log.ts";
import type { RegionTrace } from "./trace.ts";

/**
 * Where a request's decision line goes: the log (sampled) and, if bound, the Analytics Engine
 * dataset; with the request's trace id, and its spans ended and logged with it (trace.ts).
 */
export function regionSinks(rc: { env: Env; config: { raw: { decision_log_sample_rate: number } }; trace?: RegionTrace }): DecisionSinks {
  const trace = rc.trace;
  return {
    dataset: rc.env.ANALYTICS,
    sampleRate: rc.config.raw.decision_log_sample_rate,
    random: Math.random,
    trace: trace && { traceId: trace.traceId, onLine: (line) => trace.onLine(line) },
  };
}
