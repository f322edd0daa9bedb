/**
 * The region's queue of requests that no node can take in time yet (admission.ts decides when one
 * can): pure and bounded, ordered as the region releases them.
 *
 * Order: by class (interactive, then standard, then batch: a lower class waits while a higher
 * one has anything that can be placed); within a class, fair across tenants by weight (start-time
 * fair queuing: each tenant's virtual time advances by the prefill it is released divided by its
 * weight, and the tenant with the least goes next, so a flood is released at its weight's share
 * while the others keep theirs); within one tenant's class, by earliest deadline (or least
 * uncached work: `order`). A tenant that was idle starts at the class's virtual clock: idle time
 * banks no credit.
 *
 * Bounds (per object): `maxQueued` requests and `maxQueuedBlocks` prompt blocks, applied to what
 * stays queued once the queue has been served. When full, a newcomer takes the place of the last entry of a lower class, or of a tenant holding more than
 * its weighted share of the queue while the newcomer's tenant holds less; otherwise the newcomer
 * is shed. So a flood fills at most its share, and batch is shed before anything above it.
 */
import { PRIORITY_CLASSES, type Demotion, type PriorityClass, type RouteRequest } from "../../contracts/routing.ts";
import type { Flooding } from "./tenant-demand.ts";

/**
 * Ranks past the classes: a flooding tenant's requests (tenant-demand.ts). A class is what a
 * tenant is entitled to within its share or commitment; what it sends beyond is entitled to
 * nothing, so it is released only to what no class needs (the batch tenants included), and shed
 * first. A tenant past its commitment keeps its class's order among the excess (the excess ranks
 * follow the classes, each in class order: past 2x load every committed tenant may be past its
 * commitment, and interactive must still go first); one over everyone's share of the demand, with
 * no commitment, ranks last, EXCESS_RANK.
 */
const EXCESS_BASE = PRIORITY_CLASSES.length;
/** Ranks the region orders: the classes, then the excess in class order. */
export const RANKS = 2 * PRIORITY_CLASSES.length;
/** The last rank: a tenant over everyone's share of the demand (and a batch tenant past its commitment). */
export const EXCESS_RANK = RANKS - 1;

/** The class a rank is reported as: the excess is reported as batch (it ranks after every class). */
export function rankClass(rank: number): PriorityClass {
  return PRIORITY_CLASSES[Math.min(rank, PRIORITY_CLASSES.length - 1)]!;
}

/** The rank a tenant's request takes, from the class it asked for and how far it floods (tenant-demand.ts). */
export function demotedRank(asked: number, flooding: Flooding): number {
  const batch = PRIORITY_CLASSES.length - 1;
  if (flooding === "commitment" || flooding === "growth") return EXCESS_BASE + asked;
  if (flooding === undefined || asked >= batch) return asked;
  return flooding === "everyone" ? EXCESS_RANK : batch;
}

/** Why a request ranks below the class it asked for (`asked`), from how far its tenant floods; undefined: it does not. */
export function demotionOf(asked: number, flooding: Flooding): Demotion | undefined {
  if (flooding === "commitment" || flooding === "growth") return flooding;
  return demotedRank(asked, flooding) === asked ? undefined : "share";
}

/** A class's rank: 0 is released first. */
export function classRank(c: PriorityClass | undefined): number {
  return c === undefined ? 1 : PRIORITY_CLASSES.indexOf(c);
}

/** One queued request. */
export interface QueueEntry {
  id: string;
  req: RouteRequest;
  tenant: string;
  weight: number;
  rank: number;
  /** Why its rank is below the class it asked for, if it is. */
  demoted?: Demotion | undefined;
  enqueuedAt: number;
  deadlineAt: number;
  objectiveMs: number;
  /** The least its own prefill can take, ms: its uncached tokens where most of it is believed cached, at the fastest node's rate. */
  ownMs: number;
  /** Its uncached prefill where most of it is believed cached (tokens): its cost to the fleet and to its tenant's virtual time. */
  work: number;
  /** Its prompt blocks: what it holds of the queue's memory. */
  blocks: number;
  /** Its place within its tenant's class: the deadline or the work (then arrival). */
  key: number;
  seq: number;
}

/** One tenant's entries of one class, in release order, and its virtual time. */
interface TenantLane {
  tenant: string;
  entries: QueueEntry[];
  vt: number;
  work: number;
  weight: number;
}

/** What a visit did with an entry. */
export type Visit = "placed" | "kept" | "removed";

