/**
 * Cutting an SSE byte stream into whole events: an event ends at a blank line (`\n\n`, or
 * `\r\n\r\n`, whose last two bytes are also `\n`-separated lines). Bytes after the last complete
 * event wait for the next chunk, so a filter built on this hands the client whole events, never a
 * partial one held longer than its own arrival.
 *
 * Linear in the stream's size: each byte is looked at once (the scan's state, where the current
 * line stands, carries from chunk to chunk) and copied at most once more, when the event it belongs
 * to completes. Joining the unfinished event to every new chunk and scanning it again from its
 * start made one large event quadratic: 0.77 s at 4 MiB, 3.75 s at 8 MiB in 16 KiB chunks
 * (bench/SSE.md).
 */
import { concatBytes } from "../http/body.ts";
import { StreamFailure } from "./event-filter.ts";

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/**
 * The largest event held while it arrives (bytes): past it the stream is malformed. An engine's
 * event is one chunk of a few tokens (~150 bytes); 32 MiB is far past any, and a quarter of an
 * isolate's 128 MB.
 */
const MAX_SSE_EVENT_BYTES = 32 * 1024 * 1024;

/** Where the scan stands in the current line: mid-line, right after a `\n`, or after `\n\r`. */
const MID_LINE = 0;
const AFTER_NEWLINE = 1;
const AFTER_NEWLINE_CR = 2;

export class SseEventSplitter {
  /** The unfinished event's bytes, in the pieces they came in (joined once, when it completes). */
  private parts: Uint8Array[] = [];
  private partsBytes = 0;
  private line: number = MID_LINE;
  /** Bytes examined so far (each byte pushed, once): the work done, for tests and benchmarks. */
  scannedBytes = 0;

  private readonly maxEventBytes: number;

  /** @param maxEventBytes the largest event held (default {@link MAX_SSE_EVENT_BYTES}). */
  constructor(maxEventBytes: number = MAX_SSE_EVENT_BYTES) {
    this.maxEventBytes = maxEventBytes;
  }

  /** The events `chunk` completes (each with its blank line), in order. */
  push(chunk: Uint8Array): Uint8Array[] {
    const events: Uint8Array[] = [];
    let start = 0;
    let line = this.line;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      if (b === NEWLINE) {
        if (line === MID_LINE) {
          line = AFTER_NEWLINE;
          continue;
        }
        events.push(this.take(chunk.subarray(start, i + 1)));
        start = i + 1;
        line = AFTER_NEWLINE;
      } else line = b === CARRIAGE_RETURN && line === AFTER_NEWLINE ? AFTER_NEWLINE_CR : MID_LINE;
    }
    this.line = line;
    this.scannedBytes += chunk.length;
    if (start < chunk.length) {
      // Copied: the caller may reuse its buffer.
      this.parts.push(chunk.slice(start));
      this.partsBytes += chunk.length - start;
      if (this.partsBytes > this.maxEventBytes) {
        this.rest();
        throw new StreamFailure("malformed", `the node sent an event over ${this.maxEventBytes} bytes`);
      }
    }
    return events;
  }

  /** The bytes of an unfinished last event, taken out. */
  rest(): Uint8Array {
    const rest = concatBytes(this.parts);
    this.parts = [];
    this.partsBytes = 0;
    this.line = MID_LINE;
    return rest;
  }

  /** Bytes of the unfinished event held. */
  get pendingBytes(): number {
    return this.partsBytes;
  }

  /** The held beginning of an event, joined with its end `tail`. */
  private take(tail: Uint8Array): Uint8Array {
    if (this.parts.length === 0) return tail;
    this.parts.push(tail);
    const event = concatBytes(this.parts);
    this.parts = [];
    this.partsBytes = 0;
    return event;
  }
}

/**
 * The `data:` payload of an event (its `data` lines joined by `\n`, as the SSE spec reads them),
 * or undefined for an event without data (a comment, a keep-alive).
 */
export function eventData(event: string): string | undefined {
  // The common event, one `data:` line and its blank line (every engine's token event), is read
  // without splitting it into lines by a regular expression: the seam reads every SSE event.
  const end = event.indexOf("\n");
  if (event.startsWith("data:") && end === event.length - 2 && event.endsWith("\n\n")) {
    return event.slice(event[5] === " " ? 6 : 5, end);
  }
  let data: string | undefined;
  for (const line of event.split(/\r?\n/)) {
    if (!line.startsWith("data:")) continue;
    const value = line.slice(line[5] === " " ? 6 : 5);
    data = data === undefined ? value : data + "\n" + value;
  }
  return data;
}
