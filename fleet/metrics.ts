/**
 * vLLM-style Prometheus text exposition for one node. Names follow vLLM's v1 engine
 * (`vllm:` prefix, a `model_name` label); counters carry the `_total` suffix as
 * prometheus_client writes them.
 */

/** A cumulative histogram with fixed buckets (seconds). */
export class Histogram {
  readonly buckets: number[];
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(buckets: number[]) {
    this.buckets = buckets;
    this.counts = buckets.map(() => 0);
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]!) this.counts[i]!++;
  }
}

export const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];

export interface MetricsSnapshot {
  model: string;
  running: number;
  waiting: number;
  kvUsage: number;
  promptTokens: number;
  generationTokens: number;
  prefixQueries: number;
  prefixHits: number;
  success: Record<string, number>;
  ttft: Histogram;
  queue: Histogram;
}

function fmt(n: number): string {
  return Number.isInteger(n) ? n.toFixed(1) : String(n);
}

export function renderMetrics(s: MetricsSnapshot): string {
  const l = `model_name="${s.model.replace(/["\\\n]/g, "_")}"`;
  const out: string[] = [];
  const metric = (name: string, type: string, help: string, lines: string[]) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...lines);
  };
  const hist = (name: string, help: string, h: Histogram) =>
    metric(name, "histogram", help, [
      ...h.buckets.map((b, i) => `${name}_bucket{${l},le="${fmt(b)}"} ${fmt(h.counts[i]!)}`),
      `${name}_bucket{${l},le="+Inf"} ${fmt(h.count)}`,
      `${name}_count{${l}} ${fmt(h.count)}`,
      `${name}_sum{${l}} ${fmt(h.sum)}`,
    ]);
  metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", [
    `vllm:num_requests_running{${l}} ${fmt(s.running)}`,
  ]);
  metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", [
    `vllm:num_requests_waiting{${l}} ${fmt(s.waiting)}`,
  ]);
  metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", [
    `vllm:kv_cache_usage_perc{${l}} ${fmt(s.kvUsage)}`,
  ]);
  metric("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.", [
    `vllm:gpu_cache_usage_perc{${l}} ${fmt(s.kvUsage)}`,
  ]);
  metric("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", [
    `vllm:prefix_cache_queries_total{${l}} ${fmt(s.prefixQueries)}`,
  ]);
  metric("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", [
    `vllm:prefix_cache_hits_total{${l}} ${fmt(s.prefixHits)}`,
  ]);
  metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", [
    `vllm:prompt_tokens_total{${l}} ${fmt(s.promptTokens)}`,
  ]);
  metric("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", [
    `vllm:generation_tokens_total{${l}} ${fmt(s.generationTokens)}`,
  ]);
  metric(
    "vllm:request_success_total",
    "counter",
    "Count of successfully processed requests.",
    Object.entries(s.success).map(([reason, n]) => `vllm:request_success_total{finished_reason="${reason}",${l}} ${fmt(n)}`),
  );
  hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.ttft);
  hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", s.queue);
  return out.join("\n") + "\n";
}
