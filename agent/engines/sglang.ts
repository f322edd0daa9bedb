/**
 * SGLang, from its Prometheus `/metrics` (the server needs `--enable-metrics`).
 *
 * Names as read in sgl-project/sglang python/sglang/srt/metrics/collector.py
 * @ 00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538: `SchedulerMetricsCollector` gauges
 * `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:token_usage` ("The token usage",
 * used / pool), `sglang:num_used_tokens` and `sglang:max_total_num_tokens` ("Maximum total number
 * of tokens in the KV cache pool"); `TokenizerMetricsCollector` counters
 * `sglang:prompt_tokens_total`, `sglang:generation_tokens_total`, `sglang:num_requests_total`.
 * `sglang:max_total_num_tokens` is recent: older servers (e.g. the scheduler at the commit below)
 * do not export it, and need `--kv-capacity-tokens`.
 * The scheduler's labels, python/sglang/srt/managers/scheduler_metrics_mixin.py
 * @ 01bb3c807f7e62c19a31de7548837505488c2b64: `model_name`, `engine_type`, `tp_rank`, `pp_rank`,
 * and `dp_rank` under data parallelism (newer versions add `moe_ep_rank`). Its `token_usage` is
 * the larger of the full and sliding-window pools' usage on hybrid models. By default only the
 * first rank of each data-parallel replica exports (`enable_metrics_for_all_schedulers` is off);
 * with it on, the ranks of one replica repeat the
 * same queue, so values are taken once per `dp_rank` and added across replicas.
 *
 * Capacity: `sglang:max_total_num_tokens`, summed over data-parallel replicas.
 */
import { meanValue, series, sumOverReplicas } from "../prometheus.ts";
import { count, positiveInt, ratio, type Capacity, type Engine, type EngineScrape } from "./types.ts";

export const SGLANG_METRICS = {
  running: "sglang:num_running_reqs",
  waiting: "sglang:num_queue_reqs",
  tokenUsage: "sglang:token_usage",
  usedTokens: "sglang:num_used_tokens",
  capacity: "sglang:max_total_num_tokens",
  restartCounters: ["sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_requests_total"],
} as const;

const REPLICA_LABEL = "dp_rank";

export const sglang: Engine = {
  name: "sglang",
  reportedAs: "sglang",
  prefix: "sglang:",
  readLoad({ samples }: EngineScrape) {
    const running = sumOverReplicas(series(samples, SGLANG_METRICS.running), REPLICA_LABEL);
    const waiting = sumOverReplicas(series(samples, SGLANG_METRICS.waiting), REPLICA_LABEL);
    if (running === undefined && waiting === undefined) {
      throw new Error(`no ${SGLANG_METRICS.running} or ${SGLANG_METRICS.waiting} on the metrics page`);
    }
    // The engine's own ratio first; else used / pool, which is how SGLang computes it.
    let usage = meanValue(series(samples, SGLANG_METRICS.tokenUsage));
    if (usage === undefined) {
      const used = sumOverReplicas(series(samples, SGLANG_METRICS.usedTokens), REPLICA_LABEL);
      const pool = sumOverReplicas(series(samples, SGLANG_METRICS.capacity), REPLICA_LABEL);
      if (used !== undefined && pool) usage = used / pool;
    }
    return { running: count(running), waiting: count(waiting), kvUsage: ratio(usage) };
  },
  readCapacity({ samples }: EngineScrape): Capacity | undefined {
    const tokens = positiveInt(sumOverReplicas(series(samples, SGLANG_METRICS.capacity), REPLICA_LABEL));
    return tokens === undefined ? undefined : { tokens, source: SGLANG_METRICS.capacity };
  },
  restartCounters: SGLANG_METRICS.restartCounters,
};
