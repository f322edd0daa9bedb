/** bench/e2e/report.ts: the targets' verdicts (npm start's added p50, own time against a plain proxy's) and the report built on them. */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  TARGET_PLAIN_PROXY_RATIO,
  TARGET_START_ADDED_P50_MS,
  added,
  loadVerdict,
  medianRound,
  plainProxyRatio,
  renderReport,
  saturated,
  type PathLatency,
  type Report,
  type StepRow,
} from "../e2e/report.ts";

const at = (end50: number, end99 = end50 * 2): PathLatency => ({ ttfb50: end50, ttfb99: end99, end50, end99 });

/** A step whose paths take these p50s (ms) to the end of the body; the router answers `achieved` of `offered`. */
function step(
  offered: number | undefined,
  ms: { router: number; plain: number; direct: number },
  achieved = offered ?? 100,
  shed = 0,
): StepRow {
  return {
    label: offered === undefined ? "one at a time" : `${offered} req/s`,
    offered,
    achieved: { router: achieved, plain: offered ?? 100, direct: offered ?? 100 },
    sent: { router: 1000, plain: 1000, direct: 1000 },
    errors: { router: shed ? { shed } : {}, plain: {}, direct: {} },
    latency: (["json", "stream"] as const).map((kind) => ({ kind, router: at(ms.router), plain: at(ms.plain), direct: at(ms.direct) })),
    cpuPerRouterRequest: { workerd: 2.5, host: 0.2 },
    cpuPerPlainRequest: 0.3,
    answered: { router: 1000, plain: 1000 },
    otherCores: 0.01,
    lagP99Ms: 1,
    worker: undefined,
  };
}

test("plainProxyRatio: the router's added time over the plain proxy's, none where the proxy added nothing", () => {
  assert.equal(plainProxyRatio(3, 1.5), 2);
  assert.equal(plainProxyRatio(0.3, 0.1).toFixed(6), "3.000000");
  // A router faster than the direct path (noise) counts as no added time, not a negative multiple.
  assert.equal(plainProxyRatio(-0.2, 0.5), 0);
  assert.ok(Number.isNaN(plainProxyRatio(2, 0)));
  assert.ok(Number.isNaN(plainProxyRatio(2, -0.1)));
  assert.ok(Number.isNaN(plainProxyRatio(Number.NaN, 1)));
});

test("added: a path's percentile minus the direct path's, the router's by default", () => {
  const row = step(50, { router: 4.5, plain: 1.5, direct: 1 });
  assert.equal(added(row, "json", "end50"), 3.5);
  assert.equal(added(row, "json", "end50", "plain"), 0.5);
  assert.equal(added(row, "stream", "end99"), 7);
});

test("medianRound takes the middle round by the router's added p50, whatever order they ran in", () => {
  const rounds = [
    step(undefined, { router: 9, plain: 2, direct: 1 }),
    step(undefined, { router: 3, plain: 2, direct: 1 }),
    step(undefined, { router: 5, plain: 2, direct: 1 }),
  ];
  assert.equal(added(medianRound(rounds), "json", "end50"), 4);
  // An even count: the lower middle, never a round that did not happen.
  assert.equal(added(medianRound(rounds.slice(0, 2)), "json", "end50"), 2);
  assert.throws(() => medianRound([]), /no one-at-a-time rounds/);
});

test("saturated: the router fell under 90% of the offered rate, or failed over 1% of its requests", () => {
  assert.equal(saturated(step(100, { router: 3, plain: 2, direct: 1 }, 95)), false);
  assert.equal(saturated(step(100, { router: 3, plain: 2, direct: 1 }, 85)), true);
  assert.equal(saturated(step(100, { router: 3, plain: 2, direct: 1 }, 100, 11)), true);
  assert.equal(saturated(step(100, { router: 3, plain: 2, direct: 1 }, 100, 10)), false);
});

