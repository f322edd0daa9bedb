/**
 * Cloudflare's Workers traces (wrangler.toml `[observability.traces]`): each of warmpath's spans
 * is also opened as a custom span of the invocation's trace through `tracing` from
 * "cloudflare:workers", so Cloudflare's trace viewer and its OTLP export destinations show the
 * router's steps beside the runtime's own (fetch, Durable Object calls).
 *
 * Cloudflare's trace does not take a trace id from outside (its documentation: trace context
 * propagation not yet supported), so the W3C ids the client and the nodes see ride on each span
 * as attributes (spans.ts). Guarded: a runtime without `tracing` (an older workerd) gets no
 * mirror, and a mirror that throws is dropped for the isolate; the local workerd (1.20261102)
 * provides it, its spans untraced (no-ops) as nothing collects them locally.
 */
import * as workers from "cloudflare:workers";
import type { Mirror } from "./spans.ts";

let broken = false;

/** Opens a Cloudflare span for one of warmpath's, or undefined (no tracing in this runtime). */
export const cloudflareMirror: Mirror = (name) => {
  const tracing = (workers as { tracing?: Tracing }).tracing;
  if (broken || !tracing || typeof tracing.startSpan !== "function") return undefined;
  try {
    const span = tracing.startSpan(name);
    // A failing span call must never fail the request it describes.
    const safely = (f: () => unknown) => {
      try {
        f();
      } catch {
        broken = true;
      }
    };
    return {
      setAttributes: (a) => safely(() => span.setAttributes(a)),
      setStatus: (s) => safely(() => span.setStatus(s)),
      end: () => safely(() => span.end()),
    };
  } catch (e) {
    broken = true;
    console.error(JSON.stringify({ event: "tracing_unavailable", message: String(e).slice(0, 300) }));
    return undefined;
  }
};
