import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_FLEET, simulate, type Decided, type Dispatcher, type Fleet, type Live, type Placement } from "../fleet.ts";
import { generateMix, MIX } from "../workloads/generator.ts";
import type { Workload } from "../workloads/types.ts";
import { capacitySpeed, commitmentsAt, routerEntries, SMG_GRID, DYNAMO_GRID, runOne } from "../goodput/harness.ts";
import { buildRouter, type PlacingDispatcher } from "../goodput/routers.ts";
import { SmgLimiter, smgDefaults } from "../goodput/smg-limiter.ts";
import { DynamoBusy } from "../goodput/dynamo-busy.ts";
import { LlmdDispatcher, LLMD_ADMITTER_DEFAULTS } from "../goodput/llmd.ts";
import { SloOracleDispatcher } from "../oracle.ts";
import { inTime, type GoodputRun } from "../goodput/metrics.ts";
import { verdicts } from "../goodput/report.ts";
import { range, req, smallFleet } from "./helpers.ts";

/** A minute of the multi-tenant mix: every class and tenant, a few hundred requests. */
let mix: Workload;
let capacity: number;

before(() => {
  mix = generateMix(MIX, { durationSeconds: 60 });
  capacity = capacitySpeed(mix, DEFAULT_FLEET).speed;
});

