/**
 * The edge's guard on a relayed answer: a region worker that dies mid-answer (a crash, a deploy
 * cutting its connections, a placement fault) errors the body the edge is passing on. An SSE
 * stream then ends with the same OpenAI-shaped error event a failing node's stream ends with
 * (src/proxy/relay.ts), so the client sees an error rather than a silently truncated answer, and
 * nothing hangs; a JSON body is errored, which the client sees as a broken connection.
 *
 * Pull-based with a high-water mark of zero, as the relay: nothing is read ahead of the client.
 */
import { sseErrorEvent } from "../http/errors.ts";

/** How a guarded body ended: read to its end, lost with its region worker, or cancelled by the client. */
export type GuardedEnd = "ok" | "region-stream-lost" | "cancelled";

export function guardStream(
  body: ReadableStream<Uint8Array>,
  sse: boolean,
  requestId: string,
  onEnd?: (end: GuardedEnd) => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            controller.close();
            onEnd?.("ok");
          } else controller.enqueue(value);
        } catch (e) {
          console.error(JSON.stringify({ event: "region_stream_lost", request_id: requestId, message: String(e).slice(0, 300) }));
          onEnd?.("region-stream-lost");
          if (!sse) return controller.error(e);
          controller.enqueue(
            new TextEncoder().encode(sseErrorEvent("The region serving this answer failed mid-stream", "region_stream_lost")),
          );
          controller.close();
        }
      },
      cancel(reason) {
        onEnd?.("cancelled");
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
