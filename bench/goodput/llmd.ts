/**
 * llm-d's inference scheduler (endpoint picker) with its default scheduling profile, and its opt-in
 * probabilistic admitter for sheddable traffic.
 *
 * Source: llm-d/llm-d-inference-scheduler at 520af47896e5f06e43d09aca281a1149187b0ffd (which now
 * carries the gateway-api-inference-extension EPP as github.com/llm-d/llm-d-router):
 * - pkg/epp/config/loader/defaults.go (`loadDefaultConfig`, `ensureSchedulingLayer`): the default
 *   profile scores each endpoint with queue-scorer (weight 2), kv-cache-utilization-scorer (2) and
 *   prefix-cache-scorer (3), and the max-score picker takes the highest total, exact ties at random
 *   (picker/maxscore/picker.go: shuffle, then a stable sort by score);
 * - scorer/queuedepth/queue.go: `(max - q) / (max - min)` of the endpoints' waiting queue sizes
 *   (1 when all are equal); scorer/kvcacheutilization: `1 - KV cache usage`;
 *   scorer/prefix/plugin.go: matched blocks / total blocks of the prompt, from the approximate
 *   prefix index (requestcontrol/dataproducer/approximateprefix: an LRU of block hashes per
 *   endpoint, filled by the scheduler's own decisions, 16-token blocks, at most 256 blocks (4,096
 *   tokens) matched, capacity auto-tuned to the endpoint's KV blocks);
 * - requestcontrol/admitter/probabilisticadmitter/plugin.go: a request of priority >= 0 is always
 *   admitted; a sheddable one (priority < 0) is rejected with probability
 *   `min(sat^power x k, 1)`, power 5 and k 300 by default, where `sat` is the average over endpoints
 *   of `max(waiting / queueDepthThreshold, kvUsage / kvCacheUtilThreshold)`, thresholds 5 and 0.8
 *   by default (the same formula as the utilization saturation detector,
 *   flowcontrol/saturationdetector/utilization/detector.go). So every sheddable request is shed
 *   once the average saturation reaches 0.32 (0.32^5 x 300 = 1.0). The legacy admission
 *   controller (requestcontrol/admission.go) also sheds sheddable requests at saturation >= 1,
 *   which that already covers.
 *
 * In the simulation: waiting queue size and KV usage are read from the nodes at decision time
 * (the endpoint picker scrapes them every few tens of milliseconds; the others' 1 s reports would
 * be unfaithful to it), KV usage being the blocks of running requests over capacity as vLLM
 * reports it. The prefix index uses the router's 128-token blocks (the first 32: 4,096 tokens)
 * instead of 16-token ones, with each endpoint's KV capacity in blocks. Our `batch` class maps to
 * sheddable (priority -1); interactive and standard to priority 0. Its flow control (a queue with
 * fairness, another opt-in) is not modelled.
 */
import { seededRandom } from "../../src/core/random.ts";
import { DEFAULT_PREFIX_SETTINGS } from "../../src/core/prefix.ts";
import type { Dispatcher, Fleet, Live, Placement, SimNode } from "../fleet.ts";

export interface LlmdAdmitterConfig {
  queueDepthThreshold: number;
  kvCacheUtilThreshold: number;
  power: number;
  k: number;
  /** Which requests are sheddable (priority < 0). */
  sheddable: "batch" | "all";
}

/** The probabilistic admitter's defaults (plugin.go), with batch as the sheddable class. */
export const LLMD_ADMITTER_DEFAULTS: LlmdAdmitterConfig = {
  queueDepthThreshold: 5,
  kvCacheUtilThreshold: 0.8,
  power: 5,
  k: 300,
  sheddable: "batch",
};

const WEIGHTS = { queue: 2, kv: 2, prefix: 3 };
/** 256 blocks of 16 tokens. */
const MAX_PREFIX_TOKENS = 4096;
const BLOCK_TOKENS = DEFAULT_PREFIX_SETTINGS.blockChars / DEFAULT_PREFIX_SETTINGS.charsPerToken;

