/**
 * The simulated GPU fleet and its event loop, in simulated milliseconds.
 *
 * Node model (each figure a FleetConfig field, each a run.ts flag):
 * - Prefix cache: an LRU of `capacityTokens / blockTokens` blocks. A prompt's cached prefix is
 *   its leading run of blocks present on the node (a block is reusable only while every block
 *   before it is cached). At prefill start the prompt's blocks are touched last-to-first, so
 *   under pressure a prompt's tail is evicted before its head, as in vLLM's free-block queue.
 *   Only prompt blocks are cached (answers re-enter the cache as part of the next turn's prompt).
 * - Prefill: one request at a time, first come first served, `uncached / prefillRate` seconds
 *   (times the request's hidden noise factor). At least one token is always computed.
 * - Decode: `outputTokens / decodeRate` seconds after prefill, concurrent with everything else.
 * - Slots: a request holds one of `slots` from prefill start to decode end; the queue head waits
 *   for a free slot (FCFS: nothing overtakes it).
 * - Load reports: every `reportIntervalMs`, staggered across nodes: running, waiting, and KV usage
 *   as vLLM reports it (blocks held by running requests; idle cached blocks count as free).
 *
 * TTFT is arrival to end of prefill: the router and network are instantaneous, so every
 * difference between policies is placement (and, for a dispatcher that refuses or holds requests,
 * admission: see Dispatcher).
 */
import { EventHeap } from "./heap.ts";
import type { BenchRequest } from "./workloads/types.ts";

export interface FleetConfig {
  nodes: number;
  capacityTokens: number;
  /** Tokens per second per node. */
  prefillRate: number;
  /** Tokens per second per request. */
  decodeRate: number;
  slots: number;
  reportIntervalMs: number;
  /** Sigma of the lognormal per-request prefill time factor (mean 1), hidden from routers. */
  noiseSigma: number;
}

export const DEFAULT_FLEET: FleetConfig = {
  nodes: 8,
  capacityTokens: 500_000,
  prefillRate: 10_000,
  decodeRate: 40,
  slots: 64,
  reportIntervalMs: 1_000,
  noiseSigma: 0,
};

/** One request's life in a run. */
export interface Live {
  req: BenchRequest;
  /** Arrival at this run's speed, ms. */
  arrival: number;
  node: number;
  /** Router ticket, or anything a dispatcher needs to keep. */
  ticket: string;
  /** Oracle bookkeeping: the prefill time it predicted when it enqueued the request. */
  estimateMs: number;
  /** Cached tokens the router predicted at dispatch (routers only; NaN otherwise). */
  predictedCachedTokens: number;
  noise: number;
  cachedTokens: number;
  uncachedTokens: number;
  prefillStart: number;
  firstToken: number;
  end: number;
  slotWait: boolean;
  /**
   * Why the dispatcher refused it (it never reached a node; it scores as a miss), or undefined.
   * Set only by dispatchers that refuse (bench/goodput.ts); the main bench places everything.
   */
  refused?: string | undefined;
  /** When it was put on a node's queue (ms): its arrival, unless its dispatcher held it first. NaN while held or refused. */
  placedAt?: number;
  /** When its dispatcher decided it (placed or refused), ms. */
  decidedAt?: number;
  /** Its time-to-first-token objective (ms): {@link objectiveMs}, the same for every dispatcher. */
  objectiveMs?: number;
}

/**
 * A request's time-to-first-token objective, for scoring every dispatcher alike (bench/goodput.ts):
 * its tenant's (`req.objectiveMs`) if it has one, else `max(1 s, 5 x its cold prefill)`, the cold
 * prefill being its whole prompt at the fleet's TRUE prefill rate (issue 30's definition; a
 * router applies its own learned rate, but the score must not depend on what a router learned).
 */
export function objectiveMs(req: BenchRequest, prefillRate: number): number {
  if (req.objectiveMs !== undefined) return req.objectiveMs;
  return Math.max(1000, (5 * req.promptTokens * 1000) / prefillRate);
}

