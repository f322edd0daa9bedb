/**
 * The relay: streams an upstream body to the client chunk by chunk, and tells the caller how it
 * ended.
 *
 * Each upstream chunk is enqueued as it is read, with a high-water mark of zero so nothing is read
 * ahead of the client: SSE events reach the client as the node emits them, never buffered. The
 * first chunk has already been read by the dispatcher (a retry is possible until then), so it is
 * emitted first. When the node fails after that, an SSE stream ends with an OpenAI-shaped error
 * event (clients see an error, not a silently truncated answer); a JSON body is errored, which the
 * client sees as a broken connection. An SSE stream that simply stops without its API's final
 * event (`data: [DONE]` for chat and completions, which OpenAI, vLLM, SGLang and TGI all send;
 * see stream-end.ts for the others) was cut short too: a proxy or a
 * transport can turn a broken connection into a clean end of body, so the relay checks the
 * protocol's own terminator rather than trusting the transport. The tail of the text is kept to
 * read `usage`.
 */
import { sseErrorEvent } from "../http/errors.ts";
import { openaiStreamEnd, type StreamEnd } from "./stream-end.ts";
import type { UsageEventFilter } from "./stream-usage.ts";
import { USAGE_TAIL_CHARS, parseAnswerTail, type Usage } from "./usage.ts";

export type RelayEnd = "ok" | "stream-error" | "cancelled";

export interface RelayOptions {
  /** The upstream body's first chunk, already read. */
  first: Uint8Array | undefined;
  reader: ReadableStreamDefaultReader<Uint8Array>;
  /** Whether the body is an SSE stream (gets an error event on failure). */
  sse: boolean;
  /** For the relay's own log lines. */
  requestId: string;
  /** Takes the usage event the router asked for out of the client's stream (stream-usage.ts). */
  filter?: UsageEventFilter | undefined;
  /** Whether an SSE stream's tail shows it finished (stream-end.ts). Default: OpenAI's `data: [DONE]`. */
  streamEnd?: StreamEnd | undefined;
  /** Called once, just after the body ends, fails or is cancelled (in a task of its own). */
  onEnd: (end: RelayEnd, usage: Usage | undefined, bytes: number) => void;
  /** Longest wait for the node's next chunk (the client's own pace does not count). Default: none. */
  idleTimeoutMs?: number | undefined;
  /** When the whole request must be over (ms epoch). Default: none. */
  deadlineAt?: number | undefined;
}

/** What a read of the node's body came to: a chunk, its end, or a timeout. */
type Read = ReadableStreamReadResult<Uint8Array> | { timeout: "idle" | "deadline" };

/** The node's next chunk, or a timeout: the idle wait or the request's deadline, whichever is first. */
function readWithin(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  idleMs: number | undefined,
  deadlineAt: number | undefined,
): Promise<Read> {
  const untilDeadline = deadlineAt === undefined ? Infinity : Math.max(0, deadlineAt - Date.now());
  const wait = Math.min(idleMs ?? Infinity, untilDeadline);
  if (!Number.isFinite(wait)) return reader.read();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<Read>((resolve) => {
    timer = setTimeout(() => resolve({ timeout: wait === untilDeadline ? "deadline" : "idle" }), wait);
  });
  return Promise.race([reader.read(), timeout]).finally(() => clearTimeout(timer));
}

