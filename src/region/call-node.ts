/**
 * Calling a node: one POST, bounded by an adaptive first-byte wait, never following a redirect,
 * and resolved only once the node has produced its first body byte (or definitively failed), so
 * that every failure before that point can still be retried on another node unseen by the client.
 */
import { NODE_HEADERS } from "../contracts/region-service.ts";
import type { FailureReason, RouteResult } from "../contracts/routing.ts";
import { originTokenAllowed } from "../core/origins.ts";
import { deadlineOf, type RegionContext } from "./context.ts";

/** Upstream statuses worth another node: overload and server faults, not the client's own errors. */
const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);

/** The first-byte wait allowed is this many times the load model's estimate for the request on its node. */
const FIRST_BYTE_ESTIMATE_FACTOR = 4;

export type Placed = Extract<RouteResult, { ok: true }>;

export type Upstream =
  | {
      ok: true;
      response: Response;
      first: Uint8Array | undefined;
      reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
      /** From the call to the first body byte (ms), and when it came (ms epoch, the worker's clock). */
      firstByteMs: number;
      firstByteAt: number;
    }
  | { ok: false; reason: FailureReason; detail: string };

/**
 * How long to wait for this request's first byte on this node: a 100k-token cold prefill
 * legitimately takes seconds, a cached prompt milliseconds, so the wait follows the load model's
 * estimate (x4, between the configured floor and bound), and never runs past the request's deadline.
 */
export function firstByteTimeoutMs(
  estimatedTtftMs: number,
  limits: { first_byte_timeout_ms: number; first_byte_timeout_floor_ms: number },
  untilDeadlineMs: number,
): number {
  const adaptive = Math.max(limits.first_byte_timeout_floor_ms, FIRST_BYTE_ESTIMATE_FACTOR * estimatedTtftMs);
  return Math.max(1, Math.min(limits.first_byte_timeout_ms, adaptive, untilDeadlineMs));
}

/**
 * Calls the node with `body` and waits for its first body byte (or a definitive non-retryable
 * answer). `trace`: the `traceparent` (and `tracestate`) naming this call's span (trace.ts).
 */
export async function callNode(rc: RegionContext, placed: Placed, body: Uint8Array, trace?: Record<string, string>): Promise<Upstream> {
  const { limits } = rc.config.raw;
  const timeoutMs = firstByteTimeoutMs(placed.estimatedTtftMs, limits, deadlineOf(rc) - Date.now());
  const headers = new Headers();
  for (const name of NODE_HEADERS) {
    const v = rc.request.headers[name];
    if (v !== undefined) headers.set(name, v);
  }
  headers.set("x-request-id", rc.request.requestId);
  for (const [name, value] of Object.entries(trace ?? {})) headers.set(name, value);
  // The origin token only ever goes to the region's allowed origins (src/core/origins.ts).
  if (rc.region.originToken && originTokenAllowed(placed.url, rc.region)) headers.set("authorization", `Bearer ${rc.region.originToken}`);

  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no first byte within ${timeoutMs} ms`)), timeoutMs);
  const started = Date.now();
  try {
    const response = await fetch(new URL(rc.request.path, placed.url.endsWith("/") ? placed.url : placed.url + "/").toString(), {
      method: "POST",
      headers,
      body,
      signal: controller.signal,
      // Never follow a node's redirect: a 307 would re-send the customer's body wherever Location
      // points, a 302 would turn into a GET. A redirect is a misbehaving node (tried elsewhere), and
      // its target is never shown to the client.
      redirect: "manual",
    });
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel().catch(() => {});
      return { ok: false, reason: "redirect", detail: `HTTP ${response.status} redirect` };
    }
    if (RETRYABLE_STATUS.has(response.status)) {
      await response.body?.cancel().catch(() => {});
      return { ok: false, reason: response.status === 429 ? "http-429" : "http-5xx", detail: `HTTP ${response.status}` };
    }
    if (!response.body) {
      const at = Date.now();
      return { ok: true, response, first: undefined, reader: undefined, firstByteMs: at - started, firstByteAt: at };
    }
    const reader = response.body.getReader();
    const { done, value } = await reader.read();
    if (done && response.ok) {
      return { ok: false, reason: "empty-body", detail: "empty body" };
    }
    const at = Date.now();
    return { ok: true, response, first: value, reader, firstByteMs: at - started, firstByteAt: at };
  } catch (e) {
    return controller.signal.aborted
      ? { ok: false, reason: "timeout", detail: "timeout before first byte" }
      : { ok: false, reason: "connection", detail: `connection failed (${(e as Error).message})` };
  } finally {
    clearTimeout(timer);
  }
}
