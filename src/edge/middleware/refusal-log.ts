/**
 * Every request the edge answers without a node is visible: one log line and one metric each,
 * whatever refused it (docs/OBSERVABILITY.md, "Refusals").
 *
 * This middleware sees every answer of the edge: one with an error status that no node produced
 * (no `x-warmpath-node`) is a refusal: bad input, credentials, the edge's ceiling, unknown routes
 * and models, and every refusal of the regions (their rate limits, budgets' `insufficient_quota`,
 * over-share, `objective_unreachable`, saturation, no node, no region reachable, a stored response
 * that is not the tenant's), which src/edge/forward.ts names by an {@link ApiError}'s
 * `refusal` detail. Each gets exactly one `refusal` line (request id, trace id, tenant id if
 * authenticated, method, route, status, error type and code, the reason, and for a region's
 * refusal the model and the regions' attempts; never the key, the body, the message or the raw
 * path), one Analytics Engine data point, and one count in `warmpath_edge_refusals_total` by
 * status, code and reason (this isolate's). No decision line: the refusal line is the request's.
 *
 * A flood must not turn logging into its amplifier: per isolate, at most {@link LINES_PER_SECOND}
 * lines a second for each status and code (log-limit.ts); past it refusals are only counted, and
 * one `refusals_suppressed` line says how many when the second is over (the data point is still
 * written: Analytics Engine samples a flood itself).
 */
import { createMiddleware } from "hono/factory";
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-types.ts";
import { EXPLAIN } from "../../contracts/headers.ts";
import type { RefusalDetail } from "../../http/errors.ts";
import { LogLimiter, MAX_LOG_KEYS } from "../../proxy/log-limit.ts";

/** Log lines a second per isolate for one status and code; the rest are counted in a summary line. */
export const LINES_PER_SECOND = 20;
/** Error bodies are small: a larger one is not read for its code. */
const MAX_ERROR_BODY_BYTES = 8192;

export interface RefusalLine extends Partial<Omit<RefusalDetail, "reason">> {
  event: "refusal";
  request_id: string;
  /** The request's trace (an inference path's; middleware/trace.ts). */
  trace_id?: string | undefined;
  tenant?: string | undefined;
  method: string;
  /** The route's pattern (`/v1/chat/completions`, `/v1/nodes/:region/:id`), never the raw path. */
  route: string;
  status: number;
  type: string;
  code: string;
  /** What refused it (a closed set: {@link reasonOf}, or a region's refusal as forward.ts names it). */
  reason: string;
  duration_ms: number;
}

/** This isolate's refusals since it started, by `status code reason` (GET /metrics). */
const totals = new Map<string, { status: number; code: string; reason: string; count: number }>();
const limiter = new LogLimiter("refusals_suppressed", LINES_PER_SECOND);

export function edgeRefusalTotals(): Array<{ status: number; code: string; reason: string; count: number }> {
  return [...totals.values()];
}

/**
 * What refused a request the edge itself answered (a region's refusal names its own reason): by
 * status, and the code where one status has several causes.
 */
function reasonOf(status: number, code: string): string {
  if (status === 401) return "authentication";
  if (status === 403) return "permission";
  if (status === 404) return code === "model_not_found" ? "unknown-model" : "not-found";
  if (status === 429) return code === "edge_rate_limit_exceeded" ? "edge-rate-limit" : "rate-limited";
  if (status >= 500) return code === "invalid_configuration" ? "configuration" : "server-error";
  return "invalid-request";
}

/** Counts and (within the flood bound) logs one refusal; exported for tests. */
export function recordRefusal(line: RefusalLine, now: number, dataset: AnalyticsEngineDataset | undefined): void {
  const key = `${line.status} ${line.code} ${line.reason}`;
  const total = totals.get(key);
  if (total) total.count++;
  else if (totals.size < MAX_LOG_KEYS) totals.set(key, { status: line.status, code: line.code, reason: line.reason, count: 1 });
  if (limiter.allow(`${line.status} ${line.code}`, now)) console.log(JSON.stringify(line));
  try {
    // Positions as the decision lines' (src/proxy/decision-log.ts): blob4 the model, blob5 "refused", blob6 the code; blob8 the reason.
    dataset?.writeDataPoint({
      indexes: [line.tenant ?? ""],
      blobs: [line.tenant ?? "", "", "", line.model ?? "", "refused", line.code, "", line.reason],
      doubles: [line.status, line.prompt_tokens_estimated ?? 0, 0, 0, 0, 0, 0, -1, line.duration_ms, 0, 0, line.attempts?.length ?? 0],
    });
  } catch (e) {
    console.error(JSON.stringify({ event: "analytics_error", request_id: line.request_id, message: String(e) }));
  }
}

/** The `code` and `type` of an error answer in OpenAI's shape (or Anthropic's), if it is one. */
async function errorOf(res: Response): Promise<{ type: string; code: string }> {
  const unknown = { type: "unknown", code: `http_${res.status}` };
  const length = Number(res.headers.get("content-length") ?? "0");
  if (!(res.headers.get("content-type") ?? "").includes("json") || length > MAX_ERROR_BODY_BYTES) return unknown;
  try {
    const body = (await res.clone().json()) as { error?: { type?: unknown; code?: unknown } };
    const type = typeof body.error?.type === "string" ? body.error.type : unknown.type;
    const code = typeof body.error?.code === "string" ? body.error.code : unknown.code;
    return { type: type.slice(0, 64), code: code.slice(0, 64) };
  } catch {
    return unknown;
  }
}

export const refusalLog: MiddlewareHandler<AppEnv> = createMiddleware<AppEnv>(async (c, next) => {
  const started = Date.now();
  await next();
  const res = c.res;
  if (res.status < 400 || res.headers.has(EXPLAIN.node)) return;
  const { type, code } = await errorOf(res);
  const { reason, ...detail }: RefusalDetail = c.get("refusal") ?? { reason: reasonOf(res.status, code) };
  recordRefusal(
    {
      event: "refusal",
      request_id: c.get("requestId"),
      trace_id: c.get("trace")?.traceId,
      tenant: c.get("tenant")?.id,
      method: c.req.method.slice(0, 16),
      route: c.req.routePath,
      status: res.status,
      type,
      code,
      reason,
      ...detail,
      duration_ms: Date.now() - started,
    },
    Date.now(),
    c.env.ANALYTICS,
  );
});