export function relay({
  first,
  reader,
  sse,
  requestId,
  filter,
  onEnd,
  streamEnd = openaiStreamEnd,
  idleTimeoutMs,
  deadlineAt,
}: RelayOptions): ReadableStream<Uint8Array> {
  const decoder = new TextDecoder();
  let tail = "";
  let bytes = 0;
  let ended = false;
  const observe = (chunk: Uint8Array) => {
    bytes += chunk.byteLength;
    tail += decoder.decode(chunk, { stream: true });
    if (tail.length > USAGE_TAIL_CHARS * 2) tail = tail.slice(-USAGE_TAIL_CHARS);
  };
  /**
   * What the client gets of a chunk: all of it, or all but the usage event the router asked for.
   * Returns whether anything was enqueued: a chunk that was only the usage event, or only part of
   * an event, gives the client nothing yet.
   */
  const emit = (controller: ReadableStreamDefaultController<Uint8Array>, chunk: Uint8Array): boolean => {
    const out = filter ? filter.push(chunk) : chunk;
    if (out.byteLength > 0) controller.enqueue(out);
    return out.byteLength > 0;
  };
  /** At the end of the body: whatever the filter still holds (an unterminated last event). */
  const flush = (controller: ReadableStreamDefaultController<Uint8Array>) => {
    const rest = filter?.flush();
    if (rest && rest.byteLength > 0) controller.enqueue(rest);
  };
  const failStream = (
    controller: ReadableStreamDefaultController<Uint8Array>,
    message = "The model node failed while streaming the answer",
    code = "upstream_stream_error",
  ) => {
    flush(controller);
    controller.enqueue(new TextEncoder().encode(sseErrorEvent(message, code)));
    controller.close();
    end("stream-error");
  };
  const end = (how: RelayEnd) => {
    if (ended) return;
    ended = true;
    // After the task that closed the stream: the client's last byte leaves first, then the usage
    // is parsed, the decision line written and the region told (bench/e2e: the line and the RPC
    // in the closing task held the end of the body back by ~1 ms).
    setTimeout(() => onEnd(how, parseAnswerTail(tail), bytes), 0);
  };
  if (first) observe(first);

  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        if (first && first.byteLength > 0) emit(controller, first);
      },
      async pull(controller) {
        try {
          // Read until something reaches the client (or the body ends). A pull that returns
          // without enqueueing is never called again for the same pending read (the streams
          // spec re-pulls only when asked during a pull), and with no upstream read or timer left
          // the runtime cancels the request as hung: this lost one stream in ~1,000 whenever the
          // node's usage event (taken out by the filter) or a fragment of an event arrived as a
          // chunk of its own.
          for (;;) {
            const more = await pullOnce(controller);
            if (!more) return;
          }
        } catch (e) {
          console.log(JSON.stringify({ event: "upstream_stream_error", request_id: requestId, message: String(e) }));
          if (sse) {
            failStream(controller);
          } else {
            controller.error(e);
            end("stream-error");
          }
        }
      },
      async cancel(reason) {
        end("cancelled");
        await reader.cancel(reason).catch(() => {});
      },
    },
    { highWaterMark: 0 },
  );

  /**
   * One read of the node's body, relayed: returns true when the read gave the client nothing yet
   * (read again), false when a chunk was enqueued or the stream was ended.
   */
  async function pullOnce(controller: ReadableStreamDefaultController<Uint8Array>): Promise<boolean> {
    const read = await readWithin(reader, idleTimeoutMs, deadlineAt);
    if ("timeout" in read) {
      // The node went silent (or the request ran out of time): end the answer with an error
      // rather than hold the client, and stop the node's work on it.
      console.log(JSON.stringify({ event: `upstream_stream_${read.timeout}_timeout`, request_id: requestId }));
      void reader.cancel(new Error(`${read.timeout} timeout`)).catch(() => {});
      const message =
        read.timeout === "idle"
          ? `The model node sent nothing for ${Math.round((idleTimeoutMs ?? 0) / 1000)} s`
          : "The request reached its deadline before the answer ended";
      if (sse) failStream(controller, message, read.timeout === "idle" ? "upstream_stream_timeout" : "request_deadline_exceeded");
      else {
        controller.error(new Error(message));
        end("stream-error");
      }
      return false;
    }
    const { done, value } = read;
    if (done) {
      if (sse && !streamEnd(tail)) {
        console.log(JSON.stringify({ event: "upstream_stream_truncated", request_id: requestId }));
        failStream(controller);
        return false;
      }
      flush(controller);
      controller.close();
      end("ok");
      return false;
    }
    observe(value);
    return !emit(controller, value);
  }
}
