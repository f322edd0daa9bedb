import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { simulate, type FleetConfig } from "../fleet.ts";
import { RouterDispatcher, benchRegionSettings } from "../router-driver.ts";
import { OracleDispatcher } from "../oracle.ts";
import { indexAgreement, summarise, type RunMetrics } from "../metrics.ts";
import { engineBlocks, generate, CHAT_HEAVY } from "../workloads/generator.ts";
import { entityText, KIND } from "../text.ts";
import { prefixKey, DEFAULT_PREFIX_SETTINGS } from "../../src/core/prefix.ts";
import { canonicalText } from "../../src/core/canonical.ts";
import { parsePolicySpec, type PolicyName } from "../../src/core/policies/index.ts";
import type { BenchRequest, Workload } from "../workloads/types.ts";

const FLEET: FleetConfig = {
  nodes: 3,
  // Room for every document on every node: the hit rate measures placement, not eviction.
  capacityTokens: 100_000,
  prefillRate: 10_000,
  decodeRate: 40,
  slots: 16,
  reportIntervalMs: 1_000,
  noiseSigma: 0,
};

/**
 * 48 requests, each one of 8 documents (4,000 tokens) plus a unique 100-token question, 600 ms
 * apart (light load). Round-robin sends each document's 6 requests to all 3 nodes (3 misses each);
 * a cache-aware router can miss once per document.
 */
function repeatedPrefixWorkload(documents = 8, requestCount = 48): Workload {
  const requests: BenchRequest[] = [];
  for (let i = 0; i < requestCount; i++) {
    const doc = i % documents;
    const text = entityText(KIND.document, doc, 16_000) + entityText(KIND.userTurn, i, 400);
    const prompt = { kind: "chat" as const, messages: [{ role: "user", content: text }] };
    const key = prefixKey(prompt, { model: "bench-model", namespace: "t" }, DEFAULT_PREFIX_SETTINGS);
    requests.push({
      id: i,
      arrival: i * 600,
      sessionKey: `u${i}`,
      hashes: key.hashes,
      promptTokens: key.promptTokens,
      trueBlocks: engineBlocks(canonicalText(prompt)),
      outputTokens: 20,
    });
  }
  return { name: "docs", description: "", trueBlockTokens: 64, requests };
}

function run(w: Workload, policy: PolicyName | "oracle", cfg: FleetConfig = FLEET, speed = 1) {
  const d = policy === "oracle" ? new OracleDispatcher() : new RouterDispatcher(policy, { name: policy }, cfg.prefillRate);
  const { lives, fleet } = simulate(w.requests, speed, cfg, w.trueBlockTokens, d);
  return { lives, metrics: summarise(w.name, speed, policy, cfg.noiseSigma, lives, fleet) };
}

const placement = (lives: ReturnType<typeof run>["lives"]) => lives.map((l) => [l.node, l.cachedTokens, l.firstToken, l.end]);