/** A block LRU: Map iteration order is insertion order, so the first key is the coldest. */
export class BlockCache {
  readonly map = new Map<number, true>();
  readonly capacityBlocks: number;
  constructor(capacityBlocks: number) {
    this.capacityBlocks = Math.max(1, Math.floor(capacityBlocks));
  }
  match(blocks: readonly number[]): number {
    let i = 0;
    while (i < blocks.length && this.map.has(blocks[i]!)) i++;
    return i;
  }
  touch(blocks: readonly number[]): void {
    const m = this.map;
    for (let i = blocks.length - 1; i >= 0; i--) {
      const b = blocks[i]!;
      m.delete(b);
      m.set(b, true);
    }
    let excess = m.size - this.capacityBlocks;
    if (excess > 0) {
      for (const k of m.keys()) {
        m.delete(k);
        if (--excess <= 0) break;
      }
    }
  }
}

export class SimNode {
  readonly index: number;
  readonly id: string;
  readonly cache: BlockCache;
  queue: Live[] = [];
  qHead = 0;
  running = 0;
  prefilling: Live | undefined;
  /** KV tokens held by running requests (prompt + answer), for the kvUsage report. */
  activeKvTokens = 0;
  /** Oracle bookkeeping: predicted prefill ms queued, and blocks of queued prompts (counts). */
  queuedEstimateMs = 0;
  readonly pendingBlocks = new Map<number, number>();
  // Accounting.
  prefillBusyMs = 0;
  prefillTokens = 0;
  requests = 0;
  constructor(index: number, id: string, capacityBlocks: number) {
    this.index = index;
    this.id = id;
    this.cache = new BlockCache(capacityBlocks);
  }
  get waiting(): number {
    return this.queue.length - this.qHead;
  }
}

/**
 * What a dispatcher does with a request: a node index (placed now), a refusal (with its reason;
 * it never reaches a node), or "queued" (held inside the dispatcher, decided later by `drain`).
 */
export type Placement = number | { refused: string } | "queued";

/** A held request the dispatcher has decided: placed on `node`, or refused. */
export type Decided = { live: Live; node: number } | { live: Live; refused: string };

/** How requests are placed: a RegionRouter with a policy, the oracle, or the pooled bound. */
export interface Dispatcher {
  readonly name: string;
  /** Maintain the nodes' pendingBlocks and queuedEstimateMs (the oracles read them). Default: only for "oracle". */
  readonly trackPending?: boolean;
  init(fleet: Fleet): void;
  /** The node index, or a refusal, or "queued" (only a dispatcher with `drain` may hold requests). */
  route(r: Live, now: number): Placement;
  firstToken(r: Live, now: number): void;
  complete(r: Live, now: number): void;
  report(node: SimNode, now: number): void;
  /**
   * Held requests decided as of `now`. Called after every fleet event (first token, completion,
   * report) and at the times `wakeAt` asks for, as the region Durable Object acts on each first
   * byte, completion and report, and on its alarm.
   */
  drain?(now: number): Decided[];
  /** When to call `drain` again if no event comes first (the Durable Object's alarm); undefined: no need. */
  wakeAt?(now: number): number | undefined;
}

interface Event {
  t: number;
  seq: number;
  kind: 0 | 1 | 2 | 3; // prefill end, decode end, report, silent restart
  node: number;
  live: Live | undefined;
}

/** Faults injected into a run. */
export interface Faults {
  /**
   * At the arrival time of the request at this fraction of the run (0..1), this node loses its
   * whole prefix cache (a restart), and nothing tells the router: no new boot id, reports as before.
   */
  silentRestart?: { node: number; atFraction: number };
}

export class Fleet {
  readonly cfg: FleetConfig;
  readonly nodes: SimNode[];
  readonly blockTokens: number;
  /** Maintain pendingBlocks (only the oracle reads them). */
  trackPending = false;
  constructor(cfg: FleetConfig, blockTokens: number) {
    this.cfg = cfg;
    this.blockTokens = blockTokens;
    const width = String(cfg.nodes - 1).length;
    this.nodes = Array.from(
      { length: cfg.nodes },
      (_, i) => new SimNode(i, "node-" + String(i).padStart(width, "0"), cfg.capacityTokens / blockTokens),
    );
  }

