/**
 * A simulated node's load reports to the router, as a real node agent would push them: the
 * fleet's report body, sent by the node agent's shared loop (scripts/agent/report-loop.ts).
 */
import { startReportLoop, type ReportLoop, type ReportLoopEvent } from "../scripts/agent/report-loop.ts";

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

export function startReporter(o: ReporterOptions): Reporter {
  return startReportLoop({
    routerUrl: o.routerUrl,
    token: o.token,
    node: { region: o.region, node_id: o.nodeId },
    intervalMs: o.intervalMs,
    report: o.report,
    log: o.log,
  });
}
