/**
 * The node agent's side of the router's node API (src/api/nodes.ts), shared by the simulated
 * fleet (fleet/report.ts) and warmpath-agent (scripts/agent/agent.ts):
 *
 * - `postReport`: `POST {router}/v1/nodes/report`, the node's load; the first one registers it.
 * - `deregisterNode`: `DELETE {router}/v1/nodes/{region}/{node_id}`; the node leaves at once.
 * - `startReportLoop`: the fleet's loop: every interval, build a report and post it; on a clean
 *   stop, optionally deregister.
 *
 * The router only believes what nodes tell it; if it is not up yet, the report is simply tried
 * again later (one log line when reports start failing, one when they recover). Generic over the
 * report body, and imports nothing from the router (src/): the agent speaks the wire format, it
 * does not share the router's code.
 */
import { briefBody, httpRequestText } from "./http.ts";

/** Which node is reporting: names it in log events and in the deregistration path. */
export interface ReportingNode {
  region: string;
  node_id: string;
}

export type ReportLoopEvent =
  { event: "report_ok"; node_id: string; region: string } | { event: "report_failing"; node_id: string; region: string; error: string };

export interface ReportLoopOptions<Body> {
  routerUrl: string;
  token: string;
  node: ReportingNode;
  intervalMs: number;
  /** Timeout of one report POST; default max(1000, intervalMs). */
  timeoutMs?: number;
  /**
   * This tick's report body. A throw or rejection (e.g. a failed metrics scrape) means this tick
   * reports nothing, and counts as a failed report.
   */
  report: () => Body | Promise<Body>;
  log?: (event: ReportLoopEvent) => void;
}

export interface ReportLoop {
  /** Sends a report now (e.g. right after a restart, so the router learns the new boot_id). */
  kick(): void;
  /** Stops reporting; with `deregister`, tells the router the node is leaving (best effort). */
  stop(deregister: boolean): Promise<void>;
}

/** Default timeout of a deregistration: a shutdown should not wait long on a router that is gone. */
export const DEREGISTER_TIMEOUT_MS = 2000;

/**
 * Posts one report. Resolves on 2xx; rejects otherwise, with the router's own error message
 * when it sent one (`HTTP 401: Invalid node token`), so a misconfiguration reads in the log.
 */
export async function postReport(routerUrl: string, token: string, body: unknown, timeoutMs: number): Promise<void> {
  const res = await httpRequestText(`${routerUrl.replace(/\/+$/, "")}/v1/nodes/report`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    timeoutMs,
    maxBytes: 64 * 1024,
  });
  if (res.status < 200 || res.status > 299) throw new Error(`HTTP ${res.status}${errorDetail(res.text)}`);
}

/**
 * Removes the node from its region. Resolves when the router confirms it (2xx) or does not know
 * the node (404: already gone, e.g. expired by silence); rejects otherwise.
 */
export async function deregisterNode(
  routerUrl: string,
  token: string,
  node: ReportingNode,
  timeoutMs: number = DEREGISTER_TIMEOUT_MS,
): Promise<void> {
  const path = `/v1/nodes/${encodeURIComponent(node.region)}/${encodeURIComponent(node.node_id)}`;
  const res = await httpRequestText(routerUrl.replace(/\/+$/, "") + path, {
    method: "DELETE",
    headers: { authorization: `Bearer ${token}` },
    timeoutMs,
    maxBytes: 64 * 1024,
  });
  if (res.status === 404 || (res.status >= 200 && res.status <= 299)) return;
  throw new Error(`HTTP ${res.status}${errorDetail(res.text)}`);
}

/** `: message` from an OpenAI-shaped error body (the router's), else from its first line. */
function errorDetail(text: string): string {
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
    if (typeof message === "string") return `: ${briefBody(message)}`;
  } catch {
    // not JSON
  }
  const brief = briefBody(text);
  return brief ? `: ${brief}` : "";
}

export function startReportLoop<Body>(o: ReportLoopOptions<Body>): ReportLoop {
  const { node_id, region } = o.node;
  const timeoutMs = o.timeoutMs ?? Math.max(1000, o.intervalMs);
  let failing = false;
  let stopped = false;
  let inFlight: Promise<void> | undefined;

  const post = async () => {
    const body = await o.report(); // called synchronously by send(): the report is this tick's snapshot
    await postReport(o.routerUrl, o.token, body, timeoutMs);
  };

  const send = () => {
    if (stopped || inFlight) return; // one report at a time: a slow router must not pile them up
    inFlight = post()
      .then(() => {
        if (failing) o.log?.({ event: "report_ok", node_id, region });
        failing = false;
      })
      .catch((err: unknown) => {
        if (!failing && !stopped) {
          o.log?.({ event: "report_failing", node_id, region, error: String((err as Error)?.message ?? err) });
        }
        failing = true;
      })
      .finally(() => {
        inFlight = undefined;
      });
  };

  const timer = setInterval(send, o.intervalMs);
  send();

  return {
    kick: send,
    async stop(deregister) {
      stopped = true;
      clearInterval(timer);
      await inFlight;
      if (!deregister) return;
      try {
        await deregisterNode(o.routerUrl, o.token, o.node);
      } catch {
        // The router is gone too: it will expire the node by silence.
      }
    },
  };
}
