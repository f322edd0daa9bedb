/**
 * The node agent's side of the router's node API (src/api/nodes.ts), shared by the simulated
 * fleet (fleet/report.ts) and warmpath-agent (agent/agent.ts):
 *
 * - `postReport`: `POST {router}/v1/nodes/report`, the node's load; the first one registers it
 *   (with the region's node token) and returns the node's own secret, which every later report
 *   carries instead (agent/credentials.ts).
 * - `deregisterNode`: `DELETE {router}/v1/nodes/{region}/{node_id}` with the node's secret; the
 *   node leaves at once.
 * - `startReportLoop`: the fleet's loop: every interval, build a report and post it; a stop aborts
 *   the report in flight (a registration's after the deregistration's timeout), and a clean stop
 *   optionally deregisters.
 *
 * The router only believes what nodes tell it; if it is not up yet, the report is simply tried
 * again later (one log line when reports start failing, one when they recover). Generic over the
 * report body, and imports nothing from the router (src/): the agent speaks the wire format, it
 * does not share the router's code.
 */
import { NODE_SECRET_PATTERN, NodeCredentials } from "./credentials.ts";
import { briefBody, httpRequestText, type HttpResponse } from "./http.ts";
import { MAX_TIMER_MS } from "./limits.ts";

export { NodeCredentials } from "./credentials.ts";

/**
 * The router refused to let this credential act as the node (403): the id is registered by another
 * credential (this agent's previous run, which had the secret, or someone else), or it is a static
 * node reported at another URL. Retried after `retryAfterMs` (the router's `Retry-After`: when the
 * holder's entry expires if nothing reports for it), else with backoff.
 */
export class NodeIdentityError extends Error {
  readonly code: string;
  readonly retryAfterMs: number | undefined;
  constructor(message: string, code: string, retryAfterMs: number | undefined) {
    super(message);
    this.code = code;
    this.retryAfterMs = retryAfterMs;
  }
}

/** Which node is reporting: names it in log events and in the deregistration path. */
export interface ReportingNode {
  region: string;
  node_id: string;
}

export type ReportLoopEvent =
  { event: "report_ok"; node_id: string; region: string } | { event: "report_failing"; node_id: string; region: string; error: string };

