import { test, describe } from "node:test";
import assert from "node:assert/strict";
import {
  ACCESS_KM,
  ALARMS_PER_OBJECT_PER_S,
  BASE_DEPLOYMENT,
  DO_CALLS_PER_REQUEST_TODAY,
  DO_CALLS_STREAMED,
  DO_CALLS_UNSTREAMED,
  HANDSHAKE_ROUND_TRIPS,
  MONTH_S,
  NODES,
  OPTIONS,
  PLACEMENTS,
  PAIR_WORK_US,
  PRICES,
  REGIONS,
  ROUTE_US_BY_NODES,
  RPC_FLOOR_PAIR_US,
  SESSION_UNCOUNTED,
  SHARD_LOAD_SYNC_MS,
  STREAMED_SHARE,
  TODAY,
  TODAY_UNSTREAMED,
  TOTAL_RPS,
  blocksFor,
  coldConnectionMs,
  distances,
  firstByteLegs,
  lastSeenWriteIntervalS,
  lastSeenWriteReports,
  longHauls,
  minSyncMs,
  mirrorIntervalS,
  mirroredWriteIntervalS,
  monthlyCost,
  objectLoad,
  objectUsPerRequest,
  pathMs,
  report,
  retryLegs,
  routeUs,
  rttMs,
  shardMemoryBytes,
  shardsNeeded,
  simulateSkew,
  smartOtherRegionLegs,
  totalUsd,
  worstCaseSubrequests,
  wrap,
  type Prices,
} from "../scale-model.ts";
import { DEFAULT_MAX_INDEX_ENTRIES, indexMemoryBound } from "../../src/core/prefix-index.ts";

const close = (a: number, b: number, eps = 1e-9) => assert.ok(Math.abs(a - b) <= eps * Math.max(1, Math.abs(b)), `${a} vs ${b}`);

describe("round trips", () => {
  test("0.015 ms per great-circle km: New York to London (5,570 km) is ~84 ms, as src/core/region-select.ts states", () => {
    close(rttMs(1_000), 15);
    close(rttMs(5_570), 83.55);
    close(rttMs(0), 0);
  });

  test("the placements span a metro to an ocean, as the issue asks", () => {
    const km = PLACEMENTS.map((p) => distances(p).clientGpu);
    assert.ok(km[0]! < 50, `same metro ${km[0]}`);
    assert.ok(km[1]! >= 1_000 && km[1]! <= 2_000, `same continent ${km[1]}`);
    assert.ok(km[2]! > 5_500 && km[2]! < 6_500, `transatlantic ${km[2]}`);
    assert.ok(km[3]! > 8_500 && km[3]! < 9_500, `transpacific ${km[3]}`);
  });
});

describe("long-haul crossings per option", () => {
  const expected: Record<string, number> = { direct: 1, today: 2, preconnect: 2, relay: 1, snapshot: 1, smart: 1, split: 1 };
  for (const o of OPTIONS) {
    test(`${o.id}: ${expected[o.id]} long-haul round trip(s) before the first byte, at every placement`, () => {
      for (const p of PLACEMENTS) assert.equal(longHauls(firstByteLegs(o.id, p)), expected[o.id]);
    });
  }

  test("today's path adds one long haul over a direct call: the route RPC (plus the client's access hop)", () => {
    for (const p of PLACEMENTS) {
      const d = distances(p);
      close(pathMs(firstByteLegs("today", p)) - pathMs(firstByteLegs("direct", p)), rttMs(ACCESS_KM) + rttMs(d.edgeObject));
    }
  });

  test("transpacific: the per-region placed worker saves more than 100 ms per request over today's path", () => {
    const p = PLACEMENTS[3]!;
    const saved = pathMs(firstByteLegs("today", p)) - pathMs(firstByteLegs("split", p));
    assert.ok(saved > 100, `saved ${saved}`);
    // ...and more again on every retry, which becomes local.
    assert.ok(pathMs(retryLegs("today", p)) > 20 * pathMs(retryLegs("split", p)));
  });

  test("Smart Placement's single placement puts a far region's request behind three long hauls", () => {
    const legs = smartOtherRegionLegs(PLACEMENTS[0]!);
    assert.equal(longHauls(legs), 3);
    assert.ok(pathMs(legs) > 10 * pathMs(firstByteLegs("today", PLACEMENTS[0]!)));
  });

  test("opening the origin connection during the route RPC hides at most the RPC's round trip", () => {
    for (const p of PLACEMENTS) {
      const d = distances(p);
      const cold = coldConnectionMs("today", p);
      close(cold, HANDSHAKE_ROUND_TRIPS * rttMs(d.clientGpu));
      close(coldConnectionMs("preconnect", p), Math.max(0, cold - rttMs(d.edgeObject)));
      assert.ok(coldConnectionMs("preconnect", p) <= cold);
    }
  });
});

