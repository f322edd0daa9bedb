/**
 * The region worker's part of a request's trace (docs/OBSERVABILITY.md, "Traces"): its
 * `warmpath.region` span under the edge's span for this region, and under it, for each placement,
 * the region's decision (`warmpath.route`, the call to the region's object or the stateless
 * choice) and the node call (`warmpath.node_call`, with `warmpath.first_byte` from the call to the
 * node's first body byte), and a `warmpath.continuation` span for each stream continued on
 * another node (its placement's spans under it).
 *
 * Each node call's span is the parent the node is told of: the node gets
 * `traceparent: 00-<trace id>-<node call span id>-<flags>` and the client's `tracestate`, never
 * the client's own `traceparent` (NODE_HEADERS does not pass it), so a retry or a continuation's
 * node is a sibling in the same trace. The region's spans are logged when the answer ends (the
 * decision line's hook, {@link RegionTrace.onLine}) or when the region refuses the request.
 */
import type { DecisionLine } from "../contracts/decision-line.ts";
import type { DispatchRequest } from "../contracts/region-service.ts";
import { TRACEPARENT, TRACESTATE } from "../contracts/headers.ts";
import type { RouteResult } from "../contracts/routing.ts";
import { formatTraceparent, incomingTrace } from "../core/trace-context.ts";
import { cloudflareMirror } from "../proxy/cf-tracing.ts";
import { SpanRecorder, type Attributes, type Span } from "../proxy/spans.ts";

const random = (bytes: Uint8Array) => void crypto.getRandomValues(bytes);

type Placed = Extract<RouteResult, { ok: true }>;

export class RegionTrace {
  readonly recorder: SpanRecorder;
  readonly root: Span;
  /** The node call answering now: it ends with the answer, or when its stream fails. */
  private live: Span | undefined;

  constructor(request: DispatchRequest, region: string) {
    // An older edge sends no trace: the region's spans then start one of their own.
    const trace = request.trace ?? { ...incomingTrace(undefined, undefined, random), parentSpanId: undefined };
    this.recorder = new SpanRecorder(trace, {
      service: "warmpath-region",
      region,
      requestId: request.requestId,
      random,
      mirror: cloudflareMirror,
    });
    this.root = this.recorder.start("warmpath.region", trace.parentSpanId, "server", {
      "warmpath.region": region,
      "warmpath.request_id": request.requestId,
      "warmpath.tenant": request.tenant.id,
      "gen_ai.request.model": request.model,
      "warmpath.failover.from": request.failoverFrom,
    });
  }

  get traceId(): string {
    return this.recorder.traceId;
  }

  /** The region's decision for one placement (its `retry`: 0 for the first node, then 1, 2, ...). */
  route(parent: string, retry: number, stateless: boolean): Span {
    return this.recorder.start("warmpath.route", parent, "internal", { "warmpath.retry": retry, "warmpath.stateless": stateless });
  }

  /** Ends a decision with where it placed the request. */
  placed(span: Span, placed: Placed, shard: number | undefined): void {
    span.end({
      "warmpath.node": placed.nodeId,
      "warmpath.decision": placed.decision,
      "warmpath.policy": placed.policy,
      "warmpath.prefix_match_blocks": placed.matchBlocks,
      "warmpath.prefix_total_blocks": placed.totalBlocks,
      "warmpath.predicted_cached_tokens": placed.predictedCachedTokens,
      "warmpath.estimated_ttft_ms": placed.estimatedTtftMs,
      "warmpath.shard": shard,
    });
  }

  /** A call to a node: its span, and the headers that make the node's work its child. */
  nodeCall(parent: string, placed: Placed, retry: number): { span: Span; headers: Record<string, string> } {
    const span = this.recorder.start("warmpath.node_call", parent, "client", {
      "warmpath.node": placed.nodeId,
      "warmpath.retry": retry,
      "warmpath.engine": placed.engine,
    });
    const headers: Record<string, string> = { [TRACEPARENT]: formatTraceparent(this.traceId, span.id, this.recorder.flags) };
    if (this.recorder.traceState !== undefined) headers[TRACESTATE] = this.recorder.traceState;
    return { span, headers };
  }

  /** The node's first body byte came: a span from the call to it, and the call is the one answering. */
  firstByte(call: Span, calledAt: number, status: number): void {
    this.recorder.start("warmpath.first_byte", call.id, "internal", {}, calledAt).end();
    call.set({ "http.response.status_code": status });
    this.live = call;
  }

  /** The answering node's stream failed or was refused: its call ends so. */
  endLive(error: string | undefined, attributes?: Attributes): void {
    this.live?.end(attributes, error);
    this.live = undefined;
  }

  /** A stream continued on another node: the span its placements hang from. */
  continuation(parent: string, node: string, reason: string, index: number): Span {
    return this.recorder.start("warmpath.continuation", parent, "internal", {
      "warmpath.continuation.from_node": node,
      "warmpath.continuation.reason": reason,
      "warmpath.continuation.index": index,
    });
  }

  /** The answer ended (the decision line, respond.ts): the spans end with its figures and are logged. */
  onLine(line: DecisionLine): void {
    const failed = line.status >= 500 || (line.end !== undefined && line.end !== "ok");
    const error = failed ? (line.end !== undefined && line.end !== "ok" ? `stream ended: ${line.end}` : `HTTP ${line.status}`) : undefined;
    this.endLive(error, {
      "http.response.status_code": line.status,
      "gen_ai.usage.input_tokens": line.usage?.promptTokens,
      "gen_ai.usage.output_tokens": line.usage?.completionTokens,
      "warmpath.usage.cached_tokens": line.usage?.cachedTokens,
      "warmpath.end": line.end,
    });
    this.finish(error, {
      "http.response.status_code": line.status,
      "warmpath.node": line.node,
      "warmpath.decision": line.decision,
      "warmpath.continuations": line.continuations?.length,
    });
  }

  /** The region's part is over (answered, refused, or failed): its span ends and the spans are logged. */
  finish(error: string | undefined, attributes?: Attributes): void {
    this.live?.end(undefined, error);
    this.root.end(attributes, error);
    this.recorder.flush();
  }
}
