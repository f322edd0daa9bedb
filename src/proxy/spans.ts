/**
 * A request's spans in one worker: started and ended as the request goes, logged as one `spans`
 * line when its part there is over (docs/OBSERVABILITY.md, "Traces"). Each span is also mirrored
 * to the runtime's own tracing when it has one (cf-tracing.ts: Cloudflare's Workers traces), with
 * the W3C ids as attributes, since Cloudflare's spans take no trace id from outside.
 *
 * Logged only for a sampled trace (its flags: the client's, or sampled for a trace warmpath
 * starts), once. Bounded: past {@link MAX_SPANS} spans a request's further spans still get ids
 * (a node still gets its own parent) but are counted in `dropped_spans`, not kept; and per
 * isolate at most {@link SPANS_LINES_PER_SECOND} spans lines a second for each service, as the
 * refusal lines (log-limit.ts): a client's sampled `traceparent` cannot force more, past it the
 * lines are counted in one `spans_suppressed` line a second (the runtime's mirror still gets
 * every span: Cloudflare samples its own traces).
 *
 * Cost, measured in Node 22 on the 2-core development machine: a region worker's four spans of a
 * plain request (region, route, node call, first byte), ids, attributes and the line's
 * JSON.stringify, ~26 us a request; the line ~2 KB (the edge's two spans ~1 KB).
 */
import { isSampled, newSpanId, type RandomBytes } from "../core/trace-context.ts";
import { SPAN_KIND, STATUS_CODE, type OtlpAttribute, type OtlpSpan, type SpansLine } from "../contracts/trace.ts";
import { LogLimiter } from "./log-limit.ts";

/**
 * Spans kept per request in one worker. At the configured defaults a region worker's request has
 * at most 1 + 3 placements x (route, node call, first byte) x 3 (the first node and 2
 * continuations) + 2 continuation spans = 30; at the configuration's maxima (5 retries, 5
 * continuations) 113, so the bound can bite there, never at the defaults.
 */
export const MAX_SPANS = 64;

/**
 * Spans lines a second per isolate for one service, as many as refusal lines for one status and
 * code (src/edge/middleware/refusal-log.ts): at ~1 KB (edge) and ~2 KB (region) a line, at most
 * ~60 KB of spans a second per isolate, whatever the clients' `traceparent` flags say.
 */
export const SPANS_LINES_PER_SECOND = 20;
const spansLimiter = new LogLimiter("spans_suppressed", SPANS_LINES_PER_SECOND);

type AttributeValue = string | number | boolean;
export type Attributes = Record<string, AttributeValue | undefined>;

/** The runtime's span mirroring one of ours (cf-tracing.ts), or nothing. */
export interface MirrorSpan {
  setAttributes(attributes: Record<string, AttributeValue | undefined>): void;
  setStatus(status: { code: "ok" | "error"; message?: string }): void;
  end(): void;
}
export type Mirror = (name: string) => MirrorSpan | undefined;

export type SpanKind = keyof typeof SPAN_KIND;

export interface Span {
  readonly id: string;
  /** Adds attributes (later values win). */
  set(attributes: Attributes): void;
  /** Ends the span (once; later calls do nothing), with more attributes, and a failure's message if it failed. */
  end(attributes?: Attributes, error?: string): void;
  readonly ended: boolean;
}

interface RecorderOptions {
  /** The OpenTelemetry service name of the spans line (`warmpath-edge`, `warmpath-region`). */
  service: string;
  region?: string | undefined;
  requestId: string;
  random: RandomBytes;
  now?: () => number;
  mirror?: Mirror | undefined;
}

function otlpValue(v: AttributeValue): OtlpAttribute["value"] {
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  return Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v };
}

/** ms since the epoch as OTLP's nanoseconds (a decimal string: nanoseconds overflow a double's integers). */
export function unixNano(ms: number): string {
  const whole = Math.floor(ms);
  const micros = Math.round((ms - whole) * 1000);
  return `${whole}${String(micros).padStart(3, "0")}000`;
}

/** A span of an unsampled trace: an id, and nothing recorded. */
function unrecordedSpan(id: string): Span {
  let ended = false;
  return {
    id,
    get ended() {
      return ended;
    },
    set() {},
    end() {
      ended = true;
    },
  };
}

