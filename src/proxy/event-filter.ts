/**
 * What the relay (relay.ts) asks of a filter of the node's events (stream-usage.ts,
 * src/region/seam.ts), and what a filter throws when the events show the node failed. Apart from
 * the relay, which writes the runtime's own streams, so that the filters and what reads events
 * (sse-events.ts) run anywhere: the benchmarks run them in Node.
 */
import type { StreamFailureKind } from "../contracts/routing.ts";

/** Thrown by a filter that finds the node's stream failed in its events (an error event, a malformed one). */
export class StreamFailure extends Error {
  readonly kind: StreamFailureKind;
  constructor(kind: StreamFailureKind, message: string) {
    super(message);
    this.kind = kind;
  }
}

/** What the client gets of the node's bytes: a filter of whole events (stream-usage.ts, src/region/seam.ts). */
export interface EventFilter {
  /** The bytes of `chunk` to pass on now; throws {@link StreamFailure} when the events show the node failed. */
  push(chunk: Uint8Array): Uint8Array;
  /** Whatever is left at the end of the stream (an unterminated last event). */
  flush(): Uint8Array;
  /** Drops an unfinished event of a node that failed (before another node's body is relayed). */
  abandon?(): void;
}
