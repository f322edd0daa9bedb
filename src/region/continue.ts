/**
 * Mid-stream continuation: a streamed chat completion or completion whose node fails after its
 * first byte (a reset, silence past the idle timeout, a body cut short, its own error event, a
 * malformed event) is finished by another node of the region, placed by the same policy (so it
 * may well hold the prompt's prefix), and relayed as if the first node had gone on (seam.ts).
 *
 * The new node gets the request with the text the client already has appended
 * (continuation-body.ts) and the token budget less what was spent. Bounded: at most `continuations`
 * per request (limits, default 2), never past its deadline, each placed like a request (at most
 * `1 + max_retries` nodes, the region's nodes that already failed it excluded, only the region's
 * `continuation_engines`). Not continued (the stream ends with the error event, as it did without
 * continuation): more than one choice, logprobs, structured output, a tool call or reasoning that
 * was being streamed, a completion whose prompt is not one string or that echoes it; the Responses
 * and Messages APIs, which are never handed to this module (docs/CONTINUATION.md). Two ends say
 * why in the client's error event: the text so far is more than a continuation's body may carry
 * (`max_body_bytes`: code `continuation_too_large`), and none of the region's other nodes runs an
 * engine that can continue (the failure's own code, its message saying so).
 */
import { continuationOutcomeSchema, type ContinuationOutcome, type StreamFailureKind } from "../contracts/routing.ts";
import type { ContinuationLog, StreamContinuedLine } from "../contracts/decision-line.ts";
import type { Attempt } from "../contracts/region-service.ts";
import { concatBytes } from "../http/body.ts";
import type { Segment, StreamEnding } from "../proxy/relay.ts";
import type { Placed, Upstream } from "./call-node.ts";
import { deadlineOf, type RegionContext } from "./context.ts";
import { continuationBody, refusalOf } from "./continuation-body.ts";
import { accept, tryNodes, type Session } from "./place.ts";
import { settledIfThrown, settlePlacement } from "./settle.ts";
import type { SeamFilter, SeamKind } from "./seam.ts";

/** The node answering now, and what its completion will say of a failure it ended in. */
export interface Live {
  placed: Placed;
  session: Session | undefined;
  upstream: Extract<Upstream, { ok: true }>;
  /** Set when this node failed and was not continued: reported with its completion. */
  continuation?: { reason: StreamFailureKind; outcome: ContinuationOutcome } | undefined;
}

/** One continuation, as the decision line records it (src/contracts/decision-line.ts). */
export type ContinuationRecord = ContinuationLog;

export interface ContinuationContext {
  rc: RegionContext;
  kind: SeamKind;
  seam: SeamFilter;
  live: Live;
  shard: number;
  /** Nodes this request already failed on (grows with each failure). */
  exclude: string[];
  /** The request's attempts in this region (the decision line's). */
  own: Attempt[];
  records: ContinuationRecord[];
}

const encoder = new TextEncoder();
const DONE = encoder.encode("data: [DONE]\n\n");

/** A `max_tokens` key and value a node's engine may add to a continuation's body (`,"max_tokens":16`), counted against the bound. */
const BUDGET_KEY_BYTES = 32;

/** The end of a stream whose text is more than a continuation's body may carry. */
const TOO_LARGE: StreamEnding = {
  code: "continuation_too_large",
  message:
    "The model node failed while streaming the answer, and the answer so far is longer than a continuation on another node may carry (the request body limit): the answer ends here",
};

/** The end of a stream no other node of the region can continue: the failure's own code, and why it was not continued. */
const UNAVAILABLE: StreamEnding = {
  message: "no other node in the region runs an engine that can continue the stream, so the answer ends here",
};

/** Whether a stream of this request may be continued at all (the region's settings and the API). */
export function continuable(rc: RegionContext): SeamKind | undefined {
  if (!rc.request.stream || rc.request.api !== "openai") return undefined;
  if (rc.config.raw.limits.continuations === 0 || rc.region.config.continuation_engines.length === 0) return undefined;
  return rc.request.path === "/v1/chat/completions" ? "chat" : rc.request.path === "/v1/completions" ? "completion" : undefined;
}

/** The relay's `resume`: another node's body to carry on with, or undefined (the failure is then the client's). */
export function continuer(cc: ContinuationContext): (failure: StreamFailureKind) => Promise<Segment | StreamEnding | undefined> {
  return async (failure) => {
    // The failed node's call ends here; the continuation's placements hang from a span of its own.
    const trace = cc.rc.trace;
    const span = trace.continuation(trace.root.id, cc.live.placed.nodeId, failure, cc.records.length + 1);
    trace.endLive(`stream failed: ${failure}`, { "warmpath.failure": failure });
    try {
      return await continueOnce(cc, failure, span.id);
    } finally {
      const record = cc.records.at(-1);
      const carried = record?.outcome === "continued" || record?.outcome === "finished";
      span.end(
        {
          "warmpath.continuation.outcome": record?.outcome,
          "warmpath.continuation.tokens_carried": record?.tokens_carried,
          "warmpath.continuation.to_node": record?.to_node,
          "warmpath.continuation.detail": record?.detail,
        },
        carried ? undefined : `not continued: ${record?.outcome ?? "failed"}`,
      );
    }
  };
}

