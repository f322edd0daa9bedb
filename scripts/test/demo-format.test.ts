/**
 * scripts/demo/format.ts: a run whose timings hold prints the table with the harness's own check in
 * it; one whose do not prints no figure that could be read as a result, only why and what to do.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { formatRefusal, formatResult } from "../demo/format.ts";
import { harnessVerdict, type HarnessStretch } from "../demo/harness.ts";
import type { DemoResult } from "../demo/run.ts";
import type { PolicyResult } from "../demo/summarize.ts";
import { DEFAULT_WORKLOAD } from "../workload.ts";

function policy(name: string, ttftP50Ms: number, harness: HarnessStretch): PolicyResult {
  return {
    policy: name,
    requests: 400,
    ok: 400,
    errors: 0,
    retriedAfter429: 0,
    hitRate: 0.7,
    promptTokens: 1000,
    cachedTokens: 700,
    prefillTokens: 300,
    ttftP50Ms,
    ttftP99Ms: ttftP50Ms * 4,
    ttftMeanMs: ttftP50Ms * 1.2,
    wallSeconds: 20,
    decisions: { session: 400 },
    nodes: [
      {
        region: "us-east",
        node: "use1-a",
        routed: 400,
        measuredRequests: 400,
        promptTokens: 1000,
        cachedTokens: 700,
        prefillTokens: 300,
        hitRate: 0.7,
        decisions: { session: 400 },
        failures: name === "sticky" ? { connection: 2 } : {},
      },
    ],
    requestSpread: 1,
    prefillSpread: 1,
    adminHitRate: 0.7,
    indexAgreement: 1,
    indexCorrections: 0,
    silentRestarts: 0,
    eventLoopDelayP99Ms: 20,
    harness,
    errorSamples: [],
    results: [],
  };
}

function result(stretch: number): DemoResult {
  const harness = { samples: 400, medianStretch: stretch, p90Stretch: stretch * 1.5, medianExcessMs: (stretch - 1) * 200 };
  const policies = [policy("sticky", 1348, harness), policy("warmpath", 1401, harness)];
  return {
    timeFactor: 5,
    fleetFile: "fleet/fleet.8-nodes.json",
    concurrency: 64,
    workload: DEFAULT_WORKLOAD,
    conversations: 268,
    promptTokensOffered: 1000,
    policies,
    verdict: harnessVerdict(
      policies.map((p) => ({ policy: p.policy, stretch: p.harness })),
      5,
    ),
  };
}

test("a run whose timings hold prints the table, the harness's check in it, and the fleet file used", () => {
  const text = formatResult(result(1.04));
  assert.match(text, /TTFT p50 \(ms\)\s+1348\s+1401/);
  assert.match(text, /decode time \/ simulated \(median; <= 1\.25x\)\s+1\.04x \(\+8 ms\)\s+1\.04x \(\+8 ms\)/);
  assert.match(text, /^Fleet: fleet\/fleet\.8-nodes\.json at time factor 5/m);
  assert.match(text, /sticky: nodes that failed before the first byte \(the router tried another\): us-east\/use1-a connection 2/);
  assert.equal(formatRefusal(result(1.04)), "");
});

test("a starved run prints no TTFT, hit rate or table: why, each run's stretch, and the remedy", () => {
  const text = formatResult(result(17.3));
  assert.equal(text, formatRefusal(result(17.3)));
  assert.match(text, /^No comparison printed: this machine was too busy to measure at time factor 5/);
  assert.match(text, /17\.30x \(\+3260 ms\)/);
  assert.match(text, /--time-factor 2/);
  assert.doesNotMatch(text, /1348|1401|TTFT p50|cache hit rate/);
});