describe("object load", () => {
  test("calls per request: 3 for a streamed answer, 2 when `complete` carries the first byte, averaged by the streamed share", () => {
    assert.equal(DO_CALLS_STREAMED, 3);
    assert.equal(DO_CALLS_UNSTREAMED, 2);
    close(DO_CALLS_PER_REQUEST_TODAY, 2 + STREAMED_SHARE);
    assert.equal(TODAY.billedCallsPerRequest, DO_CALLS_PER_REQUEST_TODAY);
    assert.equal(TODAY_UNSTREAMED.billedCallsPerRequest, 2);
  });

  test("today: every report into shard 0, each node's report mirrored to the other shards every 5 s, 50 exchanges a second per shard", () => {
    const n = 8;
    const calls = DO_CALLS_PER_REQUEST_TODAY;
    const load = objectLoad({ ...BASE_DEPLOYMENT, shardsPerRegion: n }, TODAY);
    const objects = REGIONS * (n + 1);
    const mirrors = (NODES / 5) * (n - 1);
    close(
      load.billedDoRps,
      TOTAL_RPS * calls + NODES + mirrors + REGIONS * n * (1000 / SHARD_LOAD_SYNC_MS) + objects * ALARMS_PER_OBJECT_PER_S,
    );
    // Shard 0 takes its share of requests' calls and all of its region's 400 reports; the others 80 mirrors a second.
    close(load.shardRps(1 / n), ((TOTAL_RPS / REGIONS) * calls) / n + NODES / REGIONS + ALARMS_PER_OBJECT_PER_S);
    close(load.otherShardRps(1 / n), ((TOTAL_RPS / REGIONS) * calls) / n + NODES / REGIONS / 5 + ALARMS_PER_OBJECT_PER_S);
    close(load.exchangeRps, n * 50);
    // Every shard holds the node table and rewrites last_seen at every mirror.
    assert.equal(load.nodeTables, n);
    close(load.rowsWrittenPerS, NODES / 5 + (NODES * (n - 1)) / 5 + objects * ALARMS_PER_OBJECT_PER_S);
  });

  test("unsharded, the region's one object takes every report, and nothing is mirrored", () => {
    const load = objectLoad(BASE_DEPLOYMENT, TODAY);
    close(load.billedDoRps, TOTAL_RPS * DO_CALLS_PER_REQUEST_TODAY + NODES + REGIONS * ALARMS_PER_OBJECT_PER_S);
    close(load.shardRps(1), (TOTAL_RPS / REGIONS) * DO_CALLS_PER_REQUEST_TODAY + NODES / REGIONS + ALARMS_PER_OBJECT_PER_S);
    close(load.otherShardRps(1), load.shardRps(1));
    assert.equal(load.exchangeRps, 0);
  });

  test("with an RPC session and reports ingested once, a request is one billed call and shards take no reports", () => {
    const n = 8;
    const load = objectLoad({ ...BASE_DEPLOYMENT, shardsPerRegion: n }, SESSION_UNCOUNTED);
    const objects = REGIONS * (n + 1);
    close(load.billedDoRps, TOTAL_RPS + NODES + REGIONS * n * 50 + objects * ALARMS_PER_OBJECT_PER_S);
    close(load.shardRps(1 / n), TOTAL_RPS / REGIONS / n + ALARMS_PER_OBJECT_PER_S);
    close(load.otherShardRps(1 / n), load.shardRps(1 / n));
    close(load.exchangeRps, n * 50 + NODES / REGIONS);
    close(load.rowsWrittenPerS, NODES / 5 + objects * ALARMS_PER_OBJECT_PER_S);
  });

  test("last_seen every 5th report (reports a little over 1 s apart, past a third of the 15 s silence timeout); mirrors every 5 s, each writing", () => {
    assert.equal(lastSeenWriteReports(), 5);
    assert.equal(lastSeenWriteIntervalS(), 5);
    assert.equal(mirrorIntervalS(), 5);
    assert.equal(mirroredWriteIntervalS(), 5);
  });

  test("shards needed: an even split at 1,000 calls/s and 20,000 requests/s is 21 shards; today's protocol never fits, streamed or not", () => {
    const even = (n: number) => 1 / n;
    assert.equal(shardsNeeded(BASE_DEPLOYMENT, SESSION_UNCOUNTED, 1_000, even), 21);
    // Shard 0: 60,000 / n + 400 <= 1,000 needs n >= 100 > 64; and the fixed 20 ms exchange passes 1,000/s beyond 20 shards.
    assert.equal(shardsNeeded(BASE_DEPLOYMENT, TODAY, 1_000, even), undefined);
    assert.equal(shardsNeeded(BASE_DEPLOYMENT, TODAY_UNSTREAMED, 1_000, even), undefined);
    // Even with an exchange that slowed, shard 0's 400 reports leave too little room: 40,000 / n + 400 <= 1,000 needs n >= 67.
    assert.equal(shardsNeeded(BASE_DEPLOYMENT, { ...TODAY_UNSTREAMED, fixedSyncMs: undefined }, 1_000, even), undefined);
    // More capacity never needs more shards.
    assert.ok(shardsNeeded(BASE_DEPLOYMENT, SESSION_UNCOUNTED, 2_000, even)! <= 21);
  });

  test("the exchange interval stretches once the shards' exchanges would exceed the exchange object's capacity", () => {
    close(minSyncMs({ ...BASE_DEPLOYMENT, shardsPerRegion: 8 }, SESSION_UNCOUNTED, 1_000), SHARD_LOAD_SYNC_MS);
    // 64 shards, 400 reports/s on the exchange object: 64 exchanges in 600 calls/s of room, one every 107 ms per shard.
    close(minSyncMs({ ...BASE_DEPLOYMENT, shardsPerRegion: 64 }, SESSION_UNCOUNTED, 1_000), (64 * 1000) / 600);
  });

  test("the object's CPU per request counts one RPC's half-floor per call", () => {
    const diff = objectUsPerRequest(400) - routeUs(400);
    assert.ok(diff > 0);
    close(objectUsPerRequest(8), PAIR_WORK_US + DO_CALLS_PER_REQUEST_TODAY * (RPC_FLOOR_PAIR_US / 2));
  });

  test("worst-case subrequests: 9 node attempts, their route calls (each retried once), 8 failed completes, and firstByte, rememberResponse, complete", () => {
    const sub = worstCaseSubrequests(5, 31);
    assert.equal(sub.origin, 9);
    assert.equal(sub.object, 9 * 2 + 8 + 3);
    assert.equal(sub.digests, 155);
  });
});