/** One continuation of a failed stream (see {@link continuer}); its placements' spans hang from `traceParent`. */
async function continueOnce(
  cc: ContinuationContext,
  failure: StreamFailureKind,
  traceParent: string,
): Promise<Segment | StreamEnding | undefined> {
  {
    const failedAt = Date.now();
    const failed = cc.live;
    const state = cc.seam.snapshot();
    const record: ContinuationRecord = { node: failed.placed.nodeId, reason: failure, tokens_carried: state.tokens, outcome: "failed" };
    cc.records.push(record);
    cc.exclude.push(failed.placed.nodeId);
    const settle = (outcome: ContinuationOutcome, detail?: string): undefined => {
      record.outcome = continuationOutcomeSchema.parse(outcome);
      if (detail !== undefined) record.detail = detail;
      failed.continuation = { reason: failure, outcome };
      return undefined;
    };
    if (cc.records.length > cc.rc.config.raw.limits.continuations) return settle("limit");
    if (state.finishReason !== null) {
      // The node had finished its answer; only the end of the stream was lost.
      settle("finished");
      return { first: DONE, reader: ended() };
    }
    if (failedAt >= deadlineOf(cc.rc)) return settle("deadline");
    if (state.blocker) return settle("not-continuable", state.blocker);
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(new TextDecoder().decode(cc.rc.body)) as Record<string, unknown>;
    } catch {
      return settle("not-continuable", "body");
    }
    const refused = refusalOf(parsed, cc.kind);
    if (refused) return settle("not-continuable", refused);
    const budget = continuationBody(parsed, cc.kind, state.text, state.tokens, undefined);
    if (!budget.ok && "finish" in budget) {
      // The token budget is spent: the answer ends as the node would have ended it.
      settle("finished");
      return { first: concatBytes([cc.seam.finishEvent(budget.finish), DONE]), reader: ended() };
    }
    // No node is sent a body larger than a client may send: a 10 MB answer made a 10 MB continuation.
    const maxBody = cc.rc.config.raw.limits.max_body_bytes;
    if (state.overflow || (budget.ok && encoder.encode(JSON.stringify(budget.body)).byteLength + BUDGET_KEY_BYTES > maxBody)) {
      settle("not-continuable", "body-limit");
      return TOO_LARGE;
    }

    const tried = await tryNodes(cc.rc, {
      traceParent,
      shard: cc.shard,
      exclude: cc.exclude,
      own: cc.own,
      continuation: { engines: cc.rc.region.config.continuation_engines, promptTokens: cc.rc.request.promptTokens + state.tokens },
      body: (placed) => {
        const built = continuationBody(parsed, cc.kind, state.text, state.tokens, placed.engine);
        return encoder.encode(JSON.stringify(built.ok ? built.body : parsed));
      },
    });
    if (!tried.ok) {
      // No other node serving the model runs an engine that can continue (src/core/region/refusals.ts):
      // not a busy region, and the client is told so.
      if (tried.refusal.reason === "no-node") {
        settle("no-node", "no-continuable-engine");
        return UNAVAILABLE;
      }
      const none = tried.refusal.reason === "saturated" || tried.refusal.reason === "over-share";
      return settle(none ? "no-node" : "failed", tried.refusal.reason);
    }
    if (!tried.upstream.response.ok) {
      // The node refused the continuation (a client error such as the context length): nothing of
      // it can join the client's stream.
      void tried.upstream.reader?.cancel().catch(() => {});
      cc.rc.trace.endLive(`HTTP ${tried.upstream.response.status}`);
      void settlePlacement(cc.rc, tried.placed, tried.session, { status: "refused" });
      return settle("failed", `${tried.placed.nodeId} answered HTTP ${tried.upstream.response.status}`);
    }
    settle("continued");
    record.to_node = tried.placed.nodeId;
    record.first_byte_ms = Date.now() - failedAt;
    await settledIfThrown(
      cc.rc,
      tried.placed,
      tried.session,
      () => accept(cc.rc, tried.placed, tried.session, tried.upstream, cc.shard),
      tried.upstream.reader,
    );
    // The failed node's part is over: its completion says so (a stateless one is only uncounted),
    // once the new node answers for the stream: had accept thrown, the stream's end would settle it
    // (it is still `cc.live`), and it must not be twice.
    void settlePlacement(cc.rc, failed.placed, failed.session, { status: "stream-error", continuation: failed.continuation });
    cc.live = { placed: tried.placed, session: tried.session, upstream: tried.upstream };
    cc.seam.beginSegment();
    console.log(
      JSON.stringify({
        event: "stream_continued",
        request_id: cc.rc.request.requestId,
        region: cc.rc.region.config.name,
        ...record,
      } satisfies StreamContinuedLine),
    );
    const reader = tried.upstream.reader ?? ended();
    return { first: tried.upstream.first, reader };
  }
}

/** A body already at its end. */
function ended(): ReadableStreamDefaultReader<Uint8Array> {
  return new ReadableStream<Uint8Array>({ start: (c) => c.close() }).getReader();
}
