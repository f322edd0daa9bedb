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

/**
 * The last event of an SSE text (events are separated by a blank line), comment lines (`: ...`,
 * keep-alives) left out: a keep-alive after the final event does not make a stream unfinished.
 */
function lastEvent(tail: string): string {
  const lines = tail.split(/\r?\n/);
  let end = lines.length;
  // Skip trailing blank lines and comments, then take the lines of the last event.
  while (end > 0 && (lines[end - 1]!.trim() === "" || lines[end - 1]!.startsWith(":"))) end--;
  let start = end;
  while (start > 0 && lines[start - 1]!.trim() !== "") start--;
  return lines
    .slice(start, end)
    .filter((l) => !l.startsWith(":"))
    .join("\n");
}

export const openaiStreamEnd: StreamEnd = (tail) => lastEvent(tail).trimEnd().endsWith("data: [DONE]");

const RESPONSES_FINAL = /"type"\s*:\s*"(response\.completed|response\.incomplete|response\.failed|error)"/;
export const responsesStreamEnd: StreamEnd = (tail) => RESPONSES_FINAL.test(lastEvent(tail));

const MESSAGES_FINAL = /"type"\s*:\s*"(message_stop|error)"/;
export const messagesStreamEnd: StreamEnd = (tail) => MESSAGES_FINAL.test(lastEvent(tail));

/** Each API's terminator, by the name the edge -> region contract uses (src/contracts/region-service.ts). */
export function streamEndOf(api: "openai" | "responses" | "messages"): StreamEnd {
  return api === "responses" ? responsesStreamEnd : api === "messages" ? messagesStreamEnd : openaiStreamEnd;
}
