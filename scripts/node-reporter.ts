/**
 * node-reporter: pushes a real inference server's load to warmpath.
 *
 * vLLM and SGLang expose their load on a Prometheus `/metrics` endpoint but do not push it
 * anywhere. Run this next to each GPU node (a sidecar): every interval it scrapes the server's
 * metrics and posts a load report to the router's node API. The first report registers the node;
 * when the reporter stops (SIGINT/SIGTERM) it deregisters it, and if it dies the router expires
 * the node after the region's silence timeout. The loop (scripts/agent/report-loop.ts) sends one
 * report at a time and logs to stderr once when reports start failing and once when they recover.
 *
 *   npx node scripts/node-reporter.ts --router https://warmpath.example.com --region us-east \
 *     --node-id gpu-1 --url http://10.0.0.5:8000 --models llama-3.1-8b-instruct \
 *     --kv-capacity-tokens 500000 [--metrics-url http://10.0.0.5:8000/metrics] [--interval-ms 1000]
 *
 * The node token is read from the WARMPATH_NODE_TOKEN environment variable, never from argv
 * (argv is visible to every user of the machine).
 */
import { parseArgs } from "node:util";
import { randomUUID } from "node:crypto";
import type { NodeReport } from "../src/contracts/node.ts";
import { startReportLoop } from "./agent/report-loop.ts";

/** Metric names per engine: running requests, waiting requests, KV cache usage (0..1). */
const ENGINE_METRICS = {
  vllm: {
    running: ["vllm:num_requests_running"],
    waiting: ["vllm:num_requests_waiting"],
    kvUsage: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
  },
  sglang: {
    running: ["sglang:num_running_reqs"],
    waiting: ["sglang:num_queue_reqs"],
    kvUsage: ["sglang:token_usage"],
  },
} as const;

/** Sums a metric's samples across label sets (e.g. one per model), from Prometheus text. */
export function metricValue(text: string, names: readonly string[]): number | undefined {
  for (const name of names) {
    let total: number | undefined;
    for (const line of text.split("\n")) {
      if (!line.startsWith(name)) continue;
      const rest = line.slice(name.length);
      if (rest[0] !== " " && rest[0] !== "{") continue;
      const value = Number(
        rest
          .slice(rest.lastIndexOf(rest.includes("}") ? "}" : " ") + 1)
          .trim()
          .split(/\s+/)[0],
      );
      if (Number.isFinite(value)) total = (total ?? 0) + value;
    }
    if (total !== undefined) return total;
  }
  return undefined;
}

export interface LoadSample {
  running: number;
  waiting: number;
  kvUsage: number;
}

/** Reads running, waiting and KV usage from a metrics page, trying vLLM's names then SGLang's. */
export function parseLoad(text: string): LoadSample {
  for (const names of Object.values(ENGINE_METRICS)) {
    const running = metricValue(text, names.running);
    const waiting = metricValue(text, names.waiting);
    if (running === undefined && waiting === undefined) continue;
    const kv = metricValue(text, names.kvUsage) ?? 0;
    return {
      running: Math.max(0, Math.round(running ?? 0)),
      waiting: Math.max(0, Math.round(waiting ?? 0)),
      kvUsage: Math.min(1, Math.max(0, kv)),
    };
  }
  throw new Error("no vLLM or SGLang load metrics found on the metrics page");
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      router: { type: "string" },
      region: { type: "string" },
      "node-id": { type: "string" },
      url: { type: "string" },
      models: { type: "string" },
      "kv-capacity-tokens": { type: "string" },
      "metrics-url": { type: "string" },
      "interval-ms": { type: "string", default: "1000" },
    },
  });
  const missing = ["router", "region", "node-id", "url", "models", "kv-capacity-tokens"].filter((k) => !values[k as keyof typeof values]);
  if (missing.length) throw new Error(`missing --${missing.join(", --")}`);
  const token = process.env.WARMPATH_NODE_TOKEN;
  if (!token) throw new Error("set WARMPATH_NODE_TOKEN to the region's node token");
  const metricsUrl = values["metrics-url"] ?? values.url!.replace(/\/$/, "") + "/metrics";
  const intervalMs = Number(values["interval-ms"]);
  const bootId = randomUUID();

  const loop = startReportLoop({
    routerUrl: values.router!,
    token,
    node: { region: values.region!, node_id: values["node-id"]! },
    intervalMs,
    timeoutMs: 5000,
    // Scrape, then report: if the scrape fails, this tick reports nothing (logged as a failing report).
    report: async (): Promise<NodeReport> => {
      const load = parseLoad(await (await fetch(metricsUrl, { signal: AbortSignal.timeout(intervalMs) })).text());
      return {
        node_id: values["node-id"]!,
        region: values.region!,
        url: values.url!,
        models: values.models!.split(","),
        kv_capacity_tokens: Number(values["kv-capacity-tokens"]),
        running: load.running,
        waiting: load.waiting,
        kv_usage: load.kvUsage,
        boot_id: bootId,
      };
    },
    log: (e) => console.error(e.event === "report_failing" ? `reports failing: ${e.error}` : "reports ok"),
  });
  const stop = async () => {
    await loop.stop(true);
    process.exit(0);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e) => {
    console.error((e as Error).message);
    process.exit(1);
  });
}
