/**
 * Pushes a node's load report to the router on an interval, as a real node agent would.
 * The router only believes what nodes tell it; if it is not up yet, the report is simply tried
 * again on the next tick (one log line when reports start failing, one when they recover).
 */

import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";

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
  intervalMs: number;
  report: () => LoadReport;
  log?: (event: Record<string, unknown>) => void;
}

export interface Reporter {
  /** Sends a report now (e.g. right after a restart, so the router learns the new boot_id). */
  kick(): void;
  /** Stops reporting; with `deregister`, tells the router the node is leaving (best effort). */
  stop(deregister: boolean): Promise<void>;
}

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

export function startReporter(o: ReporterOptions): Reporter {
  const base = o.routerUrl.replace(/\/+$/, "");
  const headers = { authorization: `Bearer ${o.token}`, "content-type": "application/json" };
  let failing = false;
  let stopped = false;
  let inFlight: Promise<void> | undefined;

  const send = () => {
    if (stopped || inFlight) return; // one report at a time: a slow router must not pile them up
    const body = o.report();
    inFlight = call("POST", `${base}/v1/nodes/report`, headers, JSON.stringify(body), Math.max(1000, o.intervalMs))
      .then((status) => {
        if (status < 200 || status > 299) throw new Error(`HTTP ${status}`);
        if (failing) o.log?.({ event: "report_ok", node_id: body.node_id, region: body.region });
        failing = false;
      })
      .catch((err: unknown) => {
        if (!failing && !stopped) {
          o.log?.({ event: "report_failing", node_id: body.node_id, region: body.region, error: String((err as Error)?.message ?? err) });
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
      const { region, node_id } = o.report();
      try {
        const path = `/v1/nodes/${encodeURIComponent(region)}/${encodeURIComponent(node_id)}`;
        await call("DELETE", base + path, { authorization: headers.authorization }, undefined, 2000);
      } catch {
        // The router is gone too: it will expire the node by silence.
      }
    },
  };
}
