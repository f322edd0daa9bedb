/**
 * The edge's part of a request's trace (docs/OBSERVABILITY.md, "Traces"): the client's W3C
 * `traceparent` continued, or a new trace started (src/core/trace-context.ts); the `warmpath.edge`
 * span for the whole request, one span per region it is sent to (`warmpath.region_call`, and
 * `warmpath.failover` for each farther region after the first), and the scope handed to each
 * region worker, whose spans hang from that region's span.
 *
 * The edge span ends when the answer does: at once for an error or a JSON answer (the region worker
 * reads a JSON answer whole before it answers the edge), when its body ends for a stream
 * (forward.ts). Then the edge's `spans` line is logged.
 */
import { incomingTrace, type IncomingTrace } from "../core/trace-context.ts";
import type { TraceScope } from "../contracts/trace.ts";
import { cloudflareMirror } from "../proxy/cf-tracing.ts";
import { SpanRecorder, type Attributes, type Span } from "../proxy/spans.ts";

const random = (bytes: Uint8Array) => void crypto.getRandomValues(bytes);

export class EdgeTrace {
  readonly incoming: IncomingTrace;
  readonly recorder: SpanRecorder;
  readonly root: Span;
  /** The answer's body goes on after the handler returns: its end ends the trace (forward.ts). */
  deferred = false;
  /** The region span whose worker is answering: it ends with the answer. */
  private answering: Span | undefined;

  /** @param sampledByDefault whether a trace started here (no valid `traceparent`) is sampled. */
  constructor(headers: Headers, requestId: string, method: string, path: string, sampledByDefault = true) {
    this.incoming = incomingTrace(headers.get("traceparent"), headers.get("tracestate"), random, sampledByDefault);
    this.recorder = new SpanRecorder(this.incoming, { service: "warmpath-edge", requestId, random, mirror: cloudflareMirror });
    this.root = this.recorder.start("warmpath.edge", this.incoming.spanId, "server", {
      "http.request.method": method.slice(0, 16),
      "url.path": path.slice(0, 256),
      "warmpath.request_id": requestId,
      "warmpath.trace.continued": this.incoming.continued,
      // A client's malformed traceparent was replaced: said, never repeated.
      "warmpath.trace.invalid_traceparent": this.incoming.invalid || undefined,
    });
  }

  get traceId(): string {
    return this.incoming.traceId;
  }

  /** A span for sending the request to `region`: `warmpath.failover` past the first region. */
  regionCall(region: string, index: number, nearest: string | undefined): Span {
    const name = index === 0 ? "warmpath.region_call" : "warmpath.failover";
    return this.recorder.start(name, this.root.id, "client", {
      "warmpath.region": region,
      "warmpath.region_attempt": index,
      "warmpath.failover.from": index > 0 ? nearest : undefined,
    });
  }

  /** What the region worker is told of the trace: its spans are children of `span`. */
  scope(span: Span): TraceScope {
    return { traceId: this.traceId, parentSpanId: span.id, flags: this.incoming.flags, state: this.incoming.state };
  }

  /** `span`'s region answers: its span ends with the answer. */
  answeredBy(span: Span): void {
    this.answering = span;
  }

  /** The request is over at the edge: its spans end and are logged (a sampled trace's). */
  finish(attributes: Attributes, error?: string): void {
    if (this.root.ended) return;
    this.answering?.end(undefined, error);
    this.root.end(attributes, error);
    this.recorder.flush();
  }
}
