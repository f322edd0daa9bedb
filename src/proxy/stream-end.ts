/**
 * How each streaming API says it has finished, so the relay can tell a complete stream from one a
 * broken connection cut short (a proxy or transport can turn a reset into a clean end of body).
 * Each looks at the last event of the stream's tail:
 * - chat and completions (OpenAI, vLLM, SGLang, TGI, llama.cpp): `data: [DONE]`;
 * - the Responses API: an event of type `response.completed`, `response.incomplete` or
 *   `response.failed` (no `[DONE]`), or an `error` event;
 * - Anthropic's Messages API: `message_stop` (no `[DONE]`), or an `error` event.
 */
export type StreamEnd = (tail: string) => boolean;

/** The last event of an SSE text (events are separated by a blank line). */
function lastEvent(tail: string): string {
  const t = tail.trimEnd();
  const cut = Math.max(t.lastIndexOf("\n\n"), t.lastIndexOf("\r\n\r\n"));
  return cut < 0 ? t : t.slice(cut).trim();
}

export const openaiStreamEnd: StreamEnd = (tail) => tail.trimEnd().endsWith("data: [DONE]");

const RESPONSES_FINAL = /"type"\s*:\s*"(response\.completed|response\.incomplete|response\.failed|error)"/;
export const responsesStreamEnd: StreamEnd = (tail) => RESPONSES_FINAL.test(lastEvent(tail));

const MESSAGES_FINAL = /"type"\s*:\s*"(message_stop|error)"/;
export const messagesStreamEnd: StreamEnd = (tail) => MESSAGES_FINAL.test(lastEvent(tail));
