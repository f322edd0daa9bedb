import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_FLEET, simulate } from "../fleet.ts";
import { RouterDispatcher } from "../router-driver.ts";
import { ShardedDispatcher } from "../shard-driver.ts";
import { summarise } from "../metrics.ts";
import { generate, CHAT_HEAVY } from "../workloads/generator.ts";
import { shardOf } from "../../src/core/shard.ts";

const workload = generate(CHAT_HEAVY, { durationSeconds: 60 });

describe("ShardedDispatcher", () => {
  test("one shard is the single object: the same decisions, the same figures", () => {
    const one = simulate(
      workload.requests,
      2,
      DEFAULT_FLEET,
      workload.trueBlockTokens,
      new ShardedDispatcher("w", { name: "warmpath" }, DEFAULT_FLEET.prefillRate, 1, 20),
    );
    const plain = simulate(
      workload.requests,
      2,
      DEFAULT_FLEET,
      workload.trueBlockTokens,
      new RouterDispatcher("w", { name: "warmpath" }, DEFAULT_FLEET.prefillRate),
    );
    assert.deepEqual(
      one.lives.map((l) => l.node),
      plain.lives.map((l) => l.node),
    );
  });

  test("each request is decided by the shard owning its first block, and the shards share the work", () => {
    const d = new ShardedDispatcher("w", { name: "warmpath" }, DEFAULT_FLEET.prefillRate, 4, 20);
    const { lives, fleet } = simulate(workload.requests, 2, DEFAULT_FLEET, workload.trueBlockTokens, d);
    const expected = new Array<number>(4).fill(0);
    for (const l of lives) expected[shardOf(l.req.hashes[0], 4)]!++;
    assert.deepEqual(d.decided, expected);
    assert.ok(d.maxShare() < 0.6, `busiest shard ${d.maxShare()}`);
    assert.equal(summarise("w", 2, "warmpath", 0, lives, fleet).requests, workload.requests.length);
  });

  test("sharing load between shards keeps the split close to the single object; reports alone do not", () => {
    const ttft = (shards: number, syncMs: number) => {
      const d = new ShardedDispatcher("w", { name: "warmpath" }, DEFAULT_FLEET.prefillRate, shards, syncMs);
      const { lives, fleet } = simulate(workload.requests, 2, DEFAULT_FLEET, workload.trueBlockTokens, d);
      return summarise("w", 2, "warmpath", 0, lives, fleet).ttftMean;
    };
    const single = ttft(1, 20);
    const shared = ttft(4, 20);
    const reportsOnly = ttft(4, 0);
    assert.ok(shared < reportsOnly, `shared ${shared} vs reports only ${reportsOnly}`);
    assert.ok(shared / single < 1.15, `shared ${shared} vs single ${single}`);
  });
});