describe("end to end through RegionRouter", () => {
  test("requests for the same document share engine blocks up to their own question", () => {
    const w = repeatedPrefixWorkload();
    // Same document: shared engine blocks; the request's own question is not shared.
    const a = w.requests[0]!;
    const b = w.requests.find((r) => r.id > 0 && r.hashes[0] === a.hashes[0] && r.hashes[5] === a.hashes[5])!;
    assert.ok(b);
    let shared = 0;
    while (a.trueBlocks[shared] === b.trueBlocks[shared]) shared++;
    assert.ok(shared >= 60 && shared < a.trueBlocks.length, `shared ${shared}`);
  });

  test("warmpath beats round-robin's hit rate on a repeated-prefix workload", () => {
    const w = repeatedPrefixWorkload();
    const rr = run(w, "round-robin").metrics;
    const wp = run(w, "warmpath").metrics;
    const oracle = run(w, "oracle").metrics;
    // Hand-computed: round-robin hits 3 of 6 per document, so 0.5 x (4,000 / 4,100) ~ 0.49;
    // one miss per document gives 5/6 x (4,000 / 4,100) ~ 0.81.
    assert.ok(rr.hitRate > 0.4 && rr.hitRate < 0.55, `round-robin hit rate ${rr.hitRate}`);
    assert.ok(wp.hitRate > 0.75, `warmpath hit rate ${wp.hitRate}`);
    assert.ok(wp.hitRate > rr.hitRate + 0.2);
    assert.ok(wp.ttftMean < rr.ttftMean, `ttft warmpath ${wp.ttftMean} round-robin ${rr.ttftMean}`);
    assert.ok(oracle.hitRate > 0.75, `oracle hit rate ${oracle.hitRate}`);
    // Round-robin really rotates.
    assert.equal(rr.requestImbalance, 1);
  });

  test("runs are deterministic: same inputs, identical lives and metrics", () => {
    const w = repeatedPrefixWorkload();
    for (const policy of ["warmpath", "random", "least-loaded"] as const) {
      const a = run(w, policy, FLEET, 3);
      const b = run(w, policy, FLEET, 3);
      assert.deepEqual(placement(a.lives), placement(b.lives), policy);
      assert.deepEqual(a.metrics, b.metrics, policy);
    }
  });

  test("a generated workload replays identically for the same seed", () => {
    const cfg = { ...FLEET, capacityTokens: 50_000 };
    const results: RunMetrics[] = [];
    const placements: unknown[] = [];
    for (let k = 0; k < 2; k++) {
      const w = generate(CHAT_HEAVY, { durationSeconds: 15 });
      const { lives, metrics } = run(w, "warmpath", cfg, 2);
      results.push(metrics);
      placements.push(placement(lives));
    }
    assert.deepEqual(results[0], results[1]);
    assert.deepEqual(placements[0], placements[1]);
    assert.ok(results[0]!.requests > 10);
    // Every request finished with a first token after its arrival and an end after that.
    assert.ok((placements[0] as number[][]).every(([, , ft, end]) => Number.isFinite(ft) && end! > ft!));
  });

  test("index agreement: measured against the nodes' real caches, and raised by learning from usage after a silent restart", () => {
    // 24 documents, each asked for twice: the first pass spreads them over the nodes, then node 0
    // silently loses its cache, then the second pass asks for each again.
    const w = repeatedPrefixWorkload(24, 48);
    const agreement = (learnFromUsage: boolean) => {
      const d = new RouterDispatcher("warmpath", { name: "warmpath" }, FLEET.prefillRate, { learnFromUsage });
      const { lives } = simulate(w.requests, 1, FLEET, w.trueBlockTokens, d, { silentRestart: { node: 0, atFraction: 0.5 } });
      const after = lives.filter((l) => l.node === 0 && l.arrival >= lives[24]!.arrival);
      assert.ok(after.length >= 5);
      assert.ok(lives.every((l) => !Number.isNaN(l.predictedCachedTokens)));
      return { after: indexAgreement(after), all: indexAgreement(lives) };
    };
    const on = agreement(true);
    const off = agreement(false);
    assert.ok(on.after > off.after, `after the restart: ${on.after} with learning, ${off.after} without`);
    assert.ok(on.all >= off.all);
    // The references make no prediction to agree with.
    const oracle = simulate(w.requests, 1, FLEET, w.trueBlockTokens, new OracleDispatcher());
    assert.ok(Number.isNaN(indexAgreement(oracle.lives)));
  });

  test("only warmpath corrects its index from usage by default: the baselines' anchors do not", () => {
    assert.equal(benchRegionSettings(parsePolicySpec({ name: "warmpath" }), 10_000).learnFromUsage, true);
    for (const name of ["sglang-cache-aware", "dynamo-kv", "sticky"] as const) {
      assert.equal(benchRegionSettings(parsePolicySpec({ name }), 10_000).learnFromUsage, false);
    }
  });
});
