/**
 * The node table: each node's durable spec, its load model, and whether it may take requests now
 * (reporting recently, not cooling down after a failure). The router asks it which nodes are
 * available and tells it what happened; the prefix index, which it does not own, is the router's.
 */
import type { NodeEngine } from "../../contracts/node.ts";
import { NodeLoad } from "../node-load.ts";
import { poolRates } from "../rate-pool.ts";
import { emptyMetrics, type NodeMetrics } from "./metrics.ts";
import type { RegionSettings } from "./settings.ts";

/** A node's identity and capacity: the durable part of the node table. */
export interface NodeSpec {
  id: string;
  url: string;
  models: string[];
  kvCapacityTokens: number;
  /** Declared in configuration: never expires by silence. */
  static: boolean;
  /** Last report or registration (ms); persisted so expiry survives a restart. */
  lastSeen: number;
  /** Opaque id of the node process; a change means the node restarted and lost its cache. */
  bootId?: string | undefined;
  /** The engine serving, as reported (or configured); undefined: not said. */
  engine?: NodeEngine | undefined;
  /** The most requests it runs at once, as configured or reported (node-load.ts slotWaitMs); undefined: not said. */
  maxRunning?: number | undefined;
}

/**
 * The node's circuit breaker (passive health, from its answers rather than its reports):
 * - `closed`: takes requests;
 * - `open`: a request failed (before its first byte, or mid-stream): none until `cooldownUntil`,
 *   which doubles with each failure in a row (capped at a minute);
 * - `half-open`: the cool-down is over; one trial request goes through, and its answer closes the
 *   breaker (success) or opens it again for twice as long (failure). A node whose reports look
 *   healthy but whose requests fail stays out: reports never close a breaker.
 */
export type BreakerState = "closed" | "open" | "half-open";

export interface NodeEntry {
  spec: NodeSpec;
  load: NodeLoad;
  consecutiveFailures: number;
  cooldownUntil: number;
  breaker: BreakerState;
  /** A half-open node's trial request is in flight: no other request until it ends. */
  trialInFlight: boolean;
  metrics: NodeMetrics;
  /** Answers in a row showing nothing cached where a real prefix was predicted (usage-evidence.ts). */
  silentMisses: number;
  /**
   * The part of the node's cache this router's own prompts are believed to occupy (1 unless the
   * region is sharded: RegionRouter.shareForeignLoad).
   */
  cacheShare: number;
}

const MAX_FAILURE_COOLDOWN_MS = 60_000;

type TableSettings = Pick<RegionSettings, "nodeSilenceMs" | "prefillTokensPerSecond" | "failureCooldownMs">;

export class NodeTable {
  private readonly entries = new Map<string, NodeEntry>();
  private readonly settings: TableSettings;

  constructor(settings: TableSettings) {
    this.settings = settings;
  }

  get(nodeId: string): NodeEntry | undefined {
    return this.entries.get(nodeId);
  }

  /** Every entry, in insertion order. */
  values(): IterableIterator<NodeEntry> {
    return this.entries.values();
  }

  /**
   * Adds or updates a node. Returns true when the node restarted (a new boot id): its load and
   * failure record are then reset here, and its cache is gone, which the caller's index must forget.
   */
  upsert(spec: NodeSpec, now: number): boolean {
    const existing = this.entries.get(spec.id);
    if (!existing) {
      const load = new NodeLoad(this.settings.prefillTokensPerSecond);
      load.maxRunning = spec.maxRunning;
      this.entries.set(spec.id, {
        spec: { ...spec },
        load,
        consecutiveFailures: 0,
        cooldownUntil: 0,
        breaker: "closed",
        trialInFlight: false,
        metrics: emptyMetrics(),
        silentMisses: 0,
        cacheShare: 1,
      });
      return false;
    }
    const restarted = spec.bootId !== undefined && existing.spec.bootId !== undefined && spec.bootId !== existing.spec.bootId;
    if (restarted) {
      // The node restarted: its KV cache and queue are gone.
      existing.load.reset(now);
      existing.silentMisses = 0;
      existing.consecutiveFailures = 0;
      existing.cooldownUntil = 0;
      existing.breaker = "closed";
      existing.trialInFlight = false;
    }
    existing.spec = { ...spec, static: existing.spec.static || spec.static };
    existing.load.maxRunning = spec.maxRunning;
    return restarted;
  }

