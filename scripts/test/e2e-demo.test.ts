/**
 * End to end: the demo's workload through the whole system (wrangler dev + the simulated fleet),
 * once with sticky sessions and once with warmpath, the policy switched by configuration only.
 * warmpath must beat sticky sessions on the hit rate the nodes measured, and, when the harness
 * vouches for its timings (scripts/demo/harness.ts), on the median time to first token. ~55 s.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { QUICK_WORKLOAD } from "../demo/args.ts";
import { formatResult } from "../demo/format.ts";
import { runDemo } from "../demo/run.ts";

/**
 * Margin required, in hit-rate points. Observed on this workload: +8 to +10 points (sticky ~68%,
 * warmpath ~76-78%); an offline replay of the same requests against ideal cache-aware placement
 * gives +10.7, so the bound leaves room for timing noise without letting a regression through.
 */
const MIN_MARGIN = 0.05;
/**
 * Fleet seconds per wall second. The fleet and the 64 concurrent clients share this process: at
 * x5 an event-loop stall of 100 ms on a busy 2-core machine is half a second of fleet time, nodes
 * report queues that are the stall's, and the router spills away from warm nodes (measured: margin
 * +7.4 points in a run with a 109 ms p99 stall, +10.6 to +11.6 otherwise). x3 keeps a stall's weight
 * down for ~20 s more.
 */
const TIME_FACTOR = 3;

test("warmpath's measured cache hit rate beats sticky sessions on the demo workload", { timeout: 120_000 }, async () => {
  const result = await runDemo({ workload: QUICK_WORKLOAD, timeFactor: TIME_FACTOR });
  // The table, or why the timings do not hold on this machine now (scripts/demo/harness.ts).
  console.log(formatResult(result));
  const [sticky, warmpath] = result.policies;
  assert.ok(sticky && warmpath);
  assert.equal(sticky.policy, "sticky");
  assert.equal(warmpath.policy, "warmpath");
  for (const p of result.policies) {
    assert.equal(p.errors, 0, `${p.policy}: ${p.errorSamples.join("; ")}`);
    assert.equal(p.ok, QUICK_WORKLOAD.requests);
    // The client's usage and the router's record of it are the same measurement.
    assert.ok(Math.abs(p.hitRate - p.adminHitRate) < 0.005, `${p.policy}: client ${p.hitRate} vs /admin/state ${p.adminHitRate}`);
    assert.equal(
      p.nodes.reduce((n, x) => n + x.routed, 0),
      p.requests,
    );
  }
  // The configuration switched the policy: every answer says so, and decides accordingly.
  assert.deepEqual(Object.keys(sticky.decisions), ["session"]);
  assert.ok((warmpath.decisions["prefix-hit"] ?? 0) > warmpath.requests / 2, JSON.stringify(warmpath.decisions));

  assert.ok(
    warmpath.hitRate >= sticky.hitRate + MIN_MARGIN,
    `warmpath ${(warmpath.hitRate * 100).toFixed(1)}% vs sticky ${(sticky.hitRate * 100).toFixed(1)}% ` +
      `(event-loop delay p99: warmpath ${warmpath.eventLoopDelayP99Ms.toFixed(0)} ms, sticky ${sticky.eventLoopDelayP99Ms.toFixed(0)} ms)`,
  );
  assert.ok(warmpath.prefillTokens < sticky.prefillTokens);
  // The index against the nodes' real caches: the default fleet's caches hold this workload's hot
  // set, so the router's predictions must match what the nodes report (observed 99.8-100%).
  // The harness measured itself on every answer: the timings are vouched for, or refused, never
  // printed unchecked. Vouched for, they must show what docs/demo.md does: warmpath's median first
  // token sooner than sticky's (a quarter to a third of it on a quiet machine). On a starved machine
  // the hit rates above still hold; the TTFTs are the harness's and are not compared.
  for (const p of result.policies)
    assert.ok(p.harness.samples >= QUICK_WORKLOAD.requests! / 2, `${p.policy}: ${p.harness.samples} decodes measured`);
  if (result.verdict.trusted) {
    assert.ok(warmpath.ttftP50Ms < sticky.ttftP50Ms, `TTFT p50: warmpath ${warmpath.ttftP50Ms} ms vs sticky ${sticky.ttftP50Ms} ms`);
  } else {
    console.log(`TTFTs not compared: ${result.verdict.reason}`);
  }
  for (const p of result.policies) {
    assert.ok(p.indexAgreement >= 0.95, `${p.policy}: index agreed with the nodes on ${(p.indexAgreement * 100).toFixed(1)}%`);
  }
});
