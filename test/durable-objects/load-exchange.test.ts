/**
 * A sharded region's load exchange (durable-objects/load-exchange.ts): each shard is answered with
 * the sum of the other shards' loads, node by node, its own left out; a node whose id is also the
 * name of a property every plain object inherits (`constructor`) is summed from zero like any other.
 */
import { describe, expect, it } from "vitest";
import { LoadExchange } from "../../durable-objects/load-exchange.ts";

describe("the load exchange", () => {
  it("answers a shard with the other shards' loads summed node by node, its own left out", () => {
    const exchange = new LoadExchange();
    exchange.answer({ shard: 0, load: { a: { queued: 100, recent: 10, inflight: 2 } } });
    exchange.answer({ shard: 1, load: { a: { queued: 50, recent: 5 }, b: { queued: 7, recent: 1, inflight: 1 } } });
    const answer = exchange.answer({ shard: 2, load: { a: { queued: 1_000, recent: 1_000 } } });
    expect(answer.loads).toEqual({ a: { queued: 150, recent: 15, inflight: 2 }, b: { queued: 7, recent: 1, inflight: 1 } });
  });

  it("sums a node named `constructor` from zero, as any other (not the inherited Object function)", () => {
    const exchange = new LoadExchange();
    exchange.answer({ shard: 0, load: { constructor: { queued: 30, recent: 3, inflight: 1 } } });
    exchange.answer({ shard: 1, load: { constructor: { queued: 20, recent: 2 } } });
    const answer = exchange.answer({ shard: 2, load: {} });
    expect(Object.hasOwn(answer.loads, "constructor")).toBe(true);
    expect(answer.loads["constructor"]).toEqual({ queued: 50, recent: 5, inflight: 1 });
  });
});
