/**
 * The relay: streams an upstream body to the client chunk by chunk, and tells the caller how it
 * ended.
 *
 * Each upstream chunk is written as it is read into the runtime's identity stream, whose write
 * settles when the client has read the chunk, and the next chunk is read only then: nothing is read
 * ahead of the client, and SSE events reach it as the node emits them, never buffered. One loop
 * writing the runtime's own stream, rather than a JavaScript `ReadableStream` the runtime pulls
 * from: no pull, promise and enqueue of our own per chunk, a few µs of CPU less per SSE event
 * (bench/wan/RESULTS.md, "relay against pull"). The runtime's stream tells its writer that the
 * client went only at the next write, so the client's departure also comes as a signal
 * (`clientGone`: the region worker's request signal) and ends the relay at once. The first chunk
 * has already been read by the dispatcher (a retry is possible until then), so it is
 * emitted first. When the node fails after that, an SSE stream ends with an OpenAI-shaped error
 * event (clients see an error, not a silently truncated answer); a JSON body is errored, which the
 * client sees as a broken connection. An SSE stream that simply stops without its API's final
 * event (`data: [DONE]` for chat and completions, which OpenAI, vLLM, SGLang and TGI all send;
 * see stream-end.ts for the others) was cut short too: a proxy or a
 * transport can turn a broken connection into a clean end of body, so the relay checks the
 * protocol's own terminator rather than trusting the transport. The tail of the text is kept to
 * read `usage`.
 *
 * A failed stream may be resumed rather than ended: given `resume`, the relay asks it for another
 * node's body to carry on with (src/region/continue.ts), drops whatever partial event the failed
 * node left, and relays the new body through the same filter (which makes its events read as the
 * first node's: src/region/seam.ts). Only when there is none does the client see the error event.
 */
import type { StreamFailureKind } from "../contracts/routing.ts";
import { sseErrorEvent } from "../http/errors.ts";
import { openaiStreamEnd, type StreamEnd } from "./stream-end.ts";
import { AnswerTail } from "./answer-tail.ts";
import { ReadClock, type Read } from "./read-clock.ts";
import { parseAnswerTail, type Usage } from "./usage.ts";
import { StreamFailure, type EventFilter } from "./event-filter.ts";

export type RelayEnd = "ok" | "stream-error" | "cancelled";

export type { StreamFailureKind };

/**
 * How a failed stream ends when it could not be carried on for a reason the client should read
 * (src/region/continue.ts: the text is too long to carry, no node can continue): the error
 * event's message and code in place of the node's failure; without a code, the failure's own
 * message and code, the message followed by this one (a client keeps the code it knows).
 */
export interface StreamEnding {
  message: string;
  code?: string | undefined;
}

/** Another node's body to carry on with: its first chunk (already read) and the rest. */
export interface Segment {
  first: Uint8Array | undefined;
  reader: ReadableStreamDefaultReader<Uint8Array>;
}

interface RelayOptions {
  /** The upstream body's first chunk, already read. */
  first: Uint8Array | undefined;
  reader: ReadableStreamDefaultReader<Uint8Array>;
  /** Whether the body is an SSE stream (gets an error event on failure). */
  sse: boolean;
  /** For the relay's own log lines. */
  requestId: string;
  /** Takes the usage event the router asked for out of the client's stream (stream-usage.ts), or joins continued streams (src/region/seam.ts). */
  filter?: EventFilter | undefined;
  /**
   * A failed SSE stream's next node (a continuation), or undefined to end it with the error
   * event. Never asked after the deadline. Default: none.
   */
  resume?: ((failure: StreamFailureKind) => Promise<Segment | StreamEnding | undefined>) | undefined;
  /** Whether an SSE stream's tail shows it finished (stream-end.ts). Default: OpenAI's `data: [DONE]`. */
  streamEnd?: StreamEnd | undefined;
  /** Called once, just after the body ends, fails or is cancelled (in a task of its own). */
  onEnd: (end: RelayEnd, usage: Usage | undefined, bytes: number) => void;
  /** Longest wait for the node's next chunk (the client's own pace does not count). Default: none. */
  idleTimeoutMs?: number | undefined;
  /**
   * Aborted when the client goes (the region worker's request signal: the edge cancelled its body).
   * The node's body is then let go at once, and no other node is asked to carry on. Without it, the
   * client's departure is seen at the next chunk written. Default: none.
   */
  clientGone?: AbortSignal | undefined;
  /** When the whole request must be over (ms epoch). Default: none. */
  deadlineAt?: number | undefined;
}