describe("goodput benchmark", () => {
  test("every router decides every request: placed + refused = offered, and nothing is both", () => {
    const entries = routerEntries(DEFAULT_FLEET, true, { smg: { ...SMG_GRID[0]!, refillPerSecond: 0 }, dynamo: DYNAMO_GRID[0]! });
    for (const e of entries) {
      const d = buildRouter(e.name, e.spec, DEFAULT_FLEET.prefillRate);
      const { lives } = simulate(mix.requests, 3 * capacity, DEFAULT_FLEET, mix.trueBlockTokens, d);
      let placed = 0;
      let refused = 0;
      for (const l of lives) {
        if (l.refused !== undefined) {
          refused++;
          assert.equal(l.node, -1, `${e.name}: a refused request reached a node`);
          assert.ok(Number.isNaN(l.firstToken), `${e.name}: a refused request has a first token`);
        } else {
          placed++;
          assert.ok(
            l.node >= 0 && Number.isFinite(l.firstToken) && Number.isFinite(l.end),
            `${e.name}: request ${l.req.id} never answered`,
          );
          assert.ok(l.placedAt! >= l.arrival, `${e.name}: placed before it arrived`);
        }
      }
      assert.equal(placed + refused, mix.requests.length, e.name);
    }
  });

  test("the SLO-aware oracle never places a request it predicted late, and refuses only those", () => {
    const d = new SloOracleDispatcher();
    const { lives } = simulate(mix.requests, 2 * capacity, DEFAULT_FLEET, mix.trueBlockTokens, d);
    let refusals = 0;
    for (const l of lives) {
      const predicted = d.predictedTtftMs.get(l.req.id)!;
      if (l.refused !== undefined) {
        refusals++;
        assert.ok(predicted > l.objectiveMs!);
      } else assert.ok(predicted <= l.objectiveMs!, `placed request ${l.req.id} predicted ${predicted} > ${l.objectiveMs}`);
    }
    assert.ok(refusals > 0, "at x2 the oracle refuses some requests");
  });

  test("warmpath at x3 beats every anchor's default on goodput", () => {
    const entries = routerEntries(DEFAULT_FLEET, true, { smg: SMG_GRID[0]!, dynamo: DYNAMO_GRID[0]! });
    const wp = runOne(
      mix,
      3,
      capacity,
      DEFAULT_FLEET,
      entries.find((e) => e.name === "warmpath")!,
    );
    for (const e of entries.filter((x) => x.group === "default")) {
      const r = runOne(mix, 3, capacity, DEFAULT_FLEET, e);
      assert.ok(wp.all.goodput > r.all.goodput, `warmpath ${wp.all.goodput} vs ${e.name} ${r.all.goodput}`);
    }
  });

  test("commits each tenant the prompt tokens a minute it sends at 1x, and warmpath-committed sends them with its requests", () => {
    const c = commitmentsAt(mix, capacity);
    assert.deepEqual(Object.keys(c).sort(), MIX.tenants.map((t) => t.name).sort());
    // At 1x the run lasts the workload's span divided by the speed: a tenant's commitment is its prompt tokens over that.
    const span = Math.max(...mix.requests.map((r) => r.arrival)) / capacity / 60_000;
    for (const [tenant, perMinute] of Object.entries(c)) {
      const tokens = mix.requests.filter((r) => r.tenant === tenant).reduce((n, r) => n + r.promptTokens, 0);
      assert.ok(Math.abs(perMinute - tokens / span) <= 1, `${tenant}: ${perMinute} vs ${tokens / span}`);
    }
    const entries = routerEntries(DEFAULT_FLEET, true, { smg: SMG_GRID[0]!, dynamo: DYNAMO_GRID[0]! }, c);
    const committed = entries.find((e) => e.name === "warmpath-committed")!;
    assert.deepEqual(committed.spec, { kind: "warmpath", admission: true, commitments: c, tellPlaces: true });
    // warmpath states its nodes' places (as SMG's limit is told the engines' slots); without
    // admission it is what landed before, not told them.
    const spec = (name: string) => entries.find((e) => e.name === name)!.spec;
    assert.deepEqual(spec("warmpath"), { kind: "warmpath", admission: true, tellPlaces: true });
    assert.deepEqual(spec("warmpath-no-admission"), { kind: "warmpath", admission: false });
    assert.equal(
      routerEntries(DEFAULT_FLEET, true, { smg: SMG_GRID[0]!, dynamo: DYNAMO_GRID[0]! }).find((e) => e.name === "warmpath-committed"),
      undefined,
    );
    // Its commitments reach the region: the same run without them differs.
    const a = runOne(mix, 2, capacity, DEFAULT_FLEET, committed);
    const b = runOne(
      mix,
      2,
      capacity,
      DEFAULT_FLEET,
      entries.find((e) => e.name === "warmpath")!,
    );
    assert.notDeepEqual(a.byTenant, b.byTenant);
  });

  test("a flood after history is measured from its start, against the same window without it", () => {
    const entry = routerEntries(DEFAULT_FLEET, true, { smg: SMG_GRID[0]!, dynamo: DYNAMO_GRID[0]! }).find((e) => e.name === "warmpath")!;
    const from = 30_000;
    const windowed = runOne(mix, 1, capacity, DEFAULT_FLEET, entry, "", false, from);
    assert.equal(windowed.all.offered, mix.requests.filter((r) => r.arrival >= from).length);
    // The verdict compares the flood's window with the baseline's window (baseRuns), not the sweep's run.
    const run = (router: string, tenantGoodput: Record<string, number>): GoodputRun => ({
      ...windowed,
      router,
      byTenant: Object.fromEntries(Object.entries(tenantGoodput).map(([t, g]) => [t, { ...windowed.all, goodput: g }])),
    });
    const sweep = run("warmpath", { a: 0.5, b: 1 }); // a different (unwindowed) baseline: must not be used
    const flood = { tenant: "b", factor: 5, load: 1, fromSeconds: 30, runs: [run("warmpath", { a: 0.9, b: 0.5 })] };
    const v = verdicts({
      workloads: [],
      loads: [1],
      noises: [0],
      runs: [{ ...sweep, workload: "mix", load: 1, noise: 0 }],
      floods: [{ ...flood, baseRuns: [run("warmpath", { a: 1, b: 1 })] }],
    });
    assert.equal(v.length, 1);
    assert.match(v[0]!.target, /^flood \(b x5 from 30 s at x1\)/);
    assert.equal(v[0]!.met, true); // a keeps 90% of its window's goodput (against 1, not the sweep's 0.5)
    assert.match(v[0]!.figure, /90\.0% vs 100\.0%/);
  });

  test("warmpath told its nodes' places (fleet slots) waits for a place instead of sending a request to wait in the engine", () => {
    // A fleet whose places fill before its prefill does: 4 places a node, answers at 10 tokens/s.
    const fleet = { ...DEFAULT_FLEET, slots: 4, decodeRate: 10 };
    const speed = capacitySpeed(mix, fleet).speed;
    const entry = routerEntries(fleet, false, { smg: SMG_GRID[0]!, dynamo: DYNAMO_GRID[0]! }).find((e) => e.name === "warmpath")!;
    const spec = entry.spec;
    if (spec.kind !== "warmpath") throw new Error("not warmpath");
    const run = (tellPlaces: boolean) => {
      const d = buildRouter("warmpath", { ...spec, tellPlaces }, fleet.prefillRate);
      const { lives } = simulate(mix.requests, speed, fleet, mix.trueBlockTokens, d);
      const placed = lives.filter((l) => l.refused === undefined);
      return { good: lives.filter(inTime).length, waitedLate: placed.filter((l) => l.slotWait && !inTime(l)).length };
    };
    const told = run(true);
    const blind = run(false);
    assert.ok(blind.waitedLate > 0, "the fleet's places fill: requests waited for one and came late");
    assert.ok(
      told.waitedLate < blind.waitedLate / 2,
      `told: ${told.waitedLate} late after a wait for a place, not told ${blind.waitedLate}`,
    );
    assert.ok(told.good > blind.good, `told ${told.good} in time, not told ${blind.good}`);
  });

  test("a run is deterministic", () => {
    const e = { name: "warmpath", spec: { kind: "warmpath" as const, admission: true } };
    const strip = ({ wallMs, ...rest }: ReturnType<typeof runOne>) => (void wallMs, rest);
    assert.deepEqual(strip(runOne(mix, 2, capacity, DEFAULT_FLEET, e)), strip(runOne(mix, 2, capacity, DEFAULT_FLEET, e)));
  });

  test("goodput counts a request in time only if placed and answered within its objective", () => {
    const r = runOne(mix, 0.5, capacity, DEFAULT_FLEET, { name: "slo-oracle", spec: { kind: "slo-oracle" } });
    assert.equal(r.all.good + r.all.late + r.all.refused, r.all.offered);
    assert.equal(
      Object.values(r.byClass).reduce((a, g) => a + g.offered, 0),
      r.all.offered,
    );
  });
});

