/**
 * The server-sent-events framing of a streamed answer, as OpenAI's and vLLM's servers write it:
 * one `data: <json>` event per chunk, then `data: [DONE]`.
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

export function endEventStream(res: ServerResponse): void {
  res.end("data: [DONE]\n\n");
}
