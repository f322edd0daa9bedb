/**
 * Cutting an SSE byte stream into whole events: an event ends at a blank line (`\n\n`, or
 * `\r\n\r\n`, whose last two bytes are also `\n`-separated lines). Bytes after the last complete
 * event wait for the next chunk, so a filter built on this hands the client whole events, never a
 * partial one held longer than its own arrival.
 */
import { concatBytes } from "../http/body.ts";

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

export class SseEventSplitter {
  private pending: Uint8Array = new Uint8Array(0);

  /** The events `chunk` completes (each with its blank line), in order. */
  push(chunk: Uint8Array): Uint8Array[] {
    const data = this.pending.length ? concatBytes([this.pending, chunk]) : chunk;
    const events: Uint8Array[] = [];
    let start = 0;
    for (let i = 1; i < data.length; i++) {
      if (data[i] !== NEWLINE) continue;
      const prev = data[i - 1] === CARRIAGE_RETURN ? data[i - 2] : data[i - 1];
      if (prev !== NEWLINE) continue;
      events.push(data.subarray(start, i + 1));
      start = i + 1;
    }
    this.pending = data.slice(start);
    return events;
  }

  /** The bytes of an unfinished last event, taken out. */
  rest(): Uint8Array {
    const rest = this.pending;
    this.pending = new Uint8Array(0);
    return rest;
  }
}

/**
 * The `data:` payload of an event (its `data` lines joined by `\n`, as the SSE spec reads them),
 * or undefined for an event without data (a comment, a keep-alive).
 */
export function eventData(event: string): string | undefined {
  let data: string | undefined;
  for (const line of event.split(/\r?\n/)) {
    if (!line.startsWith("data:")) continue;
    const value = line.slice(line[5] === " " ? 6 : 5);
    data = data === undefined ? value : data + "\n" + value;
  }
  return data;
}

/** Joins byte arrays (none: an empty array). */
export function joinEvents(events: Uint8Array[]): Uint8Array {
  return events.length === 0 ? new Uint8Array(0) : events.length === 1 ? events[0]! : concatBytes(events);
}
