/**
 * The edge's guard on a relayed answer: a region worker that dies mid-answer (a crash, a deploy
 * cutting its connections, a placement fault) errors the body the edge is passing on. An SSE
 * stream then ends with the same OpenAI-shaped error event a failing node's stream ends with
 * (src/proxy/relay.ts), so the client sees an error rather than a silently truncated answer, and
 * nothing hangs. (Only streams are guarded: src/edge/forward.ts passes a JSON body on as it is,
 * and a region lost under it breaks the client's connection, which the client sees as such.)
 *
 * The bytes go through the runtime's own pipe (`pipeTo` into an `IdentityTransformStream`), not a
 * JavaScript pull per chunk: workerd pumps a body between its own streams without entering the
 * isolate, where a JavaScript stream costs a read, a promise and an enqueue per SSE event
 * (bench/wan/RESULTS.md, "relay per SSE event"). The identity stream holds no chunk of its own (a
 * write completes when the client has read it), so nothing is read ahead of the client, as before.
 */
import { sseErrorEvent } from "../http/errors.ts";

/** How a guarded body ended: read to its end, lost with its region worker, or cancelled by the client. */
export type GuardedEnd = "ok" | "region-stream-lost" | "cancelled";

export function guardStream(
  body: ReadableStream<Uint8Array>,
  requestId: string,
  onEnd?: (end: GuardedEnd) => void,
): ReadableStream<Uint8Array> {
  const { readable, writable } = new IdentityTransformStream();
  // preventClose / preventAbort: the pipe leaves the client's side to us, to close it or to end it
  // with the error event. A client that goes first errors the client's side, and the pipe cancels
  // the region's body (preventCancel unset), so the region stops its node's work.
  void body.pipeTo(writable, { preventClose: true, preventAbort: true }).then(
    async () => {
      const w = writable.getWriter();
      const closed = await w.close().then(
        () => true,
        () => false,
      );
      onEnd?.(closed ? "ok" : "cancelled");
    },
    async (e: unknown) => {
      // Either the region's body failed, or the client's side did (the client went, and the pipe
      // cancelled the region's body): the error event reaches a client that is still there.
      const w = writable.getWriter();
      const told = await w
        .write(new TextEncoder().encode(sseErrorEvent("The region serving this answer failed mid-stream", "region_stream_lost")))
        .then(() => w.close())
        .then(
          () => true,
          () => false,
        );
      if (!told) return onEnd?.("cancelled");
      console.error(JSON.stringify({ event: "region_stream_lost", request_id: requestId, message: String(e).slice(0, 300) }));
      onEnd?.("region-stream-lost");
    },
  );
  return readable;
}
