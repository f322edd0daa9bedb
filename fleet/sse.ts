/**
 * The server-sent-events framing of a streamed answer, as OpenAI's and vLLM's servers write it:
 * one `data: <json>` event per chunk, then `data: [DONE]` (chat and completions); or named events,
 * `event: <type>` then `data: <json>`, without a terminator (the Responses and Messages APIs).
 */
import type { ServerResponse } from "node:http";

/**
 * Sends the response head at once and flushes it, as vLLM's server does; the first data event
 * follows at the end of prefill.
 */
export function openEventStream(res: ServerResponse, requestId: string): void {
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-request-id": requestId });
  res.flushHeaders();
}

export function writeEvent(res: ServerResponse, obj: unknown): void {
  res.write(`data: ${JSON.stringify(obj)}\n\n`);
}

/** A named event (`event: <name>`), as the Responses and Messages APIs stream them. */
export function writeNamedEvent(res: ServerResponse, event: string, obj: unknown): void {
  res.write(`event: ${event}\ndata: ${JSON.stringify(obj)}\n\n`);
}

export function endEventStream(res: ServerResponse): void {
  res.end("data: [DONE]\n\n");
}

/**
 * vLLM's mid-stream failure: its stream generator catches the error, yields
 * `data: {"error": {...}}` and then `data: [DONE]` (serving_chat.py / serving_completion.py).
 */
export function endWithErrorEvent(res: ServerResponse, error: unknown): void {
  writeEvent(res, error);
  endEventStream(res);
}

/**
 * A `data:` line that is not JSON (`text` must not parse), under its event name if the API names
 * its events, then the end of the body and of the connection.
 */
export function endWithMalformedEvent(res: ServerResponse, text: string, event?: string): void {
  const socket = res.socket;
  res.end(`${event === undefined ? "" : `event: ${event}\n`}data: ${text}\n\n`, () => socket?.end());
}

/**
 * The connection dies as a crashed process's would: no terminator, no end of the chunked body,
 * the socket reset (RST). What is already written reaches the client first; what is still queued
 * in the process is lost, as it would be.
 */
export function resetConnection(res: ServerResponse): void {
  const socket = res.socket;
  if (!socket) return void res.destroy();
  setImmediate(() => {
    if (socket.destroyed) return;
    if (typeof socket.resetAndDestroy === "function") socket.resetAndDestroy();
    else socket.destroy();
  });
}
