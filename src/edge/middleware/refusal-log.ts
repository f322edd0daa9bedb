/**
 * Every request the edge answers without a node is visible: one log line and one metric each.
 *
 * A 400, 401, 403, 404, 413, 415, 429 or 5xx answered before (or instead of) routing used to leave
 * no trace, so support could not find a failing request by its `x-request-id`. This middleware
 * sees every answer of the edge: one with an error status that no node produced (no
 * `x-warmpath-node`) and that no region's decision line already covers (forward.ts marks those)
 * gets a `refusal` line (request id, tenant id if authenticated, method, route, status, error type
 * and code; never the key, the body, the message or the raw path) and an Analytics Engine data
 * point, and is counted by status and code in this isolate (`warmpath_edge_refusals_total`).
 *
 * A flood must not turn logging into its amplifier: per isolate, at most
 * {@link LINES_PER_SECOND} lines a second for each status and code; past it refusals are only
 * counted, and one `refusals_suppressed` line says how many when the second is over (the data
 * point is still written: Analytics Engine samples a flood itself).
 */
import { createMiddleware } from "hono/factory";
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-types.ts";
import { EXPLAIN } from "../../contracts/headers.ts";

/** Log lines a second per isolate for one status and code; the rest are counted in a summary line. */
export const LINES_PER_SECOND = 20;
/** Error bodies are small: a larger one is not read for its code. */
const MAX_ERROR_BODY_BYTES = 8192;
/** Distinct (status, code) pairs counted per isolate: codes come from the router's own closed set. */
const MAX_KEYS = 256;

export interface RefusalLine {
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
  duration_ms: number;
}

/** This isolate's refusals since it started, by `status code` (GET /metrics). */
const totals = new Map<string, { status: number; code: string; count: number }>();
/** The current second's lines and suppressed refusals, by the same key. */
let window = { start: 0, lines: new Map<string, number>(), suppressed: new Map<string, number>() };

export function edgeRefusalTotals(): Array<{ status: number; code: string; count: number }> {
  return [...totals.values()];
}

/** Counts and (within the flood bound) logs one refusal; exported for tests. */
export function recordRefusal(line: RefusalLine, now: number, dataset: AnalyticsEngineDataset | undefined): void {
  const key = `${line.status} ${line.code}`;
  const total = totals.get(key);
  if (total) total.count++;
  else if (totals.size < MAX_KEYS) totals.set(key, { status: line.status, code: line.code, count: 1 });
  if (now - window.start >= 1000) {
    if (window.suppressed.size) {
      console.log(
        JSON.stringify({ event: "refusals_suppressed", window_ms: now - window.start, counts: Object.fromEntries(window.suppressed) }),
      );
    }
    window = { start: now, lines: new Map(), suppressed: new Map() };
  }
  const logged = window.lines.get(key) ?? 0;
  if (logged < LINES_PER_SECOND) {
    window.lines.set(key, logged + 1);
    console.log(JSON.stringify(line));
  } else if (window.suppressed.size < MAX_KEYS || window.suppressed.has(key)) {
    window.suppressed.set(key, (window.suppressed.get(key) ?? 0) + 1);
  }
  try {
    // Positions as the decision lines' (src/proxy/decision-log.ts): blob5 "refused", blob6 the code.
    dataset?.writeDataPoint({
      indexes: [line.tenant ?? ""],
      blobs: [line.tenant ?? "", "", "", "", "refused", line.code, ""],
      doubles: [line.status, 0, 0, 0, 0, 0, 0, -1, line.duration_ms, 0, 0, 0],
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
  if (res.status < 400 || res.headers.has(EXPLAIN.node) || c.get("decisionLogged")) return;
  const { type, code } = await errorOf(res);
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
      duration_ms: Date.now() - started,
    },
    Date.now(),
    c.env.ANALYTICS,
  );
});