/** A failure's message and code for the client's error event. */
function failureMessage(kind: StreamFailureKind, idleTimeoutMs: number | undefined): { message: string; code: string } {
  if (kind === "idle-timeout") {
    return { message: `The model node sent nothing for ${Math.round((idleTimeoutMs ?? 0) / 1000)} s`, code: "upstream_stream_timeout" };
  }
  if (kind === "deadline")
    return { message: "The request reached its deadline before the answer ended", code: "request_deadline_exceeded" };
  return { message: "The model node failed while streaming the answer", code: "upstream_stream_error" };
}

/** Where the relay writes the client's bytes (the runtime's identity stream). */
interface Sink {
  enqueue(chunk: Uint8Array): void;
  close(): void;
  error(e: Error): void;
}

/** What one read of the node's body came to: read again, the stream is over, or the node failed. */
type Step = "more" | "done" | { failure: StreamFailureKind };

export function relay({
  first,
  reader: firstReader,
  sse,
  requestId,
  filter,
  resume,
  onEnd,
  streamEnd = openaiStreamEnd,
  idleTimeoutMs,
  deadlineAt,
  clientGone,
}: RelayOptions): ReadableStream<Uint8Array> {
  let reader = firstReader;
  let tail = new AnswerTail();
  let bytes = 0;
  let ended = false;
  /** Another node is being asked to carry on (`resume` has not settled). */
  let resuming = false;
  /** The client went while it was: why (the answer then ends once the resume has, see `gone`). */
  let leftWhileResuming: { reason: unknown } | undefined;
  const clock = new ReadClock(idleTimeoutMs, deadlineAt);
  const observe = (chunk: Uint8Array) => {
    bytes += chunk.byteLength;
    tail.push(chunk);
  };
  /**
   * What the client gets of a chunk: all of it, or what the filter passes. Returns whether
   * anything was enqueued: a chunk that was only the usage event, or only part of an event, gives
   * the client nothing yet.
   */
  const emit = (client: Sink, chunk: Uint8Array): boolean => {
    const out = filter ? filter.push(chunk) : chunk;
    if (out.byteLength > 0) client.enqueue(out);
    return out.byteLength > 0;
  };
  /** At the end of the body: whatever the filter still holds (an unterminated last event). */
  const flush = (client: Sink) => {
    const rest = filter?.flush();
    if (rest && rest.byteLength > 0) client.enqueue(rest);
  };
  const end = (how: RelayEnd) => {
    if (ended) return;
    ended = true;
    clock.stop();
    // After the task that closed the stream: the client's last byte leaves first, then the usage
    // is parsed, the decision line written and the region told (bench/e2e's profile at 43f19cc: the line and the RPC
    // in the closing task held the end of the body back by ~1 ms).
    setTimeout(() => onEnd(how, parseAnswerTail(tail.text(), tail.head()), bytes), 0);
  };
  /** Ends the answer after a failure: an SSE stream with the error event, a JSON body broken. */
  const fail = (client: Sink, kind: StreamFailureKind, ending?: StreamEnding) => {
    if (ended) return; // the client went: nobody to tell
    const failed = failureMessage(kind, idleTimeoutMs);
    const { message, code } =
      ending === undefined
        ? failed
        : ending.code === undefined
          ? { message: `${failed.message}; ${ending.message}`, code: failed.code }
          : { message: ending.message, code: ending.code };
    if (sse) {
      if (filter?.abandon) filter.abandon();
      else flush(client);
      client.enqueue(new TextEncoder().encode(sseErrorEvent(message, code)));
      client.close();
    } else client.error(new Error(message));
    end("stream-error");
  };
  /**
   * Another node carries on (a continuation): the failed node's reader is let go, its unfinished
   * event dropped, and the new node's first chunk relayed: "done" when that gave the client
   * something, "more" when not yet, undefined when there is no other node, or the error the
   * stream ends with instead of the node's.
   */
  const resumeAfter = async (client: Sink, kind: StreamFailureKind): Promise<"done" | "more" | StreamEnding | undefined> => {
    if (!resume || !sse || kind === "deadline") return undefined;
    void reader.cancel(new Error(`stream ${kind}`)).catch(() => {});
    filter?.abandon?.();
    resuming = true;
    let next: Segment | StreamEnding | undefined;
    try {
      next = await resume(kind);
    } finally {
      resuming = false;
    }
    if (leftWhileResuming) {
      // The client went meanwhile: the new node's body is let go unread, and the answer ends only
      // now, so that its end is told of the node the resume placed (whose part it then settles).
      if (next && !("message" in next)) void next.reader.cancel(leftWhileResuming.reason).catch(() => {});
      end("cancelled");
      return "done";
    }
    if (!next) return undefined;
    if ("message" in next) return next;
    reader = next.reader;
    clock.restart();
    // The tail is the answering node's: its usage, its terminator.
    tail = new AnswerTail();
    if (!next.first) return "more";
    observe(next.first);
    return emit(client, next.first) ? "done" : "more";
  };
  /** A step whose error is how the node failed (a filter's {@link StreamFailure}, else a broken connection). */
  const attempt = async <T>(step: () => Promise<T>): Promise<T | Step> => {
    try {
      return await step();
    } catch (e) {
      console.log(JSON.stringify({ event: "upstream_stream_error", request_id: requestId, message: String(e) }));
      return { failure: e instanceof StreamFailure ? e.kind : "connection" };
    }
  };
  if (first) observe(first);

  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  /** The last chunk written: it settles once the client has read it, and fails if the client went. */
  let written: Promise<void> = Promise.resolve();
  const client: Sink = {
    enqueue: (chunk) => {
      written = writer.write(chunk);
      // Handled here too: the loop awaits it, but the last write (an error event, the end) may fail unawaited.
      written.catch(() => {});
    },
    close: () => void writer.close().catch(() => {}),
    error: (e) => void writer.abort(e).catch(() => {}),
  };
  /**
   * The client went: the node's body is let go now (a read may wait long), and nothing more is done
   * for it. While another node is being asked to carry on, the end waits for its answer: ended
   * now, the end would settle the failed node's part while the resume went on to place a new one,
   * whose body nobody read or let go and whose part nobody settled.
   */
  const gone = (reason: unknown) => {
    if (ended) return;
    if (resuming) {
      leftWhileResuming ??= { reason };
      return;
    }
    end("cancelled");
    void reader.cancel(reason).catch(() => {});
  };
  /** The request's deadline passed while the client had not taken what it was given: the answer ends, the node's body let go. */
  const stalled = () => {
    if (ended) return;
    console.log(JSON.stringify({ event: "client_stalled_deadline", request_id: requestId }));
    end("cancelled");
    void reader.cancel(new Error("deadline")).catch(() => {});
    void writer.abort(new Error("The request reached its deadline before the client read the answer")).catch(() => {});
  };
  if (clientGone?.aborted) gone(clientGone.reason);
  else clientGone?.addEventListener("abort", () => gone(clientGone.reason), { once: true });

  void (async () => {
    let step: Step | undefined;
    if (first && first.byteLength > 0) {
      try {
        emit(client, first);
      } catch (e) {
        // The first chunk already shows the node failed: handled below, which may resume.
        step = { failure: e instanceof StreamFailure ? e.kind : "malformed" };
      }
    }
    for (;;) {
      // Nothing is read from the node before the client has read what it was given; a write that
      // fails is a client that went, and one not taken by the request's deadline ends the answer.
      clock.writing(stalled);
      const read = await written.then(
        () => true,
        (e: unknown) => (gone(e), false),
      );
      clock.settled();
      if (!read || ended) return;
      step ??= await attempt(() => pullOnce(client));
      // A failed node: carried on by another (whose first chunk may fail too), or the end. Not
      // once the client has gone.
      while (typeof step === "object") {
        if (ended) return;
        const resumed = await attempt(() => resumeAfter(client, (step as { failure: StreamFailureKind }).failure));
        if (resumed === undefined) return fail(client, step.failure);
        if (typeof resumed === "object" && "message" in resumed) return fail(client, step.failure, resumed);
        step = resumed;
      }
      if (ended) return;
      step = undefined;
    }
  })();
  return readable;

  /**
   * One read of the node's body, relayed: "more" when the read gave the client nothing yet (read
   * again), "done" when a chunk was enqueued or the stream ended, or how the node failed.
   */
  async function pullOnce(client: Sink): Promise<Step> {
    let read: Read | undefined;
    let error: unknown;
    try {
      read = await clock.read(reader);
    } catch (e) {
      error = e;
    }
    if (clock.timedOut) {
      // The node went silent (or the request ran out of time): the clock cancelled its body.
      console.log(JSON.stringify({ event: `upstream_stream_${clock.timedOut}_timeout`, request_id: requestId }));
      return { failure: clock.timedOut === "idle" ? "idle-timeout" : "deadline" };
    }
    clock.settled();
    // The client went while the node's body was read (its reader cancelled): nothing to relay or report.
    if (ended) return "done";
    if (!read) throw error;
    const { done, value } = read;
    if (done) {
      if (sse && !streamEnd(tail.text())) {
        console.log(JSON.stringify({ event: "upstream_stream_truncated", request_id: requestId }));
        return { failure: "truncated" };
      }
      flush(client);
      client.close();
      end("ok");
      return "done";
    }
    observe(value);
    return emit(client, value) ? "done" : "more";
  }
}
