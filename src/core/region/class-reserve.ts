/**
 * How many of a region's nodes the classes below an active one may keep busy (docs/ADMISSION.md):
 * the nodes the higher classes' recent demand does not need. An engine prefills in arrival order
 * and a prefill cannot be taken back, so a long batch prefill placed on an idle node holds that
 * node for its whole length: every interactive or standard request arriving meanwhile waits for
 * another node. Placing lower-class work only on idle nodes is not enough once it has taken them
 * all; it may hold only the nodes the classes above it leave. Measured (bench:goodput's mix at three
 * times capacity, when this landed): with idle nodes alone, batch (60 s objective) was answered 100% in time
 * while standard requests were shed; batch must absorb shedding first.
 *
 * Demand is each class's uncached prefill arriving (decayed with DEMAND_TAU_MS), in nodes at the
 * region's mean rate; a node is busy with a class while a request of it waits for its first byte
 * there.
 */
import { RANKS } from "./admission-queue.ts";
import { decay } from "../stats.ts";

/** The window over which a class's demand is averaged (ms): as long as a class counts as active. */
export const DEMAND_TAU_MS = 10_000;

export class ClassReserve {
  private readonly demand = Array.from({ length: RANKS }, () => ({ tokens: 0, at: 0 }));
  /** Requests before their first byte, per node and class. */
  private readonly pending = new Map<string, number[]>();

  /** A request of class `rank` arrived, costing `tokens` of uncached prefill. */
  arrived(rank: number, tokens: number, now: number): void {
    const d = this.demand[rank]!;
    d.tokens = this.decayed(rank, now) + tokens;
    d.at = now;
  }

  placed(nodeId: string, rank: number): void {
    let p = this.pending.get(nodeId);
    if (!p) this.pending.set(nodeId, (p = new Array<number>(RANKS).fill(0)));
    p[rank]!++;
  }

  /** Its first byte came, or it ended before one. */
  prefillDone(nodeId: string, rank: number): void {
    const p = this.pending.get(nodeId);
    if (p && p[rank]! > 0) p[rank]!--;
  }

  forgetNode(nodeId: string): void {
    this.pending.delete(nodeId);
  }

  /**
   * Whether a request of class `rank` may take one more node: fewer nodes are busy with classes at
   * or below it than the `nodes` of the region (at `meanRate` tokens/s each) the classes above leave.
   */
  mayTake(rank: number, nodes: number, meanRate: number, now: number): boolean {
    let higher = 0;
    for (let r = 0; r < rank; r++) higher += this.decayed(r, now);
    const needed = meanRate > 0 ? higher / (DEMAND_TAU_MS / 1000) / meanRate : nodes;
    let busy = 0;
    for (const p of this.pending.values()) {
      let lower = 0;
      for (let r = rank; r < p.length; r++) lower += p[r]!;
      if (lower > 0) busy++;
    }
    // A fraction of a node left is a node it may take: a trickle above must not starve a class.
    return busy < nodes - needed;
  }

  private decayed(rank: number, now: number): number {
    const d = this.demand[rank]!;
    return decay(d.tokens, d.at, now, DEMAND_TAU_MS);
  }
}