describe("memory", () => {
  test("blocks per prompt follow the production layout (the benchmarks' block counts)", () => {
    assert.equal(blocksFor(10_000), 20);
    assert.equal(blocksFor(100_000), 196);
    assert.equal(blocksFor(512_000), 756);
    assert.equal(blocksFor(4_000_000), 1513);
  });

  test("a shard's memory is the index's hard bound plus its share of the tickets in flight", () => {
    const one = shardMemoryBytes(20_000, 1);
    const quarter = shardMemoryBytes(20_000, 0.25);
    assert.equal(one.index, indexMemoryBound(DEFAULT_MAX_INDEX_ENTRIES));
    close(quarter.tickets * 4, one.tickets);
    close(one.total, one.index + one.tickets);
  });

  test("route CPU is the workerd medians at the measured node counts, growing past them", () => {
    for (const [nodes, us] of ROUTE_US_BY_NODES) close(routeUs(nodes), us);
    assert.ok(routeUs(400) > routeUs(256));
  });
});

describe("cost", () => {
  const noAllowances: Prices = {
    ...PRICES,
    subscription: 0,
    workerRequestsIncluded: 0,
    workerCpuMsIncluded: 0,
    doRequestsIncluded: 0,
    doGbSecondsIncluded: 0,
    rowsWrittenIncluded: 0,
    rowsReadIncluded: 0,
    storageGbMonthIncluded: 0,
    analyticsPointsIncluded: 0,
    logIngestGbIncluded: 0,
    logStorageGbMonthIncluded: 0,
  };

  test("without allowances, the bill scales linearly with traffic, nodes and everything per unit", () => {
    const d = { ...BASE_DEPLOYMENT, shardsPerRegion: 4 };
    const twice = { ...d, rps: 2 * d.rps, nodes: 2 * d.nodes };
    for (const p of [TODAY, SESSION_UNCOUNTED]) {
      const a = monthlyCost(d, p, noAllowances);
      const b = monthlyCost(twice, p, noAllowances);
      for (const [i, line] of a.entries()) {
        // Duration depends on the number of objects, alarms on objects too: neither grows with traffic.
        if (line.item === "Durable Object duration") close(b[i]!.usd, line.usd);
        else if (line.item === "Durable Object requests" || line.item === "SQLite rows written") assert.ok(b[i]!.usd < 2 * line.usd + 1e-6);
        else close(b[i]!.usd, 2 * line.usd);
      }
    }
  });

  test("each line is its published unit price over the allowance: Workers requests at $0.30 per million past 10 million", () => {
    const lines = monthlyCost(BASE_DEPLOYMENT, TODAY);
    const requests = lines.find((l) => l.item.startsWith("Workers requests"))!;
    close(requests.quantity, (TOTAL_RPS + NODES) * MONTH_S);
    close(requests.usd, ((requests.quantity - 10e6) / 1e6) * 0.3);
    const doRequests = lines.find((l) => l.item === "Durable Object requests")!;
    close(doRequests.usd, ((doRequests.quantity - 1e6) / 1e6) * 0.15);
  });

  test("the RPC session cuts the object requests' bill to about a third; sampling logs and analytics cuts their lines 100x", () => {
    const d = { ...BASE_DEPLOYMENT, shardsPerRegion: 16 };
    const doUsd = (p: typeof TODAY) => monthlyCost(d, p).find((l) => l.item === "Durable Object requests")!.usd;
    assert.ok(doUsd(SESSION_UNCOUNTED) < doUsd(TODAY) / 2.5);
    const full = monthlyCost(d, SESSION_UNCOUNTED, noAllowances);
    const sampled = monthlyCost({ ...d, logSampleRate: 0.01, analyticsSampleRate: 0.01 }, SESSION_UNCOUNTED, noAllowances);
    for (const item of ["Analytics Engine data points", "Workers Logs ingestion", "Workers Logs storage"]) {
      close(sampled.find((l) => l.item === item)!.usd * 100, full.find((l) => l.item === item)!.usd);
    }
    assert.ok(totalUsd(sampled) < totalUsd(full));
  });
});

