/**
 * GET /metrics: the current process's gauges, counters and histograms as vLLM-style Prometheus
 * text (rendered by metrics.ts).
 */
import type { ServerResponse } from "node:http";
import { renderMetrics } from "./metrics.ts";
import type { NodeRuntime } from "./node-runtime.ts";

export function serveMetrics(node: NodeRuntime, res: ServerResponse): void {
  const engine = node.engine;
  const c = engine.counters;
  const text = renderMetrics({
    model: node.model,
    running: engine.numRunning,
    waiting: engine.numWaiting,
    kvUsage: engine.cache.usage(),
    promptTokens: c.promptTokens,
    generationTokens: c.generationTokens,
    prefixQueries: c.prefixQueryTokens,
    prefixHits: c.prefixHitTokens,
    success: node.success,
    ttft: node.ttft,
    queue: node.queueTime,
  });
  res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
  res.end(text);
}