/** Places every request on node 0 at once and records the calls (what the protections sit in front of). */
class Node0 implements PlacingDispatcher {
  decided: Array<{ id: number; exclude: string[] | undefined }> = [];
  init(): void {}
  decide(r: Live, _now: number, exclude?: string[]): Placement {
    this.decided.push({ id: r.req.id, exclude });
    return 0;
  }
  firstToken(): void {}
  complete(): void {}
  report(): void {}
}

/** Four requests at t=0, each 1,000 ms of prefill and 1,000 ms of decode on the small fleet. */
function burst(n = 4) {
  return Array.from({ length: n }, (_, i) => req(i, 0, 1000, range(i * 100, 10), 100));
}

describe("SMG --max-concurrent-requests (smg-limiter.ts)", () => {
  test("with queueing disabled (queue size 0), a request finding no token gets 429 at once", () => {
    const lim = new SmgLimiter("smg", new Node0(), { ...smgDefaults(2), refillPerSecond: 0, queueSize: 0 });
    const { lives } = simulate(burst(), 1, smallFleet({ nodes: 1 }), 100, lim);
    assert.deepEqual(
      lives.map((l) => l.refused ?? "placed"),
      ["placed", "placed", "smg-429", "smg-429"],
    );
  });

  test("a full queue refuses with 429; a waiter is placed when a token is returned (refill 0)", () => {
    const lim = new SmgLimiter("smg", new Node0(), { ...smgDefaults(1), refillPerSecond: 0, maxWaiters: 2 });
    const { lives } = simulate(burst(), 1, smallFleet({ nodes: 1 }), 100, lim);
    assert.deepEqual(
      lives.map((l) => l.refused ?? "placed"),
      ["placed", "placed", "placed", "smg-429"],
    );
    // The second waited for the first's answer to end (1 s prefill + 1 s decode).
    assert.equal(lives[1]!.placedAt, 2000);
    assert.equal(lives[2]!.placedAt, 4000);
  });

  test("a waiter gets 408 when its queue timeout passes first", () => {
    const lim = new SmgLimiter("smg", new Node0(), { ...smgDefaults(1), refillPerSecond: 0, queueTimeoutMs: 1500 });
    const { lives } = simulate(burst(2), 1, smallFleet({ nodes: 1 }), 100, lim);
    assert.equal(lives[1]!.refused, "smg-408");
    assert.equal(lives[1]!.decidedAt, 1500);
  });

  test("with the default refill (N tokens/s) a waiter gives up after the refill time of its token", () => {
    const lim = new SmgLimiter("smg", new Node0(), smgDefaults(2));
    const { lives } = simulate(burst(), 1, smallFleet({ nodes: 1 }), 100, lim);
    // Tokens 2, 2 taken; the third waits 1/2 s for the refill and gets it; the fourth's window
    // (also 1/2 s) closes as that token goes to the third: 408.
    assert.deepEqual(
      lives.map((l) => l.refused ?? l.placedAt),
      [0, 0, 500, "smg-408"],
    );
  });
});