describe("skew simulation", () => {
  test("one shard takes everything; the busiest of n is at least 1/n and at least the hottest block", () => {
    const r = simulateSkew(1_000, 1, 2_000, 3, 16);
    assert.equal(r.busiest[0], 1);
    for (let n = 1; n <= 16; n++) assert.ok(r.busiest[n - 1]! >= Math.max(1 / n, r.topShare * 0.9), `n=${n}`);
    // Zipf(1) over 1,000 keys: the hottest is 1 / H(1000) = 13.4%.
    close(r.topShare, 0.1336, 1e-3);
  });

  test("more skew, a busier busiest shard", () => {
    const flat = simulateSkew(10_000, 0, 20_000, 2, 32);
    const skewed = simulateSkew(10_000, 1, 20_000, 2, 32);
    assert.ok(skewed.busiest[31]! > 3 * flat.busiest[31]!);
  });

  test("seeded: the same inputs give the same shares", () => {
    assert.deepEqual(simulateSkew(500, 0.8, 1_000, 2, 8), simulateSkew(500, 0.8, 1_000, 2, 8));
  });
});

test("the report renders the whole document, every section", () => {
  const md = report();
  assert.ok(md.startsWith("# Scaling warmpath"));
  for (const h of [
    "## Summary",
    "## A. The production path",
    "### A2.",
    "### A4.",
    "## B. Internet scale",
    "### B3.",
    "### B5.",
    "### B7.",
    "### Figures not sourced",
  ])
    assert.ok(md.includes(h), h);
  // No figure is left unformatted.
  assert.ok(!/NaN|undefined|Infinity/.test(md));
});

test("prose wraps at 100 columns and never starts a line with a list, heading or quote marker", () => {
  const text = "a ".repeat(45) + "bb - cc 1. dd # ee + ff > gg 24) hh " + "word ".repeat(40);
  const lines = wrap(text, "- ", "  ").split("\n");
  assert.ok(lines[0]!.startsWith("- "));
  for (const [i, line] of lines.entries()) {
    assert.ok(line.length <= 100, line);
    if (i > 0) assert.ok(/^ {2}[^-+*#>|\d ]/.test(line), line);
  }
  assert.equal(lines.join(" ").replace(/\s+/g, " "), ("- " + text).replace(/\s+/g, " ").trim());
});
