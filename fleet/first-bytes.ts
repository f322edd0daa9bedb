/**
 * The requests a node sent a first byte for, by a tag the client wrote into its prompt
 * (`[request-tag:<id>]`): how a fault-injection run shows that no request's generation was started
 * twice. A router that retried after the first byte would leave the same tag on two nodes (or twice
 * on one). The record belongs to the node, not to its process: a crash must not erase the evidence.
 * A request that continues an interrupted answer (continuation.ts) starts no generation again: the
 * node counts its first byte in a record of its own (`continued_tags`).
 */

/** Letters, digits, `.`, `_`, `-`, at most 64: a client-chosen id, nothing a prompt says by chance. */
const REQUEST_TAG = /\[request-tag:([A-Za-z0-9._-]{1,64})\]/;

/**
 * Tags kept, oldest forgotten first. The fault runner reads them after each scenario, in which a
 * node gets at most ~100 requests (8 a second for ~10 s, over three or more nodes): 1,000 keeps
 * every tag of a scenario at ~30 bytes each, 30 KB per node.
 */
export const FIRST_BYTE_TAGS_KEPT = 1_000;

/** The tag a prompt carries, if any. */
export function requestTag(prompt: string): string | undefined {
  return REQUEST_TAG.exec(prompt)?.[1];
}

/** First bytes sent, counted by tag, for the last {@link FIRST_BYTE_TAGS_KEPT} tags. */
export class FirstByteTags {
  private readonly counts = new Map<string, number>();
  /** How long each tagged request waited in the engine's queue before its prefill began (ms). */
  private readonly waits = new Map<string, number>();

  /** The engine began prefilling a tagged request after waiting `queuedMs` behind others. */
  recordWait(tag: string | undefined, queuedMs: number): void {
    if (tag === undefined) return;
    this.waits.set(tag, queuedMs);
    if (this.waits.size > FIRST_BYTE_TAGS_KEPT) this.waits.delete(this.waits.keys().next().value!);
  }

  waitsJSON(): Record<string, number> {
    return Object.fromEntries(this.waits);
  }

  record(tag: string | undefined): void {
    if (tag === undefined) return;
    this.counts.set(tag, (this.counts.get(tag) ?? 0) + 1);
    if (this.counts.size > FIRST_BYTE_TAGS_KEPT) this.counts.delete(this.counts.keys().next().value!);
  }

  toJSON(): Record<string, number> {
    return Object.fromEntries(this.counts);
  }
}
