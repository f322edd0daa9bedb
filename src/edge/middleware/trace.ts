/**
 * Every client inference request gets a trace (src/edge/trace.ts): the client's `traceparent`
 * continued or a new trace started, before anything can refuse the request, so a refusal's line
 * carries the trace id too (refusal-log.ts) and the answer names it in `x-warmpath-trace-id`.
 */
import { createMiddleware } from "hono/factory";
import type { AppEnv } from "../app-types.ts";
import { EXPLAIN, TRACE_ID } from "../../contracts/headers.ts";
import { EdgeTrace } from "../trace.ts";
import { ConfigError, loadConfig } from "../../config/load.ts";

/**
 * Whether a trace the edge starts is sampled: at `trace_sample_rate` (default 1%: a sampled
 * request adds two spans lines, ~3 KB, and their CPU; src/config/schema.ts), never above
 * `decision_log_sample_rate`, so that tracing never logs more than the decision log. A client's
 * own `traceparent` keeps its flag. An invalid configuration samples it: the request fails, and
 * its trace says why.
 */
export function sampledAt(rates: { trace_sample_rate: number; decision_log_sample_rate: number }, draw: number): boolean {
  return draw < Math.min(rates.trace_sample_rate, rates.decision_log_sample_rate);
}

function startsSampled(env: Env): boolean {
  try {
    return sampledAt(loadConfig(env, { kind: "edge" }).raw, Math.random());
  } catch (e) {
    if (e instanceof ConfigError) return true;
    throw e;
  }
}

/** The inference paths traced (the rest of the API is not worth a trace: listings, reports, admin). */
export const TRACED_PATHS = ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"];

export const traceRequest = createMiddleware<AppEnv>(async (c, next) => {
  // A CORS preflight or a wrong method is no inference request: nothing to trace.
  if (c.req.method !== "POST") return next();
  const trace = new EdgeTrace(c.req.raw.headers, c.get("requestId"), c.req.method, c.req.path, startsSampled(c.env));
  c.set("trace", trace);
  await next();
  const res = c.res;
  res.headers.set(TRACE_ID, trace.traceId);
  const status = res.status;
  const attributes = {
    "http.response.status_code": status,
    "warmpath.tenant": c.get("tenant")?.id,
    "warmpath.region": res.headers.get(EXPLAIN.region) ?? undefined,
    "warmpath.node": res.headers.get(EXPLAIN.node) ?? undefined,
  };
  // A streamed answer's span ends with its body (forward.ts); any other's now. A 5xx is the router's failure (OpenTelemetry's HTTP server convention).
  if (trace.deferred) trace.root.set(attributes);
  else trace.finish(attributes, status >= 500 ? `HTTP ${status}` : undefined);
});