export interface ReportLoopOptions<Body> {
  routerUrl: string;
  /** The region's node token (registers the node; the loop keeps the node secret it is given). */
  token: string;
  /**
   * The node's credentials, when the caller keeps them beyond this loop (the fleet: a simulated
   * engine restart starts a new loop, but a real node's agent outlives its engine and keeps the
   * node's secret). Default: a fresh set from `token`, registering the node.
   */
  credentials?: NodeCredentials | undefined;
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
 * A stop's end for a report in flight (`controller` aborts it): one carrying the node's secret ends
 * now; a registration (no secret yet) gets up to the deregistration's own timeout, since its answer
 * carries the secret the DELETE needs (without it the node stays registered until it expires by
 * silence). Either way a router that never answers holds a stop about DEREGISTER_TIMEOUT_MS, not
 * the report's timeout. Returns what clears the grace once the report has settled.
 */
export function abortReportOnStop(controller: AbortController, credentials: NodeCredentials): () => void {
  if (credentials.secret !== undefined) {
    controller.abort();
    return () => {};
  }
  const grace = setTimeout(() => controller.abort(), DEREGISTER_TIMEOUT_MS);
  return () => clearTimeout(grace);
}

/** The code of an OpenAI-shaped error body (the router's), if any. */
function errorCode(text: string): string | undefined {
  try {
    const code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code;
    return typeof code === "string" ? code : undefined;
  } catch {
    return undefined;
  }
}

/** The router's `Retry-After` (seconds) in ms, at most {@link MAX_TIMER_MS}: a caller's timer takes no more. */
function retryAfterMs(res: HttpResponse): number | undefined {
  const raw = res.headers["retry-after"];
  const seconds = Number(Array.isArray(raw) ? raw[0] : raw);
  return raw !== undefined && Number.isFinite(seconds) && seconds >= 0 ? Math.min(MAX_TIMER_MS, Math.round(seconds * 1000)) : undefined;
}

/** Whether the answer registered the node (it then carries the node's secret, kept in `credentials`). */
export interface ReportResult {
  registered: boolean;
}

/**
 * Posts one report with the node's secret once it has one, else the region token (registering the
 * node and keeping the secret the answer carries). Resolves on 2xx. A secret the router no longer
 * knows (401: the node expired or was removed, e.g. while the agent was cut off) is dropped and
 * the report sent again at once with the region token, registering the node again. A 403 about the
 * node's identity rejects with a {@link NodeIdentityError}; anything else rejects with the router's
 * own error message when it sent one (`HTTP 401: Invalid node token`), so a misconfiguration reads
 * in the log. `signal` aborts it (a shutdown does not wait for a report to a silent router).
 */
export async function postReport(
  routerUrl: string,
  credentials: NodeCredentials,
  body: unknown,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<ReportResult> {
  for (;;) {
    const usedSecret = credentials.secret !== undefined;
    const res = await httpRequestText(`${routerUrl.replace(/\/+$/, "")}/v1/nodes/report`, {
      method: "POST",
      headers: { authorization: `Bearer ${credentials.bearer()}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      timeoutMs,
      maxBytes: 64 * 1024,
      signal,
    });
    if (res.status >= 200 && res.status <= 299) {
      let secret: unknown;
      try {
        secret = (JSON.parse(res.text) as { node_secret?: unknown }).node_secret;
      } catch {
        secret = undefined; // an older router answers without one: the region token it is
      }
      if (typeof secret === "string" && NODE_SECRET_PATTERN.test(secret)) {
        credentials.remember(secret);
        return { registered: true };
      }
      return { registered: false };
    }
    const code = errorCode(res.text);
    if (usedSecret && res.status === 401) {
      credentials.forget();
      continue; // register again with the region token (one retry: the next answer is final)
    }
    if (res.status === 403 && (code === "node_identity_mismatch" || code === "static_node_url")) {
      // A secret refused here is no longer this node's (its id was registered again): drop it.
      if (usedSecret) credentials.forget();
      throw new NodeIdentityError(`HTTP 403${errorDetail(res.text)}`, code, retryAfterMs(res));
    }
    throw new Error(`HTTP ${res.status}${errorDetail(res.text)}`);
  }
}

/**
 * Removes the node from its region with its secret (which the router revokes). Resolves `true`
 * when the router confirms it (2xx) or no longer knows the node or its secret (404, 401: already
 * gone, e.g. expired by silence); `false` without sending anything when the agent holds no secret
 * (a static node, or one whose registration answer never arrived: the router expires it by
 * silence). Rejects otherwise.
 */
export async function deregisterNode(
  routerUrl: string,
  credentials: NodeCredentials,
  node: ReportingNode,
  timeoutMs: number = DEREGISTER_TIMEOUT_MS,
): Promise<boolean> {
  if (credentials.secret === undefined) return false;
  const path = `/v1/nodes/${encodeURIComponent(node.region)}/${encodeURIComponent(node.node_id)}`;
  const res = await httpRequestText(routerUrl.replace(/\/+$/, "") + path, {
    method: "DELETE",
    headers: { authorization: `Bearer ${credentials.secret}` },
    timeoutMs,
    maxBytes: 64 * 1024,
  });
  if (res.status === 404 || res.status === 401 || (res.status >= 200 && res.status <= 299)) {
    credentials.forget();
    return true;
  }
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
  const credentials = o.credentials ?? new NodeCredentials(o.token);
  let failing = false;
  let stopped = false;
  let inFlight: Promise<void> | undefined;
  /** Aborted by stop(): a report in flight does not hold a stop for its timeout. */
  const abort = new AbortController();

  const post = async () => {
    const body = await o.report(); // called synchronously by send(): the report is this tick's snapshot
    await postReport(o.routerUrl, credentials, body, timeoutMs, abort.signal);
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
      const settled = abortReportOnStop(abort, credentials);
      await inFlight;
      settled();
      if (!deregister) return;
      try {
        await deregisterNode(o.routerUrl, credentials, o.node);
      } catch {
        // The router is gone too: it will expire the node by silence.
      }
    },
  };
}