export class AdmissionQueue {
  private readonly lanes: Array<Map<string, TenantLane>> = Array.from({ length: RANKS }, () => new Map());
  /**
   * The lanes with entries, by rank: what a visit walks. Idle lanes outnumber them (a lane is kept
   * while its tenant is ahead of the clock): with 1,000 tenants taking turns, ~540 lanes against a
   * few with entries (bench/route-cost.ts, by active tenants).
   */
  private readonly busy: Array<Set<TenantLane>> = Array.from({ length: RANKS }, () => new Set());
  private readonly clock: number[] = new Array<number>(RANKS).fill(0);
  private readonly byId = new Map<string, QueueEntry>();
  private queuedBlocks = 0;
  private seq = 0;
  private readonly maxQueued: number;
  private readonly maxBlocks: number;

  constructor(maxQueued: number, maxBlocks: number) {
    this.maxQueued = maxQueued;
    this.maxBlocks = maxBlocks;
  }

  get size(): number {
    return this.byId.size;
  }

  get blocks(): number {
    return this.queuedBlocks;
  }

  get(id: string): QueueEntry | undefined {
    return this.byId.get(id);
  }

  /** Entries per class, by rank (the excess counted as batch). */
  depthByClass(): number[] {
    const out = PRIORITY_CLASSES.map(() => 0);
    for (const e of this.byId.values()) out[Math.min(e.rank, PRIORITY_CLASSES.length - 1)]!++;
    return out;
  }

  /** Whether anything of a class above `rank` is queued. */
  higherQueued(rank: number): boolean {
    for (let r = 0; r < rank; r++) if (this.busy[r]!.size > 0) return true;
    return false;
  }

  /** Adds an entry, whatever the bounds (the caller serves the queue, then calls {@link makeRoom} if it still waits). Returns it. */
  add(e: Omit<QueueEntry, "seq">): QueueEntry {
    const entry: QueueEntry = { ...e, seq: ++this.seq };
    this.insert(entry);
    return entry;
  }

  /**
   * Brings the queue within its bounds with `entry` in it, evicting what ranks below it. Returns
   * the evicted entries (the caller refuses them), or undefined if `entry` itself does not fit: it
   * is then taken out, and whatever was evicted for it goes back.
   */
  makeRoom(entry: QueueEntry): { evicted: QueueEntry[] } | undefined {
    const evicted: QueueEntry[] = [];
    const over = () => this.byId.size > this.maxQueued || this.queuedBlocks > this.maxBlocks;
    if (entry.blocks > this.maxBlocks) {
      this.remove(entry);
      return undefined;
    }
    while (over()) {
      const victim = this.victimFor(entry);
      if (!victim) {
        this.remove(entry);
        for (const v of evicted) this.insert(v);
        return undefined;
      }
      this.remove(victim);
      evicted.push(victim);
    }
    return { evicted };
  }