  /** Pools the nodes' measured prefill rates (rate-pool.ts); called when a node takes a rate sample. */
  poolRates(): void {
    poolRates(Array.from(this.entries.values(), (e) => e.load));
  }

  delete(nodeId: string): boolean {
    return this.entries.delete(nodeId);
  }

  /** Reporting within the silence timeout (or static), and its breaker lets a request through. */
  isAvailable(n: NodeEntry, now: number): boolean {
    if (!n.spec.static && n.spec.lastSeen + this.settings.nodeSilenceMs <= now) return false;
    return this.breakerAt(n, now) === "closed" || (n.breaker !== "closed" && now >= n.cooldownUntil && !n.trialInFlight);
  }

  /** The breaker as it stands at `now` (an open breaker whose cool-down is over is half-open). */
  breakerAt(n: NodeEntry, now: number): BreakerState {
    return n.breaker === "open" && now >= n.cooldownUntil ? "half-open" : n.breaker;
  }

  /**
   * A request is dispatched to the node. Returns whether it is the trial of a half-open breaker
   * (its end decides the breaker; no other request goes until then).
   */
  dispatched(n: NodeEntry, now: number): boolean {
    if (this.breakerAt(n, now) !== "half-open") return false;
    n.breaker = "half-open";
    n.trialInFlight = true;
    return true;
  }

  /** A request failed on the node (before its first byte, or mid-stream): open the breaker, for twice as long per failure in a row. */
  recordFailure(n: NodeEntry, now: number): void {
    n.consecutiveFailures++;
    n.trialInFlight = false;
    const cooldown = this.settings.failureCooldownMs * 2 ** Math.min(10, n.consecutiveFailures - 1);
    n.cooldownUntil = now + Math.min(MAX_FAILURE_COOLDOWN_MS, cooldown);
    if (cooldown > 0) {
      n.breaker = "open";
      n.metrics.cooldowns++;
    }
  }

  /** A request was answered whole: the breaker closes and the failure streak is over. */
  recordSuccess(n: NodeEntry): void {
    n.consecutiveFailures = 0;
    n.breaker = "closed";
    n.trialInFlight = false;
  }

  /** A request ended saying nothing of the node's health (refused, or the client went away): a trial may be tried again. */
  recordNeutral(n: NodeEntry, trial: boolean): void {
    if (trial) n.trialInFlight = false;
  }

  /**
   * Reporting nodes silent past the timeout (which the caller removes), and the time the next one
   * would expire, or undefined.
   */
  silent(now: number): { expired: string[]; nextAt: number | undefined } {
    const expired: string[] = [];
    let nextAt: number | undefined;
    for (const [id, n] of this.entries) {
      if (n.spec.static) continue;
      const deadline = n.spec.lastSeen + this.settings.nodeSilenceMs;
      if (deadline <= now) expired.push(id);
      else nextAt = Math.min(nextAt ?? Infinity, deadline);
    }
    return { expired, nextAt };
  }

  /** Seconds until the soonest cool-down ends (5 s if none), clamped to 1..60: a saturated answer's Retry-After. */
  retryAfterSeconds(now: number): number {
    let soonest = Infinity;
    for (const n of this.entries.values()) soonest = Math.min(soonest, Math.max(0, n.cooldownUntil - now));
    return Math.min(60, Math.max(1, Math.ceil((Number.isFinite(soonest) ? soonest : 5000) / 1000)));
  }

  /** The durable table (copies). */
  specs(): NodeSpec[] {
    return [...this.entries.values()].map((n) => ({ ...n.spec }));
  }

  /** One node's durable spec (a copy), or undefined. */
  spec(nodeId: string): NodeSpec | undefined {
    const n = this.entries.get(nodeId);
    return n ? { ...n.spec } : undefined;
  }
}
