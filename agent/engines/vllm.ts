/**
 * vLLM (V1 engine), from its Prometheus `/metrics`.
 *
 * Names and labels as read in vllm-project/vllm:
 * - vllm/v1/metrics/loggers.py @ 005a810bc40faa25b8870fbc8559c3462581eee3 (the v0.10 line,
 *   labels `model_name` and `engine`, one label set per data-parallel engine):
 *   `vllm:num_requests_running`, `vllm:num_requests_waiting` (gauges),
 *   `vllm:kv_cache_usage_perc` (gauge, 0..1) and its deprecated alias `vllm:gpu_cache_usage_perc`
 *   ("Deprecated in 0.9", hidden from 0.10 unless --show-hidden-metrics-for-version; older
 *   servers only have this one), counters `vllm:prompt_tokens`, `vllm:generation_tokens`,
 *   `vllm:request_success` (prometheus_client appends `_total`), and `vllm:cache_config_info`:
 *   an info gauge (value 1) whose labels are `CacheConfig.metrics_info()`, every field of the
 *   cache config as a string, plus `engine`.
 * - vllm/v1/metrics/loggers.py @ a6f0308cfe806b7731ad4979c9bea6e470c35efd (an early V1 logger:
 *   no `engine` label, only `vllm:gpu_cache_usage_perc`): the fallbacks below.
 * - vllm/config/cache.py @ 002f10e0cfa1373a19a0d2756598a34b700d20e5: `metrics_info()` is
 *   `{key: str(value) for key, value in self.__dict__.items()}`, so `block_size`,
 *   `num_gpu_blocks` (`"None"` until profiled) and, since vllm-project/vllm#42206,
 *   `kv_cache_size_tokens`: "Per-DP-engine KV cache capacity in tokens (group-aware) ...
 *   num_gpu_blocks * block_size can be wrong for hybrid models".
 *
 * Capacity: `kv_cache_size_tokens` when the label is there, else `block_size x num_gpu_blocks`
 * (exact for the uniform KV cache every older vLLM has), summed over data-parallel engines. A
 * figure that is not a positive safe integer (`"None"`, or past 2^53-1) is not there.
 */
import { firstSeries, meanValue, series, sumOverReplicas } from "../prometheus.ts";
import { count, positiveInt, ratio, safePositive, type Capacity, type Engine, type EngineScrape } from "./types.ts";

export const VLLM_METRICS = {
  running: "vllm:num_requests_running",
  waiting: "vllm:num_requests_waiting",
  kvUsage: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
  cacheConfig: "vllm:cache_config_info",
  restartCounters: ["vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total"],
} as const;

/** Data-parallel engines behind one API server are told apart by this label. */
const REPLICA_LABEL = "engine";

export const vllm: Engine = {
  name: "vllm",
  reportedAs: "vllm",
  prefix: "vllm:",
  readLoad({ samples }: EngineScrape) {
    const running = sumOverReplicas(series(samples, VLLM_METRICS.running), REPLICA_LABEL);
    const waiting = sumOverReplicas(series(samples, VLLM_METRICS.waiting), REPLICA_LABEL);
    if (running === undefined && waiting === undefined) {
      throw new Error(`no ${VLLM_METRICS.running} or ${VLLM_METRICS.waiting} on the metrics page`);
    }
    return { running: count(running), waiting: count(waiting), kvUsage: ratio(meanValue(firstSeries(samples, VLLM_METRICS.kvUsage))) };
  },
  readCapacity({ samples }: EngineScrape): Capacity | undefined {
    // One label set per engine; the same engine twice (a re-registered gauge) counts once.
    const perEngine = new Map<string, { tokens: number; source: string }>();
    for (const s of series(samples, VLLM_METRICS.cacheConfig)) {
      const group = s.labels[REPLICA_LABEL] ?? "";
      const sized = positiveInt(s.labels.kv_cache_size_tokens);
      const blockSize = positiveInt(s.labels.block_size);
      const blocks = positiveInt(s.labels.num_gpu_blocks);
      const product = blockSize !== undefined && blocks !== undefined ? safePositive(blockSize * blocks) : undefined;
      const found =
        sized !== undefined
          ? { tokens: sized, source: "kv_cache_size_tokens" }
          : product !== undefined
            ? { tokens: product, source: "block_size x num_gpu_blocks" }
            : undefined;
      if (found && found.tokens > (perEngine.get(group)?.tokens ?? 0)) perEngine.set(group, found);
    }
    if (perEngine.size === 0) return undefined;
    const all = [...perEngine.values()];
    const engines = perEngine.size > 1 ? `, ${perEngine.size} engines` : "";
    // Past 2^53-1 (absurd labels) the sum is not exact and the contract refuses it: unreadable.
    const tokens = safePositive(all.reduce((a, e) => a + e.tokens, 0));
    return tokens === undefined ? undefined : { tokens, source: `${VLLM_METRICS.cacheConfig} (${all[0]!.source}${engines})` };
  },
  restartCounters: VLLM_METRICS.restartCounters,
};
