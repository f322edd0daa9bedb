/**
 * A region split over several objects (`shards`), as the worker drives it in production: each
 * request goes to the shard that owns its first block (src/core/shard.ts), that shard's
 * RegionRouter decides alone from its own index and the load it dispatched itself, its first byte
 * and completion go back to the same shard, every node report reaches every shard, and the shards
 * share their load per node every `syncMs` (the region's load exchange).
 */
import { shardKey, shardOf } from "../src/core/shard.ts";
import type { ShardLoad } from "../src/core/node-load.ts";
import type { PolicySpecInput } from "../src/core/policies/index.ts";
import type { Dispatcher, Fleet, Live, SimNode } from "./fleet.ts";
import { RouterDispatcher } from "./router-driver.ts";

export class ShardedDispatcher implements Dispatcher {
  readonly name: string;
  private readonly shards: RouterDispatcher[];
  private readonly shardOfLive = new WeakMap<Live, number>();
  /** Requests each shard decided: the largest share is what bounds the region's throughput. */
  readonly decided: number[];

  private readonly syncMs: number;
  private lastSync = -Infinity;

  private readonly keyBlocks: number;

  /**
   * @param syncMs how often the shards share their queued work per node (0: never; they then
   *   learn of each other's dispatches only from the nodes' reports)
   * @param keyBlocks the block a prompt's shard is chosen by (src/core/shard.ts `shardKey`). Default 1.
   * @param minCacheShare each shard's least believed part of a node's cache. Default: the router's.
   */
  constructor(
    label: string,
    policy: PolicySpecInput,
    prefillRate: number,
    shards: number,
    syncMs: number,
    keyBlocks = 1,
    minCacheShare?: number,
  ) {
    this.name = label;
    this.keyBlocks = keyBlocks;
    this.shards = Array.from({ length: shards }, () => new RouterDispatcher(label, policy, prefillRate, { minCacheShare }));
    this.decided = new Array<number>(shards).fill(0);
    this.syncMs = syncMs;
  }

  init(fleet: Fleet): void {
    for (const s of this.shards) s.init(fleet);
  }

  route(r: Live, now: number): number {
    if (this.shards.length > 1 && this.syncMs > 0 && now - this.lastSync >= this.syncMs) this.sync(now);
    const k = shardOf(shardKey(r.req.hashes, this.keyBlocks), this.shards.length);
    this.shardOfLive.set(r, k);
    this.decided[k]!++;
    return this.shards[k]!.route(r, now);
  }

  firstToken(r: Live, now: number): void {
    this.shards[this.shardOfLive.get(r)!]!.firstToken(r, now);
  }

  complete(r: Live, now: number): void {
    this.shards[this.shardOfLive.get(r)!]!.complete(r, now);
  }

  report(node: SimNode, now: number): void {
    for (const s of this.shards) s.report(node, now);
  }

  /** Every shard learns the others' queued work per node (what the region's load exchange carries). */
  private sync(now: number): void {
    this.lastSync = now;
    const own = this.shards.map((s) => s.regionRouter.ownLoad(now));
    for (const [k, shard] of this.shards.entries()) {
      const foreign: Record<string, ShardLoad> = {};
      for (const [j, load] of own.entries()) {
        if (j === k) continue;
        for (const [node, l] of Object.entries(load)) {
          const sum = (foreign[node] ??= { queued: 0, recent: 0 });
          sum.queued += l.queued;
          sum.recent += l.recent;
        }
      }
      shard.regionRouter.shareForeignLoad(foreign, now);
    }
  }

  /** The busiest shard's share of all decisions (1/shards when perfectly even). */
  maxShare(): number {
    const total = this.decided.reduce((a, b) => a + b, 0);
    return total === 0 ? 0 : Math.max(...this.decided) / total;
  }
}
