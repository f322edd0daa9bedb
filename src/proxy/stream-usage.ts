/**
 * Measuring every stream: ask the node for usage when the client did not, and take the usage
 * event back out of what the client receives.
 *
 * An OpenAI-style stream carries `usage` (and with it the cached tokens the router learns from)
 * only when the request says `stream_options.include_usage: true`; most clients do not, so most
 * streams went unmeasured. When a streaming request has no `stream_options`, the router adds
 * `"stream_options":{"include_usage":true}` right after the body's opening brace (the only change
 * it ever makes to a client's bytes: everything else, spacing and key order included, is
 * forwarded as sent), and drops from the answer the one event that option adds: a chunk with no
 * choices and a `usage` object. Every other event reaches the client byte for byte as the node
 * sent it. A request that already has `stream_options` is forwarded untouched, whatever it says.
 *
 * Engines that add `"usage": null` to every chunk when usage is asked for (OpenAI's API does; vLLM
 * and SGLang do not) would show the client that field; the node APIs warmpath fronts are the
 * latter kind.
 */

import type { EventFilter } from "./relay.ts";
import { SseEventSplitter, eventData, joinEvents } from "./sse-events.ts";

const INJECTED = new TextEncoder().encode('"stream_options":{"include_usage":true},');
const OPEN_BRACE = 0x7b;

/** A stream whose request says nothing of usage: the router asks for it. */
export function asksNoUsage(parsed: Record<string, unknown>): boolean {
  return parsed.stream === true && parsed.stream_options === undefined;
}

/**
 * The body to forward: the client's bytes, with usage asked for when it is a stream that did not
 * say. `parsed` is the same body, already parsed (top-level keys only are read).
 */
export function requestStreamUsage(raw: Uint8Array, parsed: Record<string, unknown>): { body: Uint8Array; injected: boolean } {
  if (!asksNoUsage(parsed)) return { body: raw, injected: false };
  let at = 0;
  while (at < raw.length && raw[at] !== OPEN_BRACE) at++;
  if (at >= raw.length) return { body: raw, injected: false };
  const body = new Uint8Array(raw.length + INJECTED.length);
  body.set(raw.subarray(0, at + 1), 0);
  body.set(INJECTED, at + 1);
  body.set(raw.subarray(at + 1), at + 1 + INJECTED.length);
  return { body, injected: true };
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
    return joinEvents(this.events.push(chunk).filter((event) => !isUsageOnlyEvent(this.decoder.decode(event))));
  }

  /** Whatever is left at the end of the stream (an unterminated last event), as received. */
  flush(): Uint8Array {
    return this.events.rest();
  }
}

/** An event carrying only usage: a chunk with no choices and a `usage` object (what `include_usage` adds). */
export function isUsageOnlyEvent(event: string): boolean {
  const data = eventData(event);
  if (data === undefined || !data.includes('"usage"')) return false;
  try {
    const json = JSON.parse(data) as { choices?: unknown; usage?: unknown };
    return Array.isArray(json.choices) && json.choices.length === 0 && json.usage !== null && typeof json.usage === "object";
  } catch {
    return false;
  }
}