test("loadVerdict holds the router to 3x the plain proxy at every rate it served, leaving the saturated step out", () => {
  assert.equal(TARGET_PLAIN_PROXY_RATIO, 3);
  const within = [step(25, { router: 2.5, plain: 1.5, direct: 1 }), step(50, { router: 2.5, plain: 1.5, direct: 1 })];
  const v = loadVerdict(within);
  assert.deepEqual(
    v.rows.map((r) => [r.offered, r.ratio50, r.pass]),
    [
      [25, 3, true],
      [50, 3, true],
    ],
  );
  assert.equal(v.pass, true);
  // A saturated step's queueing is the router's capacity, reported but not in the verdict.
  const withSaturated = loadVerdict([...within, step(400, { router: 900, plain: 1.5, direct: 1 }, 200, 500)]);
  assert.equal(withSaturated.rows[2]!.saturated, true);
  assert.equal(withSaturated.rows[2]!.pass, false);
  assert.equal(withSaturated.pass, true);
  // One served rate over 3x fails the target.
  assert.equal(loadVerdict([...within, step(100, { router: 3.1, plain: 1.5, direct: 1 })]).pass, false);
  // A plain proxy that added nothing gives no ratio, and no pass.
  assert.equal(loadVerdict([step(25, { router: 2, plain: 1, direct: 1 })]).pass, false);
  // Nothing served: no verdict to pass.
  assert.equal(loadVerdict([step(400, { router: 900, plain: 1.5, direct: 1 }, 10)]).pass, false);
  // One-at-a-time rows are not load.
  assert.equal(loadVerdict([step(undefined, { router: 2, plain: 1.5, direct: 1 })]).rows.length, 0);
});

/** A report whose one-at-a-time rounds add `seqAddedMs` +1, +0 and -1 ms (direct 1 ms). */
function report(seqAddedMs: number, steps: StepRow[]): Report {
  const rounds = [seqAddedMs + 1, seqAddedMs, seqAddedMs - 1].map((a) => step(undefined, { router: 1 + a, plain: 1.4, direct: 1 }));
  return {
    quick: false,
    command: "npm run bench:e2e",
    started: "2026-12-05T12:00:00.000Z",
    machine: {
      cpu: "test",
      cores: 2,
      memoryGiB: 8,
      kernel: "k",
      node: "v22",
      wrangler: "4",
      workerd: "1",
      commit: "abc1234",
      dirty: false,
    },
    loadAverageStart: [0, 0, 0],
    otherCoresAtStart: 0,
    loadAverageEnd: [0, 0, 0],
    durationS: 200,
    plan: {
      warmup: 150,
      sequential: 300,
      rounds: 3,
      rates: [25, 50],
      stepMs: 12_000,
      devRate: 50,
      tenants: 16,
      nodes: 4,
      maxInflight: 256,
    },
    start: { runtime: "workerd-single", idle: { workerd: 10 }, rounds, steps, events: {}, restarts: [] },
    dev: {
      runtime: "wrangler-dev",
      idle: {},
      rounds: [step(undefined, { router: 25, plain: 1.4, direct: 1 })],
      steps: [step(50, { router: 40, plain: 1.5, direct: 1 })],
      events: {},
      restarts: [],
    },
  };
}

test("renderReport headlines npm start's verdicts from the median round and the load steps, wrangler dev labelled as secondary", () => {
  const steps = [step(25, { router: 2.5, plain: 1.5, direct: 1 }), step(50, { router: 3, plain: 1.5, direct: 1 })];
  // The median round adds exactly the target: within it.
  const pass = renderReport(report(TARGET_START_ADDED_P50_MS, steps));
  assert.match(pass, /adds \*\*5\.00 ms p50/);
  assert.match(
    pass,
    /\| `npm start`'s topology adds <= 5 ms p50, one request at a time \| \+5\.00 ms p50 \(median of 3 rounds, 4\.00-6\.00\)[^|]*\| \*\*PASS\*\* \|/,
  );
  assert.match(pass, /25 req\/s: 3\.0x \(\+1\.50 \/ \+0\.50\); 50 req\/s: 4\.0x \(\+2\.00 \/ \+0\.50\) \| \*\*FAIL\*\* \|/);
  assert.match(pass, /## The same workers under wrangler dev \(secondary/);
  assert.match(pass, /\| wrangler dev \| 50 \| \+39\.00 /);

  const fail = renderReport(report(TARGET_START_ADDED_P50_MS + 0.5, [steps[0]!]));
  assert.match(fail, /\+5\.50 ms p50 \(median of 3 rounds[^|]*\| \*\*FAIL\*\* \|/);
  assert.match(fail, /25 req\/s: 3\.0x \(\+1\.50 \/ \+0\.50\) \| \*\*PASS\*\* \|/);
});
