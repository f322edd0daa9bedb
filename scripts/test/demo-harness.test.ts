/**
 * scripts/demo/harness.ts: the demo refuses to compare policies when its own harness stretched the
 * simulated time (the median decode beyond MAX_DECODE_STRETCH of its model), and says why.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MAX_DECODE_STRETCH, MIN_DECODE_TOKENS, MIN_SAMPLES, decodeStretch, harnessVerdict } from "../demo/harness.ts";
import type { RequestResult } from "../demo/send-request.ts";

/** At time factor 5 and 30 tokens/s, 1000 / 30 / 5 = 6.67 wall ms between two tokens. */
const INTERVAL_MS = 1000 / 30 / 5;
const interval = (node: string) => (node.startsWith("us-east/") ? INTERVAL_MS : undefined);

/** An answer of `tokens` tokens whose decode took `stretch` times its model. */
function answer(id: number, stretch: number, tokens = 32, node = "use1-a"): RequestResult {
  const ttftMs = 100;
  return {
    id,
    tenant: 0,
    user: "u",
    turn: 0,
    ok: true,
    region: "us-east",
    node,
    ttftMs,
    lastTokenMs: ttftMs + (tokens - 1) * INTERVAL_MS * stretch,
    completionTokens: tokens,
  };
}

const many = (n: number, stretch: (i: number) => number) => Array.from({ length: n }, (_, i) => answer(i, stretch(i)));

test("decodeStretch measures the decode against the node's modelled pace", () => {
  const s = decodeStretch(
    many(100, () => 1.02),
    interval,
  );
  assert.equal(s.samples, 100);
  assert.ok(Math.abs(s.medianStretch - 1.02) < 1e-9);
  // 31 intervals of 6.67 ms, 2% over: +4.1 ms.
  assert.ok(Math.abs(s.medianExcessMs - 31 * INTERVAL_MS * 0.02) < 1e-9);
  // The median and the 90th percentile are of the distribution, not of the order the answers came in.
  const mixed = decodeStretch(
    many(100, (i) => (i % 10 === 0 ? 8 : 1)),
    interval,
  );
  assert.equal(mixed.medianStretch, 1);
  assert.ok(mixed.p90Stretch <= 8 && mixed.p90Stretch >= 1);
});

test("decodeStretch leaves out failed answers, short decodes and nodes it does not simulate", () => {
  const results: RequestResult[] = [
    answer(0, 1),
    { ...answer(1, 50), ok: false },
    answer(2, 50, MIN_DECODE_TOKENS - 1),
    answer(3, 50, 32, "use1-b"),
    { ...answer(4, 50), region: "eu-west" },
    { ...answer(5, 50), completionTokens: undefined },
  ];
  const s = decodeStretch(results, interval);
  assert.equal(s.samples, 2); // answers 0 and 3 (use1-b is in us-east, which the interval map knows)
  assert.equal(decodeStretch([], interval).samples, 0);
  assert.ok(Number.isNaN(decodeStretch([], interval).medianStretch));
});

test("harnessVerdict trusts runs whose median decode kept to the model", () => {
  const quiet = decodeStretch(
    many(400, () => 1.05),
    interval,
  );
  assert.deepEqual(
    harnessVerdict(
      [
        { policy: "sticky", stretch: quiet },
        { policy: "warmpath", stretch: quiet },
      ],
      5,
    ),
    { trusted: true },
  );
});

test("harnessVerdict refuses when one run was starved, naming it, the figure and the remedy", () => {
  const quiet = decodeStretch(
    many(400, () => 1.05),
    interval,
  );
  // Issue 32's busy machine: the router relayed seconds late; measured 17x-22x here under load.
  const starved = decodeStretch(
    many(400, () => 17.3),
    interval,
  );
  const v = harnessVerdict(
    [
      { policy: "sticky", stretch: starved },
      { policy: "warmpath", stretch: quiet },
    ],
    5,
  );
  assert.equal(v.trusted, false);
  if (v.trusted) return;
  assert.match(v.reason, /too busy to measure at time factor 5/);
  assert.match(v.reason, /sticky: the median answer's decode took 17\.30x/);
  assert.doesNotMatch(v.reason, /warmpath/);
  assert.match(v.remedy, /--time-factor 2/);
  // Just over the bound is refused; at it, trusted.
  const edge = (x: number) =>
    harnessVerdict(
      [
        {
          policy: "p",
          stretch: decodeStretch(
            many(100, () => x),
            interval,
          ),
        },
      ],
      5,
    ).trusted;
  assert.equal(edge(MAX_DECODE_STRETCH + 0.01), false);
  assert.equal(edge(MAX_DECODE_STRETCH), true);
  // At time factor 1 there is no slower setting to suggest.
  const slow = harnessVerdict([{ policy: "p", stretch: starved }], 1);
  assert.ok(!slow.trusted && !slow.remedy.includes("--time-factor"));
});

test("harnessVerdict refuses to vouch for a run with too few answers to measure", () => {
  const few = decodeStretch(
    many(MIN_SAMPLES - 1, () => 1),
    interval,
  );
  const v = harnessVerdict([{ policy: "warmpath", stretch: few }], 5);
  assert.equal(v.trusted, false);
  if (!v.trusted) assert.match(v.reason, /too few answers/);
});