  /** Tokens of `r`'s prompt cached on `node` now, in the engine's accounting. */
  cachedTokensOn(node: SimNode, req: BenchRequest): number {
    const blocks = node.cache.match(req.trueBlocks);
    // An engine always computes at least the last token (it needs its logits).
    return Math.min(blocks * this.blockTokens, req.promptTokens - 1);
  }
}

/** When a silent restart happens: the arrival of the request at its fraction of the run. */
export function silentRestartAt(lives: readonly Live[], restart: { atFraction: number }): number {
  return lives[Math.min(lives.length - 1, Math.floor(restart.atFraction * lives.length))]!.arrival;
}

/** Deterministic per-request noise factor: lognormal with mean 1, same draw for every policy. */
export function noiseFactor(id: number, sigma: number): number {
  if (sigma <= 0) return 1;
  const u1 = (hashUnit(id * 2 + 1) + 1e-12) / (1 + 2e-12);
  const u2 = hashUnit(id * 2 + 2);
  const z = Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  return Math.exp(sigma * z - (sigma * sigma) / 2);
}

function hashUnit(x: number): number {
  let h = Math.imul(x ^ 0x9e3779b9, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 4294967296;
}

/**
 * Replays `requests` (arrivals divided by `speed`) through `dispatcher` on a fresh fleet.
 * Returns every request's life, in arrival order.
 */
export function simulate(
  requests: readonly BenchRequest[],
  speed: number,
  cfg: FleetConfig,
  blockTokens: number,
  dispatcher: Dispatcher,
  faults: Faults = {},
): { lives: Live[]; fleet: Fleet } {
  const fleet = new Fleet(cfg, blockTokens);
  fleet.trackPending = dispatcher.name === "oracle" || dispatcher.trackPending === true;
  dispatcher.init(fleet);
  const heap = new EventHeap<Event>();
  const lives: Live[] = requests.map((req) => ({
    req,
    arrival: req.arrival / speed,
    node: -1,
    ticket: "",
    estimateMs: 0,
    predictedCachedTokens: NaN,
    noise: noiseFactor(req.id, cfg.noiseSigma),
    cachedTokens: 0,
    uncachedTokens: 0,
    prefillStart: NaN,
    firstToken: NaN,
    end: NaN,
    slotWait: false,
    refused: undefined,
    placedAt: NaN,
    decidedAt: NaN,
    objectiveMs: objectiveMs(req, cfg.prefillRate),
  }));
  const firstAt = lives.length > 0 ? lives[0]!.arrival : 0;
  for (const n of fleet.nodes) {
    // Staggered so reports do not all land on the same millisecond.
    heap.push({ t: firstAt + (n.index * cfg.reportIntervalMs) / cfg.nodes, seq: 0, kind: 2, node: n.index, live: undefined });
  }
  let outstanding = lives.length;
  if (faults.silentRestart && lives.length > 0) {
    const at = silentRestartAt(lives, faults.silentRestart);
    heap.push({ t: at, seq: 0, kind: 3, node: faults.silentRestart.node, live: undefined });
  }

  const tryStart = (node: SimNode, now: number): void => {
    if (node.prefilling || node.qHead >= node.queue.length) return;
    if (node.running >= cfg.slots) {
      node.queue[node.qHead]!.slotWait = true;
      return;
    }
    const r = node.queue[node.qHead++]!;
    if (node.qHead > 1024 && node.qHead * 2 > node.queue.length) {
      node.queue = node.queue.slice(node.qHead);
      node.qHead = 0;
    }
    if (fleet.trackPending) {
      node.queuedEstimateMs -= r.estimateMs;
      for (const b of r.req.trueBlocks) {
        const c = node.pendingBlocks.get(b)!;
        if (c <= 1) node.pendingBlocks.delete(b);
        else node.pendingBlocks.set(b, c - 1);
      }
    }
    r.cachedTokens = fleet.cachedTokensOn(node, r.req);
    r.uncachedTokens = r.req.promptTokens - r.cachedTokens;
    node.cache.touch(r.req.trueBlocks);
    const ms = ((r.uncachedTokens * 1000) / cfg.prefillRate) * r.noise;
    r.prefillStart = now;
    node.prefilling = r;
    node.running++;
    node.activeKvTokens += r.req.promptTokens + r.req.outputTokens;
    node.prefillBusyMs += ms;
    node.prefillTokens += r.uncachedTokens;
    heap.push({ t: now + ms, seq: 0, kind: 0, node: node.index, live: r });
  };

  /** Puts `r` on node `n`'s queue at `now`. */
  const place = (r: Live, n: number, now: number): void => {
    const node = fleet.nodes[n]!;
    r.node = n;
    r.placedAt = now;
    r.decidedAt = now;
    node.requests++;
    node.queue.push(r);
    if (fleet.trackPending) {
      node.queuedEstimateMs += r.estimateMs;
      for (const b of r.req.trueBlocks) node.pendingBlocks.set(b, (node.pendingBlocks.get(b) ?? 0) + 1);
    }
    tryStart(node, now);
  };
  const refuse = (r: Live, reason: string, now: number): void => {
    r.refused = reason;
    r.decidedAt = now;
    outstanding--;
  };
  // Held requests: only a dispatcher with `drain` may hold them; it is asked after every fleet
  // event and at the time it asks to be woken (Infinity: never).
  const holds = dispatcher.drain !== undefined;
  let held = 0;
  let wake = Infinity;
  const drain = (now: number): void => {
    for (const d of dispatcher.drain!(now)) {
      held--;
      if ("refused" in d) refuse(d.live, d.refused, now);
      else place(d.live, d.node, now);
    }
    const w = dispatcher.wakeAt?.(now);
    // A wake-up asked for now or earlier would loop without time passing: a millisecond later.
    wake = w === undefined || held === 0 ? Infinity : Math.max(w, now + 1);
  };

  let next = 0;
  while (outstanding > 0) {
    const arrivalAt = next < lives.length ? lives[next]!.arrival : Infinity;
    const eventAt = heap.peekTime();
    // Simultaneous events: the fleet's own events first, then a wake-up, then arrivals.
    if (eventAt <= arrivalAt && eventAt <= wake && eventAt < Infinity) {
      const e = heap.pop()!;
      const node = fleet.nodes[e.node]!;
      if (e.kind === 3) {
        node.cache.map.clear();
        continue;
      }
      if (e.kind === 2) {
        dispatcher.report(node, e.t);
        heap.push({ t: e.t + cfg.reportIntervalMs, seq: 0, kind: 2, node: e.node, live: undefined });
        if (holds && held > 0) drain(e.t);
        continue;
      }
      const r = e.live!;
      if (e.kind === 0) {
        r.firstToken = e.t;
        node.prefilling = undefined;
        dispatcher.firstToken(r, e.t);
        heap.push({ t: e.t + (r.req.outputTokens * 1000) / cfg.decodeRate, seq: 0, kind: 1, node: e.node, live: r });
        tryStart(node, e.t);
      } else {
        r.end = e.t;
        node.running--;
        node.activeKvTokens -= r.req.promptTokens + r.req.outputTokens;
        outstanding--;
        dispatcher.complete(r, e.t);
        tryStart(node, e.t);
      }
      if (holds && held > 0) drain(e.t);
      continue;
    }
    if (wake <= arrivalAt && wake < Infinity) {
      drain(wake);
      continue;
    }
    if (arrivalAt === Infinity) throw new Error(`${dispatcher.name}: ${held} requests held with nothing left to release them`);
    const r = lives[next++]!;
    const now = r.arrival;
    const p = dispatcher.route(r, now);
    if (typeof p === "number") place(r, p, now);
    else if (p === "queued") {
      if (!holds) throw new Error(`${dispatcher.name} queued a request but has no drain`);
      held++;
    } else refuse(r, p.refused, now);
    if (holds) {
      const w = held > 0 ? dispatcher.wakeAt?.(now) : undefined;
      wake = w === undefined ? Infinity : Math.max(w, now + 1);
    }
  }
  return { lives, fleet };
}
