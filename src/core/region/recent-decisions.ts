/**
 * The region's last decisions, for the dashboard: why each request went where it did (or why it
 * could not be placed), the candidates weighed, and how it ended. A ring of
 * {@link RECENT_DECISIONS} records; ids and figures only, never a prompt or a key.
 */
import type { PriorityClass } from "../../contracts/routing.ts";
import type { CompletionOutcome, Considered, Decision } from "../../contracts/routing.ts";

/** Decisions kept per region: enough for a screenful, ~100 KB at the most. */
export const RECENT_DECISIONS = 100;

/** How a decision record's first byte was learned (see {@link DecisionRecord.firstByteKind}). */
type FirstByteKind = "stream" | "whole";

export interface DecisionRecord {
  at: number;
  requestId: string;
  tenant: string | null;
  model: string;
  /** The node chosen, or null when the region could not place the request. */
  node: string | null;
  decision: Decision | "saturated" | "no-node" | "over-share" | "rate-limited" | "over-budget" | "shed";
  matchBlocks: number;
  totalBlocks: number;
  promptTokens: number;
  predictedCachedTokens: number;
  estimatedTtftMs: number | null;
  considered: Considered[];
  /** `in-flight` until the worker reports its end. */
  status: CompletionOutcome["status"] | "in-flight" | "rejected";
  /** From its dispatch to its answer's first byte (see {@link firstByteKind} for what that byte was). */
  firstByteMs: number | null;
  /**
   * What {@link firstByteMs} measured: `stream`, a first byte reported on its own ahead of the
   * answer's end (a streamed answer's first token: its time to first token); `whole`, one reported
   * with the completion (`CompletionOutcome.firstByteMsAgo`: a non-streamed answer, which arrives
   * whole, so the time is the whole answer's); null before a first byte. A non-streamed answer
   * that stores a response (its id reported ahead of the end) counts as `stream`. Absent from
   * records of a region older than the field: readers must take its absence as unknown.
   */
  firstByteKind: FirstByteKind | null;
  durationMs: number | null;
  /** From the node's usage, when it reported them. */
  measuredPromptTokens: number | null;
  measuredCachedTokens: number | null;
  /** Its class, time-to-first-token objective (ms; 0: admission off) and time in the region's queue (ms): docs/ADMISSION.md. */
  priority: PriorityClass;
  objectiveMs: number;
  queuedMs: number;
}

export class RecentDecisions {
  private readonly ring: DecisionRecord[] = [];
  private next = 0;

  /** Keeps a record (the caller may fill in its end later: the ring holds the same object). */
  add(record: DecisionRecord): DecisionRecord {
    if (this.ring.length < RECENT_DECISIONS) this.ring.push(record);
    else {
      // A request still in flight keeps its record (its ticket fills in the end), but once out of
      // the ring nobody reads the candidates it weighed: about a kilobyte a request on 8 nodes,
      // held for as long as it streams (bench/ROUTE_COST.md, memory per request in flight).
      this.ring[this.next]!.considered = [];
      this.ring[this.next] = record;
    }
    this.next = (this.next + 1) % RECENT_DECISIONS;
    return record;
  }

  /** Newest first. */
  list(): DecisionRecord[] {
    const out: DecisionRecord[] = [];
    for (let i = 1; i <= this.ring.length; i++) out.push({ ...this.ring[(this.next - i + RECENT_DECISIONS) % RECENT_DECISIONS]! });
    return out;
  }
}
