import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { Fleet, type Live } from "../fleet.ts";
import { summarise } from "../metrics.ts";
import { req, smallFleet } from "./helpers.ts";

function life(id: number, arrival: number, ttft: number, promptTokens: number, cachedTokens: number, e2e = ttft): Live {
  return {
    req: req(id, arrival, promptTokens, []),
    arrival,
    node: 0,
    ticket: "",
    estimateMs: 0,
    predictedCachedTokens: NaN,
    noise: 1,
    cachedTokens,
    uncachedTokens: promptTokens - cachedTokens,
    prefillStart: arrival,
    firstToken: arrival + ttft,
    end: arrival + e2e,
    slotWait: false,
  };
}

function fleetWith(nodes: Array<{ prefillTokens: number; requests: number; busy: number }>): Fleet {
  const f = new Fleet(smallFleet({ nodes: nodes.length }), 100);
  nodes.forEach((n, i) => {
    const node = f.nodes[i]!;
    node.prefillTokens = n.prefillTokens;
    node.requests = n.requests;
    node.prefillBusyMs = n.busy;
  });
  return f;
}

describe("summarise", () => {
  test("nearest-rank percentiles and mean of TTFT, sorted numerically", () => {
    // TTFTs 1..10 out of order; 9 vs 10 vs 100 would sort wrongly as strings.
    const ttfts = [10, 3, 7, 1, 9, 2, 8, 5, 4, 6];
    const lives = ttfts.map((t, i) => life(i, i * 10, t, 100, 0));
    const m = summarise("w", 1, "p", 0, lives, fleetWith([{ prefillTokens: 1, requests: 10, busy: 0 }]));
    assert.equal(m.ttftP50, 5);
    assert.equal(m.ttftP90, 9);
    assert.equal(m.ttftP99, 10);
    assert.equal(m.ttftMean, 5.5);
    assert.equal(m.requests, 10);
  });

  test("percentiles of 100 values and of values with different digit counts", () => {
    const lives = Array.from({ length: 100 }, (_, i) => life(i, i, 100 - i, 10, 0)); // TTFTs 1..100
    const m = summarise("w", 1, "p", 0, lives, fleetWith([{ prefillTokens: 1, requests: 1, busy: 0 }]));
    assert.deepEqual([m.ttftP50, m.ttftP90, m.ttftP99], [50, 90, 99]);
    const few = [1000, 20, 3].map((t, i) => life(i, 0, t, 10, 0));
    const m2 = summarise("w", 1, "p", 0, few, fleetWith([{ prefillTokens: 1, requests: 1, busy: 0 }]));
    assert.deepEqual([m2.ttftP50, m2.ttftP90, m2.ttftP99], [20, 1000, 1000]);
  });

  test("hit rate is token-weighted, not a mean of per-request rates", () => {
    const lives = [life(0, 0, 1, 100, 50), life(1, 1, 1, 300, 0)];
    const m = summarise("w", 1, "p", 0, lives, fleetWith([{ prefillTokens: 350, requests: 2, busy: 0 }]));
    assert.equal(m.hitRate, 50 / 400); // a per-request mean would be 0.25
    assert.equal(m.promptTokens, 400);
    assert.equal(m.prefillTokens, 350);
  });

  test("E2E mean, slot waits", () => {
    const lives = [life(0, 0, 10, 100, 0, 110), life(1, 5, 20, 100, 0, 205)];
    lives[1]!.slotWait = true;
    const m = summarise("w", 2, "p", 0.5, lives, fleetWith([{ prefillTokens: 1, requests: 2, busy: 0 }]));
    assert.equal(m.e2eMean, 157.5);
    assert.equal(m.slotWaits, 1);
    assert.deepEqual([m.workload, m.speed, m.policy, m.noiseSigma], ["w", 2, "p", 0.5]);
  });

  test("imbalance is max over mean across nodes; 1 when nothing was computed", () => {
    const lives = [life(0, 0, 1, 10, 0), life(1, 1000, 1, 10, 0)];
    const m = summarise(
      "w",
      1,
      "p",
      0,
      lives,
      fleetWith([
        { prefillTokens: 30, requests: 3, busy: 0 },
        { prefillTokens: 10, requests: 1, busy: 0 },
        { prefillTokens: 20, requests: 0, busy: 0 },
      ]),
    );
    assert.equal(m.prefillImbalance, 1.5); // 30 / 20
    assert.equal(m.requestImbalance, 2.25); // 3 / (4 / 3)
    const idle = summarise(
      "w",
      1,
      "p",
      0,
      lives,
      fleetWith([
        { prefillTokens: 0, requests: 0, busy: 0 },
        { prefillTokens: 0, requests: 0, busy: 0 },
      ]),
    );
    assert.equal(idle.prefillImbalance, 1);
    assert.equal(idle.requestImbalance, 1);
  });

  test("prefill load is busy time over nodes x arrival span", () => {
    const lives = [life(0, 1000, 1, 10, 0), life(1, 1500, 1, 10, 0), life(2, 3000, 1, 10, 0)]; // span 2000 ms
    const m = summarise(
      "w",
      1,
      "p",
      0,
      lives,
      fleetWith([
        { prefillTokens: 0, requests: 0, busy: 1500 },
        { prefillTokens: 0, requests: 0, busy: 500 },
      ]),
    );
    assert.equal(m.prefillLoad, 0.5);
  });
});
