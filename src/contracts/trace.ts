/**
 * A request's trace across warmpath's workers (docs/OBSERVABILITY.md, "Traces"): what the edge
 * tells a region worker of it (the `trace` of a dispatch message), and the `spans` line each
 * worker logs, its spans already in OpenTelemetry's OTLP/JSON shape, so the local exporter
 * (scripts/traces/export.ts) and any log pipeline pass them to a collector unchanged.
 */
import { z } from "zod";
import { MAX_TRACESTATE_CHARS } from "../core/trace-context.ts";

/** The trace a region worker's spans join: the trace id, the edge's span they hang from, the flags and `tracestate`. */
export const traceScopeSchema = z.object({
  traceId: z.string().regex(/^[0-9a-f]{32}$/),
  /** The edge's span for this region (`warmpath.region_call` or `warmpath.failover`). */
  parentSpanId: z.string().regex(/^[0-9a-f]{16}$/),
  flags: z.number().int().min(0).max(255),
  /** The client's `tracestate`, verbatim, passed on to the nodes. */
  state: z.string().max(MAX_TRACESTATE_CHARS).optional(),
});
export type TraceScope = z.infer<typeof traceScopeSchema>;

/** OTLP's SpanKind (opentelemetry-proto trace.proto). */
export const SPAN_KIND = { internal: 1, server: 2, client: 3 } as const;
/** OTLP's Status.code: unset, ok, error. */
export const STATUS_CODE = { unset: 0, ok: 1, error: 2 } as const;

/** An attribute value as OTLP/JSON writes it (int64 as a decimal string, proto3 JSON). */
type OtlpValue = { stringValue: string } | { intValue: string } | { doubleValue: number } | { boolValue: boolean };
export interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}

/** One span, as OTLP/JSON's `Span`: ids lowercase hex, times nanoseconds since the epoch as strings. */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string | undefined;
  /** The client's `tracestate`, on the span that continues its trace. */
  traceState?: string | undefined;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: OtlpAttribute[];
  status: { code: number; message?: string | undefined };
}

/** The line a worker logs once a sampled request is over there: its spans of the request. */
export interface SpansLine {
  event: "spans";
  /** The OpenTelemetry service: `warmpath-edge`, or `warmpath-region` (with its `region`). */
  service: string;
  region?: string | undefined;
  request_id: string;
  trace_id: string;
  /** Spans past the per-request bound, not kept (0 almost always). */
  dropped_spans: number;
  spans: OtlpSpan[];
}