export class LlmdDispatcher implements Dispatcher {
  readonly name: string;
  private readonly admitter: LlmdAdmitterConfig | undefined;
  private fleet: Fleet | undefined;
  /** Per endpoint: the approximate prefix index, an LRU of block hashes (Map insertion order). */
  private lrus: Array<Map<string, true>> = [];
  private capacityBlocks = 0;
  private readonly random = seededRandom(7);
  readonly refusalReasons = new Map<string, number>();

  constructor(name: string, admitter?: LlmdAdmitterConfig) {
    this.name = name;
    this.admitter = admitter;
  }

  init(fleet: Fleet): void {
    this.fleet = fleet;
    this.lrus = fleet.nodes.map(() => new Map());
    this.capacityBlocks = Math.max(1, Math.floor(fleet.cfg.capacityTokens / BLOCK_TOKENS));
  }

  private kvUsage(node: SimNode): number {
    return Math.min(1, node.activeKvTokens / this.fleet!.cfg.capacityTokens);
  }

  /** The admitter's saturation: the endpoints' mean of max(waiting / q threshold, KV usage / KV threshold). */
  saturation(): number {
    const a = this.admitter!;
    let total = 0;
    for (const n of this.fleet!.nodes) total += Math.max(n.waiting / a.queueDepthThreshold, this.kvUsage(n) / a.kvCacheUtilThreshold);
    return total / this.fleet!.nodes.length;
  }

  route(r: Live, now: number): Placement {
    void now;
    const a = this.admitter;
    if (a !== undefined && (a.sheddable === "all" || r.req.priority === "batch")) {
      const p = Math.min(Math.pow(this.saturation(), a.power) * a.k, 1);
      if (this.random() < p) {
        this.refusalReasons.set("llmd-shed", (this.refusalReasons.get("llmd-shed") ?? 0) + 1);
        return { refused: "llmd-shed" };
      }
    }
    const nodes = this.fleet!.nodes;
    let minQ = Infinity;
    let maxQ = -Infinity;
    for (const n of nodes) {
      minQ = Math.min(minQ, n.waiting);
      maxQ = Math.max(maxQ, n.waiting);
    }
    const blocks = Math.min(r.req.hashes.length, Math.ceil(MAX_PREFIX_TOKENS / BLOCK_TOKENS));
    let best = -Infinity;
    let tied: number[] = [];
    for (const n of nodes) {
      const queue = maxQ === minQ ? 1 : (maxQ - n.waiting) / (maxQ - minQ);
      const kv = 1 - this.kvUsage(n);
      const lru = this.lrus[n.index]!;
      let match = 0;
      while (match < blocks && lru.has(r.req.hashes[match]!)) match++;
      const prefix = blocks > 0 ? match / blocks : 0;
      const score = WEIGHTS.queue * queue + WEIGHTS.kv * kv + WEIGHTS.prefix * prefix;
      if (score > best + 1e-12) {
        best = score;
        tied = [n.index];
      } else if (Math.abs(score - best) <= 1e-12) tied.push(n.index);
    }
    const chosen = tied.length === 1 ? tied[0]! : tied[Math.floor(this.random() * tied.length)]!;
    // The scheduler records the prompt's blocks as held by the chosen endpoint (PreRequest).
    const lru = this.lrus[chosen]!;
    for (let i = 0; i < blocks; i++) {
      const h = r.req.hashes[i]!;
      lru.delete(h);
      lru.set(h, true);
    }
    let excess = lru.size - this.capacityBlocks;
    if (excess > 0) {
      for (const k of lru.keys()) {
        lru.delete(k);
        if (--excess <= 0) break;
      }
    }
    return chosen;
  }

  firstToken(): void {}
  complete(): void {}
  report(): void {}
}
