/**
 * Measuring every stream: ask the node for usage whatever the client said, and take the usage
 * event back out of what a client that did not ask receives.
 *
 * An OpenAI-style stream carries `usage` (and with it the cached tokens the router learns from)
 * only when the request says `stream_options.include_usage: true`. Billing is the node's count
 * whenever the node gives one, so a client cannot choose to be billed by the router's estimate:
 * - a streaming request without `stream_options` gets `"stream_options":{"include_usage":true}`
 *   right after the body's opening brace (everything else, spacing and key order included, is
 *   forwarded as sent);
 * - one whose `stream_options` does not say `include_usage: true` (`false`, `null`, `{}`, any other
 *   value) is re-serialized with `stream_options` = its own object (if it was one) plus
 *   `include_usage: true`: the only request whose bytes the router re-writes for usage;
 * and the answer loses the one event that option adds (a chunk with no choices and a `usage`
 * object). Every other event reaches the client byte for byte as the node sent it. A request
 * that asked for usage itself is forwarded untouched, and keeps its usage event.
 *
 * The Responses API (`response.completed` carries `usage`) and Anthropic's Messages API
 * (`message_start` and `message_delta` carry it) always report usage in a stream: nothing to ask.
 *
 * Engines that add `"usage": null` to every chunk when usage is asked for (OpenAI's API does; vLLM
 * and SGLang do not) would show the client that field; the node APIs warmpath fronts are the
 * latter kind.
 */

import type { EventFilter } from "./event-filter.ts";
import { topLevelFields, type Field } from "./body-fields.ts";
import { concatBytes } from "../http/body.ts";
import { SseEventSplitter, eventData } from "./sse-events.ts";

const INJECTED = new TextEncoder().encode('"stream_options":{"include_usage":true},');
const OPEN_BRACE = 0x7b;
/** The request key that asks a stream for its usage. */
export const STREAM_OPTIONS = "stream_options";

/** A stream whose client did not ask for usage (`stream_options.include_usage` is not `true`): the router asks for it. */
export function asksNoUsage(parsed: Record<string, unknown>): boolean {
  if (parsed.stream !== true) return false;
  const options = parsed.stream_options;
  return !(options !== null && typeof options === "object" && (options as Record<string, unknown>).include_usage === true);
}

/**
 * The body to forward: the client's bytes, with usage asked for when it is a stream whose client
 * did not. `parsed` is the same body, already parsed (top-level keys only are read); without it
 * (the region worker, which has only the bytes) the body is taken to be such a stream, and its
 * `stream_options` is found by a scan of its top level (body-fields.ts), or is `streamOptions`
 * when the caller knows it (src/region/node-body.ts: absent, as the edge read the body, or as its
 * own scan for the completion budget read it).
 */
export function requestStreamUsage(
  raw: Uint8Array,
  parsed?: Record<string, unknown>,
  streamOptions?: Field,
): { body: Uint8Array; injected: boolean } {
  let options: unknown;
  let hasOptions: boolean;
  if (parsed) {
    if (!asksNoUsage(parsed)) return { body: raw, injected: false };
    hasOptions = Object.hasOwn(parsed, "stream_options");
    options = parsed.stream_options;
  } else {
    const field = streamOptions ?? topLevelFields(raw, [STREAM_OPTIONS]).get(STREAM_OPTIONS)!;
    hasOptions = field.present;
    options = field.present ? field.value : undefined;
    if (asked(options)) return { body: raw, injected: false };
  }
  if (hasOptions) return rewritten(raw, options);
  let at = 0;
  while (at < raw.length && raw[at] !== OPEN_BRACE) at++;
  if (at >= raw.length) return { body: raw, injected: false };
  const body = new Uint8Array(raw.length + INJECTED.length);
  body.set(raw.subarray(0, at + 1), 0);
  body.set(INJECTED, at + 1);
  body.set(raw.subarray(at + 1), at + 1 + INJECTED.length);
  return { body, injected: true };
}

function asked(options: unknown): boolean {
  return options !== null && typeof options === "object" && (options as Record<string, unknown>).include_usage === true;
}

/**
 * A body whose `stream_options` said something other than `include_usage: true`, with it said: the
 * value's bytes replaced and every other byte the client's (parsed and written again whole, a
 * `seed` of 18446744073709551615 reached the node as 18446744073709552000, and 1e999 as null).
 */
function rewritten(raw: Uint8Array, options: unknown): { body: Uint8Array; injected: boolean } {
  const own = options !== null && typeof options === "object" && !Array.isArray(options) ? (options as Record<string, unknown>) : {};
  const field = topLevelFields(raw, [STREAM_OPTIONS]).get(STREAM_OPTIONS);
  if (field?.present) {
    const value = new TextEncoder().encode(JSON.stringify({ ...own, include_usage: true }));
    const body = new Uint8Array(field.start + value.length + (raw.length - field.end));
    body.set(raw.subarray(0, field.start), 0);
    body.set(value, field.start);
    body.set(raw.subarray(field.end), field.start + value.length);
    return { body, injected: true };
  }
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(raw));
  } catch {
    return { body: raw, injected: false };
  }
  if (!json || typeof json !== "object" || Array.isArray(json)) return { body: raw, injected: false };
  (json as Record<string, unknown>).stream_options = { ...own, include_usage: true };
  return { body: new TextEncoder().encode(JSON.stringify(json)), injected: true };
}

/**
 * Removes the usage-only event from an SSE byte stream, passing every other event through
 * unchanged, whole (sse-events.ts).
 */
export class UsageEventFilter implements EventFilter {
  private readonly events = new SseEventSplitter();
  private readonly decoder = new TextDecoder();

  /** The bytes of `chunk` to pass on now. */
  push(chunk: Uint8Array): Uint8Array {
    return concatBytes(this.events.push(chunk).filter((event) => !isUsageOnlyEvent(this.decoder.decode(event))));
  }

  /** Whatever is left at the end of the stream (an unterminated last event), as received. */
  flush(): Uint8Array {
    return this.events.rest();
  }
}

/** An event carrying only usage: a chunk with no choices and a `usage` object (what `include_usage` adds). */
function isUsageOnlyEvent(event: string): boolean {
  const data = eventData(event);
  if (data === undefined || !data.includes('"usage"')) return false;
  try {
    const json = JSON.parse(data) as { choices?: unknown; usage?: unknown };
    return Array.isArray(json.choices) && json.choices.length === 0 && json.usage !== null && typeof json.usage === "object";
  } catch {
    return false;
  }
}