export class SpanRecorder {
  readonly traceId: string;
  readonly flags: number;
  readonly traceState: string | undefined;
  private readonly spans: OtlpSpan[] = [];
  /** Spans started and not yet ended: the line cuts them off. */
  private readonly open = new Set<OtlpSpan>();
  private dropped = 0;
  private logged = false;
  private readonly options: RecorderOptions;
  private readonly now: () => number;

  constructor(trace: { traceId: string; flags: number; state?: string | undefined }, options: RecorderOptions) {
    this.traceId = trace.traceId;
    this.flags = trace.flags;
    this.traceState = trace.state;
    this.options = options;
    this.now = options.now ?? Date.now;
  }

  get sampled(): boolean {
    return isSampled(this.flags);
  }

  /** A new span id of this trace, for a span recorded elsewhere (none is). */
  spanId(): string {
    return newSpanId(this.options.random);
  }

  /** Starts a span under `parent` (a span id of this trace; empty or undefined: a root). */
  start(name: string, parent: string | undefined, kind: SpanKind, attributes: Attributes = {}, at = this.now()): Span {
    // An unsampled trace is never logged nor mirrored: its spans need only their ids (a node's
    // `traceparent` names its call's span), not their attributes and timestamps.
    if (!this.sampled) return unrecordedSpan(newSpanId(this.options.random));
    const span: OtlpSpan = {
      traceId: this.traceId,
      spanId: newSpanId(this.options.random),
      parentSpanId: parent || undefined,
      name,
      kind: SPAN_KIND[kind],
      startTimeUnixNano: unixNano(at),
      endTimeUnixNano: unixNano(at),
      attributes: [],
      status: { code: STATUS_CODE.unset },
    };
    const attrs: Attributes = { ...attributes };
    const kept = this.spans.length < MAX_SPANS;
    if (kept) {
      this.spans.push(span);
      this.open.add(span);
    } else this.dropped++;
    const open = this.open;
    const mirror = kept && this.sampled ? this.options.mirror?.(name) : undefined;
    const now = this.now;
    const traceId = this.traceId;
    let ended = false;
    return {
      id: span.spanId,
      get ended() {
        return ended;
      },
      set(more) {
        Object.assign(attrs, more);
      },
      end(more, error) {
        if (ended) return;
        ended = true;
        open.delete(span);
        if (more) Object.assign(attrs, more);
        span.endTimeUnixNano = unixNano(now());
        span.status = error === undefined ? { code: STATUS_CODE.unset } : { code: STATUS_CODE.error, message: error.slice(0, 256) };
        for (const [key, value] of Object.entries(attrs)) if (value !== undefined) span.attributes.push({ key, value: otlpValue(value) });
        if (mirror) {
          // Cloudflare's span has its own ids: the W3C ones ride along as attributes.
          mirror.setAttributes({
            ...attrs,
            "warmpath.trace_id": traceId,
            "warmpath.span_id": span.spanId,
            "warmpath.parent_span_id": span.parentSpanId,
          });
          if (error !== undefined) mirror.setStatus({ code: "error", message: error.slice(0, 256) });
          mirror.end();
        }
      },
    };
  }

  /** The `spans` line: the ended spans (one still open is cut off now, marked `warmpath.unfinished`). */
  line(): SpansLine {
    const at = unixNano(this.now());
    const spans = this.spans.map((s) =>
      this.open.has(s) ? { ...s, endTimeUnixNano: at, attributes: [{ key: "warmpath.unfinished", value: { boolValue: true } }] } : s,
    );
    return {
      event: "spans",
      service: this.options.service,
      region: this.options.region,
      request_id: this.options.requestId,
      trace_id: this.traceId,
      dropped_spans: this.dropped,
      spans,
    };
  }

  /** Logs the spans line, once, if the trace is sampled and the isolate's bound allows it (else counted). */
  flush(): void {
    if (this.logged || !this.sampled || this.spans.length === 0) return;
    this.logged = true;
    if (spansLimiter.allow(this.options.service, this.now())) console.log(JSON.stringify(this.line()));
  }
}
