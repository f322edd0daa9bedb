/**
 * A node's HTTP route table: which handler answers which method and path, the `hang` fault
 * (applied before routing, to everything but /admin/*), the 404 for anything else, and the
 * translation of a handler's error into an OpenAI-shaped error answer (/v1/messages answers its
 * own, in Anthropic's shape: anthropic.ts).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { RequestError } from "./prompt.ts";
import { sendError } from "./http-io.ts";
import { inference, listModels } from "./openai-routes.ts";
import { responses } from "./responses.ts";
import { messages } from "./anthropic.ts";
import { serveMetrics } from "./metrics-route.ts";
import { getState, postCrash, postFaults, postResetPrefixCache, postRestart, postUnknownAdmin, type Lifecycle } from "./control-routes.ts";
import type { NodeRuntime } from "./node-runtime.ts";
import { recordTrace, serveTraces } from "./trace-log.ts";

export interface RouteContext {
  node: NodeRuntime;
  life: Lifecycle;
}

type Handler = (ctx: RouteContext, req: IncomingMessage, res: ServerResponse, path: string) => void | Promise<void>;

interface Route {
  method: string;
  /** An exact path, or a prefix followed by `*`. The first matching route answers. */
  path: string;
  handler: Handler;
}

const health: Handler = (_ctx, _req, res) => {
  res.writeHead(200, { "content-length": 0 });
  res.end();
};

const ROUTES: readonly Route[] = [
  { method: "POST", path: "/v1/chat/completions", handler: ({ node }, req, res) => inference(node, "chat", req, res) },
  { method: "POST", path: "/v1/completions", handler: ({ node }, req, res) => inference(node, "completion", req, res) },
  { method: "POST", path: "/v1/responses", handler: ({ node }, req, res) => responses(node, req, res) },
  { method: "POST", path: "/v1/messages", handler: ({ node }, req, res) => messages(node, req, res) },
  { method: "GET", path: "/health", handler: health },
  { method: "GET", path: "/v1/models", handler: ({ node }, _req, res) => listModels(node, res) },
  { method: "GET", path: "/metrics", handler: ({ node }, _req, res) => serveMetrics(node, res) },
  { method: "POST", path: "/reset_prefix_cache", handler: ({ node }, _req, res) => postResetPrefixCache(node, res) },
  { method: "GET", path: "/admin/state", handler: ({ node }, _req, res) => getState(node, res) },
  { method: "GET", path: "/admin/traces", handler: ({ node }, _req, res) => serveTraces(node, res) },
  { method: "POST", path: "/admin/faults", handler: ({ node }, req, res) => postFaults(node, req, res) },
  { method: "POST", path: "/admin/restart", handler: ({ node, life }, req, res) => postRestart(node, life, req, res) },
  { method: "POST", path: "/admin/crash", handler: ({ node, life }, req, res) => postCrash(node, life, req, res) },
  { method: "POST", path: "/admin/*", handler: (_ctx, req, res, path) => postUnknownAdmin(req, res, path) },
];

const matches = (pattern: string, path: string) => (pattern.endsWith("*") ? path.startsWith(pattern.slice(0, -1)) : path === pattern);

async function dispatch(ctx: RouteContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? "/").split("?")[0]!;
  const method = req.method ?? "GET";
  // Every inference request's trace headers are kept, a failing one's too (trace-log.ts).
  if (method === "POST" && path.startsWith("/v1/")) recordTrace(ctx.node, req);
  if (ctx.node.faults.hang && !path.startsWith("/admin/")) return; // accepted, never answered (the socket is closed on crash/stop)
  const route = ROUTES.find((r) => r.method === method && matches(r.path, path));
  if (route) return route.handler(ctx, req, res, path);
  sendError(res, 404, `${method} ${path} not found`, "NotFoundError");
}

/** The node server's request listener. */
export function requestListener(ctx: RouteContext): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    dispatch(ctx, req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      if (err instanceof RequestError) {
        const type = err.type ?? (err.status === 404 ? "NotFoundError" : "BadRequestError");
        sendError(res, err.status, err.message, type, err.param, err.code ?? err.status);
      } else {
        sendError(res, 500, String((err as Error)?.message ?? err), "InternalServerError");
      }
    });
  };
}
