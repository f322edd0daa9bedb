/**
 * The node agent's load-report loop, shared by the simulated fleet (fleet/report.ts) and the
 * sidecar for real inference servers (scripts/node-reporter.ts): every interval, build a report
 * and POST it to `{router}/v1/nodes/report`; on a clean stop, optionally
 * `DELETE {router}/v1/nodes/{region}/{node_id}`.
 *
 * The router only believes what nodes tell it; if it is not up yet, the report is simply tried
 * again on the next tick (one log line when reports start failing, one when they recover).
 * Generic over the report body, and imports nothing from the router (src/): the agent speaks the
 * wire format, it does not share the router's code.
 */
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";

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

const DEREGISTER_TIMEOUT_MS = 2000;

/**
 * One request on a fresh connection (agent: false). fetch() would pool keep-alive sockets that
 * outlive a shutdown by seconds; a report a second does not need connection reuse.
 */
function call(method: string, url: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const send = u.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send(u, { method, headers, agent: false, timeout: timeoutMs }, (res) => {
      res.resume(); // drain the body
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`timed out after ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

export function startReportLoop<Body>(o: ReportLoopOptions<Body>): ReportLoop {
  const base = o.routerUrl.replace(/\/+$/, "");
  const headers = { authorization: `Bearer ${o.token}`, "content-type": "application/json" };
  const { node_id, region } = o.node;
  const timeoutMs = o.timeoutMs ?? Math.max(1000, o.intervalMs);
  let failing = false;
  let stopped = false;
  let inFlight: Promise<void> | undefined;

  const post = async () => {
    const body = await o.report(); // called synchronously by send(): the report is this tick's snapshot
    const status = await call("POST", `${base}/v1/nodes/report`, headers, JSON.stringify(body), timeoutMs);
    if (status < 200 || status > 299) throw new Error(`HTTP ${status}`);
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
        const path = `/v1/nodes/${encodeURIComponent(region)}/${encodeURIComponent(node_id)}`;
        await call("DELETE", base + path, { authorization: headers.authorization }, undefined, DEREGISTER_TIMEOUT_MS);
      } catch {
        // The router is gone too: it will expire the node by silence.
      }
    },
  };
}
