import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { Fleet, simulate, type Live } from "../fleet.ts";
import { OracleDispatcher, PooledDispatcher, pooledFleet } from "../oracle.ts";
import { DEFAULT_FLEET } from "../fleet.ts";
import { range, req, smallFleet } from "./helpers.ts";
import type { BenchRequest } from "../workloads/types.ts";

const BLOCK = 100;

function live(r: BenchRequest, over: Partial<Live> = {}): Live {
  return {
    req: r,
    arrival: r.arrival,
    node: -1,
    ticket: "",
    estimateMs: 0,
    predictedCachedTokens: NaN,
    noise: 1,
    cachedTokens: 0,
    uncachedTokens: 0,
    prefillStart: NaN,
    firstToken: NaN,
    end: NaN,
    slotWait: false,
    ...over,
  };
}

/** Two nodes; node 0 holds blocks 1..10 and is prefilling a request with `leftMs` to go at t=0. */
function setup(leftMs: number): { fleet: Fleet; oracle: OracleDispatcher } {
  const fleet = new Fleet(smallFleet({ nodes: 2 }), BLOCK);
  const holder = fleet.nodes[0]!;
  holder.cache.touch(range(1, 10));
  // A running prefill of `leftMs` uncached tokens (1 token per ms) that started at t=0.
  holder.prefilling = live(req(99, 0, leftMs, range(500, 100)), { prefillStart: 0, uncachedTokens: leftMs });
  const oracle = new OracleDispatcher();
  oracle.init(fleet);
  return { fleet, oracle };
}

describe("OracleDispatcher", () => {
  // The new request: 1,100 tokens, 1,000 of them cached on node 0 (100 ms there, 1,100 ms cold).
  const newReq = () => live(req(1, 0, 1100, range(1, 11)));

  test("the busy cache holder loses to an idle cold node when its queue is long", () => {
    const { oracle } = setup(5000); // node 0: 5000 + 100 ms; node 1: 1100 ms
    const r = newReq();
    assert.equal(oracle.route(r, 0), 1);
    assert.equal(r.estimateMs, 1100);
  });

  test("the cache holder wins when its wait is short", () => {
    const { oracle } = setup(200); // node 0: 200 + 100 ms; node 1: 1100 ms
    const r = newReq();
    assert.equal(oracle.route(r, 0), 0);
    assert.equal(r.estimateMs, 100);
  });

  test("the running prefill's remaining time is measured from now", () => {
    const { oracle } = setup(5000);
    // At t=4500 node 0 has 500 ms left: 600 ms < 1100 ms.
    assert.equal(oracle.route(newReq(), 4500), 0);
  });

  test("queued predicted prefill counts against a node", () => {
    const { fleet, oracle } = setup(0);
    fleet.nodes[0]!.prefilling = undefined;
    fleet.nodes[0]!.queuedEstimateMs = 2000; // 2000 + 100 ms > 1100 ms
    assert.equal(oracle.route(newReq(), 0), 1);
    fleet.nodes[0]!.queuedEstimateMs = 900; // 900 + 100 ms < 1100 ms
    assert.equal(oracle.route(newReq(), 0), 0);
  });

  test("blocks that prompts queued ahead will bring count as cached", () => {
    const fleet = new Fleet(smallFleet({ nodes: 2 }), BLOCK);
    const oracle = new OracleDispatcher();
    oracle.init(fleet);
    const n1 = fleet.nodes[1]!;
    n1.queuedEstimateMs = 300;
    for (const b of range(1, 10)) n1.pendingBlocks.set(b, 1);
    const r = newReq();
    assert.equal(oracle.route(r, 0), 1); // 300 + 100 ms < 1100 ms on cold node 0
    assert.equal(r.estimateMs, 100);
  });

  test("exact ties go to the node with more cached tokens", () => {
    // node 0: 1000 ms left + 100 ms = 1100 ms; node 1: 1100 ms cold. Whatever the scan rotation.
    for (let id = 0; id < 8; id++) {
      const { oracle } = setup(1000);
      assert.equal(oracle.route(live(req(id, 0, 1100, range(1, 11))), 0), 0, `request id ${id}`);
    }
  });

  test("cold ties between idle nodes spread across nodes", () => {
    const fleet = new Fleet(smallFleet({ nodes: 4 }), BLOCK);
    const oracle = new OracleDispatcher();
    oracle.init(fleet);
    const used = new Set<number>();
    for (let id = 0; id < 40; id++) used.add(oracle.route(live(req(id, 0, 100, [1000 + id])), 0));
    assert.ok(used.size >= 3, `only nodes ${[...used]}`);
  });

  test("in simulation its prefill estimates are exact without noise, and its bookkeeping drains", () => {
    // Two prefixes; bursts so that requests queue behind others with the same prefix.
    const requests: BenchRequest[] = [];
    for (let i = 0; i < 24; i++) {
      const p = i % 2 === 0 ? range(1, 8) : range(101, 8);
      requests.push(req(i, Math.floor(i / 6) * 400, 1000, [...p, 10_000 + i, 20_000 + i], 5));
    }
    const { lives, fleet } = simulate(requests, 1, smallFleet({ nodes: 3 }), BLOCK, new OracleDispatcher());
    for (const l of lives) assert.equal(l.estimateMs, l.firstToken - l.prefillStart, `request ${l.req.id}`);
    // Some requests did queue behind a prompt with the same prefix, counted as cached in advance.
    assert.ok(lives.some((l) => l.prefillStart > l.arrival && l.cachedTokens >= 800));
    for (const n of fleet.nodes) {
      assert.equal(n.pendingBlocks.size, 0);
      assert.ok(Math.abs(n.queuedEstimateMs) < 1e-6);
    }
    // It reuses the prefixes: everything after the first request of each prefix on a node hits.
    const hits = lives.filter((l) => l.cachedTokens >= 800).length;
    assert.ok(hits >= 24 - 2 * 3, `hits ${hits}`);
  });
});

describe("pooled reference", () => {
  test("one node with the whole fleet's cache, prefill rate and slots", () => {
    const p = pooledFleet(DEFAULT_FLEET);
    assert.deepEqual(p, {
      ...DEFAULT_FLEET,
      nodes: 1,
      capacityTokens: DEFAULT_FLEET.capacityTokens * DEFAULT_FLEET.nodes,
      prefillRate: DEFAULT_FLEET.prefillRate * DEFAULT_FLEET.nodes,
      slots: DEFAULT_FLEET.slots * DEFAULT_FLEET.nodes,
    });
    assert.equal(p.decodeRate, DEFAULT_FLEET.decodeRate);
    assert.equal(new PooledDispatcher().route(), 0);
  });
});