describe("Dynamo busy thresholds (dynamo-busy.ts)", () => {
  test("busy workers are excluded, and with every worker busy the answer is 529", () => {
    const inner = new Node0();
    const d = new DynamoBusy("dynamo", inner, { activeDecodeBlocksThreshold: undefined, activePrefillTokensThreshold: 500 });
    const { lives } = simulate(burst(3), 1, smallFleet({ nodes: 1 }), 100, d);
    // The first makes node 0 busy (1,000 prefill tokens > 500): the others are refused.
    assert.deepEqual(
      lives.map((l) => l.refused ?? "placed"),
      ["placed", "dynamo-529", "dynamo-529"],
    );
    assert.deepEqual(inner.decided[0]!.exclude, []);
  });
});

describe("llm-d probabilistic admitter (llmd.ts)", () => {
  test("sheds every sheddable request once saturation reaches 0.32, never a protected one", () => {
    const fleet = smallFleet({ nodes: 1, capacityTokens: 1_000_000 });
    const rs = Array.from({ length: 12 }, (_, i) => ({
      ...req(i, 0, 1000, range(i * 100, 10), 100),
      hashes: [],
      priority: i % 2 === 0 ? ("batch" as const) : ("interactive" as const),
    }));
    const d = new LlmdDispatcher("llm-d", LLMD_ADMITTER_DEFAULTS);
    const { lives } = simulate(rs, 1, fleet, 100, d);
    // One node: after the first placement, waiting grows by one per request; at 2 waiting,
    // sat = 2/5 = 0.4 > 0.32 and every later batch request is shed.
    for (const l of lives.slice(6)) {
      if (l.req.priority === "batch") assert.equal(l.refused, "llmd-shed");
      else assert.equal(l.refused, undefined);
    }
  });
});

/** A dispatcher that holds every request until `releaseAt`, then places it on node 0. */
class Holder implements Dispatcher {
  readonly name = "holder";
  private held: Live[] = [];
  private readonly releaseAt: number;
  constructor(releaseAt: number) {
    this.releaseAt = releaseAt;
  }
  init(_fleet: Fleet): void {}
  route(r: Live): Placement {
    this.held.push(r);
    return "queued";
  }
  drain(now: number): Decided[] {
    if (now < this.releaseAt) return [];
    const out = this.held.map((live) => ({ live, node: 0 }));
    this.held = [];
    return out;
  }
  wakeAt(): number | undefined {
    return this.held.length > 0 ? this.releaseAt : undefined;
  }
  firstToken(): void {}
  complete(): void {}
  report(): void {}
}

describe("simulate with held requests", () => {
  test("a held request is released at the dispatcher's wake time and its TTFT counts the hold", () => {
    const { lives } = simulate(burst(1), 1, smallFleet({ nodes: 1 }), 100, new Holder(700));
    assert.equal(lives[0]!.placedAt, 700);
    assert.equal(lives[0]!.firstToken, 1700);
    assert.equal(inTime(lives[0]!), true); // objective max(1 s, 5 x 1 s) = 5 s
  });
});