  private insert(entry: QueueEntry): void {
    const lanes = this.lanes[entry.rank]!;
    let lane = lanes.get(entry.tenant);
    if (!lane) {
      lane = { tenant: entry.tenant, entries: [], vt: 0, work: 0, weight: entry.weight };
      lanes.set(entry.tenant, lane);
    }
    // An idle tenant starts at the class's clock: no credit for the time it sent nothing.
    if (lane.entries.length === 0) lane.vt = Math.max(lane.vt, this.clock[entry.rank]!);
    lane.weight = entry.weight;
    const list = lane.entries;
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const m = list[mid]!;
      if (m.key < entry.key || (m.key === entry.key && m.seq < entry.seq)) lo = mid + 1;
      else hi = mid;
    }
    list.splice(lo, 0, entry);
    this.busy[entry.rank]!.add(lane);
    lane.work += entry.work;
    this.byId.set(entry.id, entry);
    this.queuedBlocks += entry.blocks;
  }

  /** Takes an entry out without charging its tenant (refused, cancelled or evicted). */
  remove(e: QueueEntry): void {
    if (this.byId.get(e.id) !== e) return;
    const lane = this.lanes[e.rank]!.get(e.tenant)!;
    const i = lane.entries.indexOf(e);
    lane.entries.splice(i, 1);
    if (lane.entries.length === 0) this.busy[e.rank]!.delete(lane);
    lane.work -= e.work;
    this.byId.delete(e.id);
    this.queuedBlocks -= e.blocks;
    this.dropIdleLane(e.rank, lane);
  }

  /** An idle lane is kept only while its tenant is ahead of the clock (its debt must outlive a brief gap). */
  private dropIdleLane(rank: number, lane: TenantLane): void {
    if (lane.entries.length === 0 && lane.vt <= this.clock[rank]!) this.lanes[rank]!.delete(lane.tenant);
  }

  /**
   * Visits the entries in release order; `fn` says what became of each: `placed` (its tenant is
   * charged), `removed` (refused: no charge) or `kept` (the next is visited). Each entry is visited
   * at most once per call.
   */
  visit(fn: (e: QueueEntry) => Visit): void {
    for (let rank = 0; rank < this.lanes.length; rank++) {
      // In any order: the next lane is the least (virtual time, tenant), a total order.
      const lanes = [...this.busy[rank]!];
      const cursor = new Map<TenantLane, number>(lanes.map((l) => [l, 0]));
      for (;;) {
        let next: TenantLane | undefined;
        for (const l of lanes) {
          if (cursor.get(l)! >= l.entries.length) continue;
          if (!next || l.vt < next.vt || (l.vt === next.vt && l.tenant < next.tenant)) next = l;
        }
        if (!next) break;
        const at = cursor.get(next)!;
        const e = next.entries[at]!;
        const what = fn(e);
        if (what === "kept") {
          cursor.set(next, at + 1);
          continue;
        }
        if (what === "placed") {
          this.clock[rank] = Math.max(this.clock[rank]!, next.vt);
          next.vt += e.work / next.weight;
        }
        // Already taken out by `fn` (remove): the cursor points at the entry after it, which stays.
        if (this.byId.get(e.id) !== e) continue;
        // Taken out: the cursor now points at the entry after it.
        next.entries.splice(at, 1);
        if (next.entries.length === 0) this.busy[rank]!.delete(next);
        next.work -= e.work;
        this.byId.delete(e.id);
        this.queuedBlocks -= e.blocks;
      }
      for (const l of lanes) this.dropIdleLane(rank, l);
    }
  }

  /**
   * The prefill (tokens) the region will release before `e`, as if it served the queue as a fluid
   * by the order above: every higher class, and of its class each tenant's work up to its weighted
   * share of what `e`'s tenant has ahead of and including `e` (generalised processor sharing).
   */
  workAhead(e: QueueEntry): number {
    let ahead = 0;
    for (let r = 0; r < e.rank; r++) for (const l of this.lanes[r]!.values()) ahead += l.work;
    const own = this.lanes[e.rank]!.get(e.tenant);
    if (!own) return ahead;
    let mine = 0;
    for (const x of own.entries) {
      mine += x.work;
      if (x === e) break;
    }
    for (const l of this.lanes[e.rank]!.values()) ahead += l === own ? mine : Math.min(l.work, (mine * l.weight) / own.weight);
    return Math.max(0, ahead - e.work);
  }

  /** All the prefill queued (tokens). */
  totalWork(): number {
    let w = 0;
    for (const lanes of this.lanes) for (const l of lanes.values()) w += l.work;
    return w;
  }

  /** The earliest deadline of any entry (when one must be refused if nothing else happens), or undefined. */
  earliestDeadline(): number | undefined {
    let at: number | undefined;
    for (const e of this.byId.values()) if (at === undefined || e.deadlineAt < at) at = e.deadlineAt;
    return at;
  }

  /** The entries queued longest first: for expiry sweeps. */
  entries(): IterableIterator<QueueEntry> {
    return this.byId.values();
  }

  /**
   * The entry a full queue gives up for `newcomer`: the last of the lowest class below it; or, in
   * its class, the last of the tenant most over its weighted share of the queue, when the
   * newcomer's tenant is within its own. Undefined: the newcomer ranks below everything queued.
   */
  private victimFor(newcomer: QueueEntry): QueueEntry | undefined {
    for (let rank = this.lanes.length - 1; rank > newcomer.rank; rank--) {
      const lane = this.longestLane(rank);
      if (lane) return lane.entries.at(-1);
    }
    const lanes = [...this.lanes[newcomer.rank]!.values()].filter((l) => l.entries.length > 0);
    let totalWeight = 0;
    for (const l of lanes) totalWeight += l.weight;
    const own = lanes.find((l) => l.tenant === newcomer.tenant);
    const share = (w: number) => (this.maxQueued * w) / totalWeight;
    // The newcomer is in its lane already: its tenant must be within its share with it.
    if ((own?.entries.length ?? 0) > share(newcomer.weight)) return undefined;
    let worst: TenantLane | undefined;
    let worstOver = 0;
    for (const l of lanes) {
      const over = l.entries.length - share(l.weight);
      if (l !== own && over > worstOver) {
        worst = l;
        worstOver = over;
      }
    }
    return worst?.entries.at(-1);
  }

  private longestLane(rank: number): TenantLane | undefined {
    let best: TenantLane | undefined;
    for (const l of this.lanes[rank]!.values())
      if (l.entries.length > 0 && (!best || l.entries.length / l.weight > best.entries.length / best.weight)) best = l;
    return best;
  }
}
