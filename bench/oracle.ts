/**
 * References that are not routers; both bypass RegionRouter.
 *
 * OracleDispatcher: sees every node's true cache, its queue, and every request's true prefill
 * time (noise included), and sends each request to the node where its first token comes
 * earliest: the prefill still running, plus the queued prefills as it predicted them, plus this
 * request's own uncached prefill, counting as cached both the blocks the node holds now and
 * those the prompts queued ahead of it will bring. It is greedy (it does not plan for requests
 * still to come, nor model evictions by the queue ahead or slot waits), so it is a strong
 * reference rather than a strict lower bound; a router can in principle beat it.
 *
 * PooledDispatcher: the whole fleet as one node, with one cache of nodes x capacity (so its hit
 * rate bounds what any placement can reach with the same total cache and LRU), nodes x the
 * prefill rate and nodes x the slots. Its timing is that of one FCFS prefill server 8 times as
 * fast, which no fleet of separate nodes can match on queueing; read its TTFT as context only.
 */
import { mix32 } from "./text.ts";
import type { Dispatcher, Fleet, FleetConfig, Live, Placement, SimNode } from "./fleet.ts";

export class OracleDispatcher implements Dispatcher {
  readonly name = "oracle";
  private fleet: Fleet | undefined;

  init(fleet: Fleet): void {
    this.fleet = fleet;
  }

  route(r: Live, now: number): number {
    const { node, estMs } = this.earliest(r, now);
    r.estimateMs = estMs;
    return node;
  }

  /** The node where `r`'s first token would come earliest, that time from now (ms), and `r`'s own prefill there (ms). */
  earliest(r: Live, now: number): { node: number; ttftMs: number; estMs: number } {
    const fleet = this.fleet!;
    const { prefillRate } = fleet.cfg;
    const n = fleet.nodes.length;
    let best = -1;
    let bestTtft = Infinity;
    let bestCached = -1;
    let bestEst = 0;
    const rotate = mix32(r.req.id) % n;
    for (let k = 0; k < n; k++) {
      // Rotating the scan start per request spreads exact ties (e.g. idle, cold nodes).
      const node = fleet.nodes[(k + rotate) % n]!;
      const cached = this.cachedWithQueue(node, r, fleet.blockTokens);
      const est = (((r.req.promptTokens - cached) * 1000) / prefillRate) * r.noise;
      const running = node.prefilling;
      const runningLeft = running
        ? Math.max(0, running.prefillStart + ((running.uncachedTokens * 1000) / prefillRate) * running.noise - now)
        : 0;
      const ttft = runningLeft + node.queuedEstimateMs + est;
      if (ttft < bestTtft - 1e-9 || (Math.abs(ttft - bestTtft) <= 1e-9 && cached > bestCached)) {
        best = node.index;
        bestTtft = ttft;
        bestCached = cached;
        bestEst = est;
      }
    }
    return { node: best, ttftMs: bestTtft, estMs: bestEst };
  }

  private cachedWithQueue(node: SimNode, r: Live, blockTokens: number): number {
    const blocks = r.req.trueBlocks;
    let i = 0;
    while (i < blocks.length && (node.cache.map.has(blocks[i]!) || node.pendingBlocks.has(blocks[i]!))) i++;
    return Math.min(i * blockTokens, r.req.promptTokens - 1);
  }

  firstToken(): void {}
  complete(): void {}
  report(): void {}
}

/**
 * The SLO-aware greedy oracle (bench/goodput.ts): the oracle's placement (the node with the
 * earliest true first token, knowing every cache, queue and true prefill time), and at arrival it
 * REFUSES a request whose earliest first token is later than its objective, so it never spends a
 * GPU on an answer it knows will be late. Greedy: it neither holds requests nor plans for those
 * still to come, and its prediction is exact except for slot waits and evictions by the prompts
 * queued ahead; `predictedTtftMs` keeps each prediction for the tests.
 */
export class SloOracleDispatcher implements Dispatcher {
  readonly name = "slo-oracle";
  readonly trackPending = true;
  private readonly oracle = new OracleDispatcher();
  /** The predicted time to first token of every request it saw (ms from arrival), by request id. */
  readonly predictedTtftMs = new Map<number, number>();

  init(fleet: Fleet): void {
    this.oracle.init(fleet);
  }

  route(r: Live, now: number): Placement {
    const { node, ttftMs, estMs } = this.oracle.earliest(r, now);
    this.predictedTtftMs.set(r.req.id, ttftMs);
    if (ttftMs > r.objectiveMs!) return { refused: "predicted-late" };
    r.estimateMs = estMs;
    return node;
  }

  firstToken(): void {}
  complete(): void {}
  report(): void {}
}

export class PooledDispatcher implements Dispatcher {
  readonly name = "pooled";
  init(): void {}
  route(): number {
    return 0;
  }
  firstToken(): void {}
  complete(): void {}
  report(): void {}
}

/** The fleet configuration of the pooled reference: one node with the whole fleet's resources. */
export function pooledFleet(cfg: FleetConfig): FleetConfig {
  return {
    ...cfg,
    nodes: 1,
    capacityTokens: cfg.capacityTokens * cfg.nodes,
    prefillRate: cfg.prefillRate * cfg.nodes,
    slots: cfg.slots * cfg.nodes,
  };
}
