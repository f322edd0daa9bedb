/**
 * A simulated node's load reports to the router, as a real node agent would push them: the
 * fleet's report body, sent by the node agent's shared loop (agent/report-loop.ts).
 */
import type { NodeEngine } from "./config.ts";
import { NodeCredentials, startReportLoop, type ReportLoop, type ReportLoopEvent } from "../agent/report-loop.ts";

/**
 * The load-report body, as this fleet sends it. The router's contract for it lives in
 * src/contracts/; the fleet deliberately keeps its own copy and does not import it, so that it
 * stays independent of the router it is used to measure.
 */
export interface LoadReport {
  node_id: string;
  region: string;
  url: string;
  models: string[];
  kv_capacity_tokens: number;
  running: number;
  waiting: number;
  kv_usage: number;
  boot_id: string;
  /** The engine the node runs: `vllm`, `sglang`, `llama.cpp` or `other` (the fleet file's `engine`). */
  engine: NodeEngine;
  /** Its `max_running`, when the fleet file says `report_max_running`: the places a request waits for past them. */
  max_running_requests?: number;
}

export interface ReporterOptions {
  routerUrl: string;
  token: string;
  region: string;
  nodeId: string;
  intervalMs: number;
  report: () => LoadReport;
  log?: ((event: ReportLoopEvent) => void) | undefined;
}

export type Reporter = ReportLoop;

/**
 * Each simulated node's credentials with the router, kept across its process restarts: on a real
 * machine the agent beside the engine outlives an engine restart and keeps the node secret the
 * router gave it at registration (agent/credentials.ts). A clean stop deregisters the node
 * and drops its secret; a crash keeps it, and the node comes back reporting with it.
 */
const credentials = new Map<string, NodeCredentials>();

export function startReporter(o: ReporterOptions): Reporter {
  const key = `${o.routerUrl} ${o.region}/${o.nodeId}`;
  let kept = credentials.get(key);
  if (!kept || kept.regionToken !== o.token) credentials.set(key, (kept = new NodeCredentials(o.token)));
  return startReportLoop({
    routerUrl: o.routerUrl,
    token: o.token,
    credentials: kept,
    node: { region: o.region, node_id: o.nodeId },
    intervalMs: o.intervalMs,
    report: o.report,
    log: o.log,
  });
}
