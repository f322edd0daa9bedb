/**
 * The W3C trace headers a simulated node received (`traceparent`, `tracestate`, with the request's
 * `x-request-id`), for tests and for looking at a trace locally: `GET /admin/traces` lists the
 * last {@link MAX_KEPT} inference requests', oldest first. A real engine (vLLM, SGLang with
 * tracing on) makes them the parents of its own spans; this node only keeps them.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { sendJson } from "./http-io.ts";
import type { NodeRuntime } from "./node-runtime.ts";

/** Requests remembered per node: a test reads its own within a few requests. */
export const MAX_KEPT = 256;

export interface ReceivedTrace {
  request_id: string | null;
  traceparent: string | null;
  tracestate: string | null;
}

const kept = new WeakMap<NodeRuntime, ReceivedTrace[]>();

function header(req: IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  return typeof v === "string" ? v.slice(0, 1024) : Array.isArray(v) ? v.join(",").slice(0, 1024) : null;
}

/** Keeps an inference request's trace headers (a bounded ring). */
export function recordTrace(node: NodeRuntime, req: IncomingMessage): void {
  let list = kept.get(node);
  if (!list) kept.set(node, (list = []));
  list.push({ request_id: header(req, "x-request-id"), traceparent: header(req, "traceparent"), tracestate: header(req, "tracestate") });
  if (list.length > MAX_KEPT) list.shift();
}

export function serveTraces(node: NodeRuntime, res: ServerResponse): void {
  sendJson(res, 200, { received: kept.get(node) ?? [] });
}
