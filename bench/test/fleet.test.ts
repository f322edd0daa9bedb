import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { BlockCache, Fleet, noiseFactor, simulate } from "../fleet.ts";
import { EventHeap } from "../heap.ts";
import { summarise } from "../metrics.ts";
import { FixedDispatcher, range, req, smallFleet } from "./helpers.ts";

const BLOCK = 100; // tokens per true block in these tests

describe("BlockCache", () => {
  test("match is the leading run of cached blocks only", () => {
    const c = new BlockCache(10);
    c.touch([1, 2, 3]);
    assert.equal(c.match([1, 2, 3, 4]), 3);
    assert.equal(c.match([1, 9, 3]), 1);
    assert.equal(c.match([9, 1, 2]), 0, "later cached blocks do not count without the head");
    assert.equal(c.match([]), 0);
  });

  test("capacity is whole blocks, at least one", () => {
    assert.equal(new BlockCache(2.7).capacityBlocks, 2);
    assert.equal(new BlockCache(0).capacityBlocks, 1);
  });

  test("evicts the least recently used block, a prompt's tail before its head", () => {
    const c = new BlockCache(4);
    c.touch([1, 2]);
    c.touch([3, 4]);
    c.touch([1, 2]); // refresh: 3,4 are now the coldest, 4 (the tail) before 3
    c.touch([5]);
    assert.deepEqual([...c.map.keys()].sort(), [1, 2, 3, 5]);
    assert.equal(c.match([3, 4]), 1);
    assert.equal(c.match([1, 2]), 2);
    c.touch([6]);
    assert.deepEqual([...c.map.keys()].sort(), [1, 2, 5, 6]);
  });

  test("a prompt longer than the cache keeps its head", () => {
    const c = new BlockCache(2);
    c.touch([1, 2, 3, 4]);
    assert.equal(c.map.size, 2);
    assert.equal(c.match([1, 2, 3, 4]), 2);
  });

  test("evicting a head block makes the cached blocks after it unusable", () => {
    const c = new BlockCache(3);
    c.touch([1, 2, 3]);
    c.touch([9, 2, 3]); // 1 becomes the coldest and is evicted
    assert.ok(c.map.has(2) && c.map.has(3) && !c.map.has(1));
    assert.equal(c.match([1, 2, 3]), 0);
  });
});

describe("Fleet.cachedTokensOn", () => {
  test("counts whole blocks, but always leaves the last token to compute", () => {
    const fleet = new Fleet(smallFleet(), BLOCK);
    const node = fleet.nodes[0]!;
    node.cache.touch([1, 2, 3]);
    assert.equal(fleet.cachedTokensOn(node, req(0, 0, 500, [1, 2, 3, 4, 5])), 300);
    assert.equal(fleet.cachedTokensOn(node, req(0, 0, 300, [1, 2, 3])), 299);
    // A partial last block that matches counts only up to the prompt.
    assert.equal(fleet.cachedTokensOn(node, req(0, 0, 250, [1, 2, 3])), 249);
    assert.equal(fleet.cachedTokensOn(node, req(0, 0, 300, [7, 2, 3])), 0);
  });

  test("node ids are zero-padded and indices match", () => {
    const fleet = new Fleet(smallFleet({ nodes: 12 }), BLOCK);
    assert.equal(fleet.nodes[0]!.id, "node-00");
    assert.equal(fleet.nodes[11]!.id, "node-11");
    assert.equal(fleet.nodes[3]!.cache.capacityBlocks, 100);
  });
});

describe("simulate", () => {
  test("FCFS prefill costs only uncached tokens: exact TTFTs of back-to-back requests", () => {
    const requests = [
      req(0, 0, 300, [1, 2, 3], 10), // prefill 0..300, decode 10 tokens = 100 ms
      req(1, 50, 500, [1, 2, 3, 4, 5], 10), // queued; at 300 reuses 3 blocks: 200 ms
      req(2, 1000, 300, [1, 2, 3], 1), // exact repeat: only the last token
    ];
    const { lives, fleet } = simulate(requests, 1, smallFleet(), BLOCK, new FixedDispatcher());
    const [a, b, c] = lives;
    assert.deepEqual(
      lives.map((l) => [l.cachedTokens, l.uncachedTokens, l.prefillStart, l.firstToken, l.end]),
      [
        [0, 300, 0, 300, 400],
        [300, 200, 300, 500, 600],
        [299, 1, 1000, 1001, 1011],
      ],
    );
    // TTFT = arrival to end of prefill (queueing included).
    assert.equal(a!.firstToken - a!.arrival, 300);
    assert.equal(b!.firstToken - b!.arrival, 450);
    assert.equal(c!.firstToken - c!.arrival, 1);
    const node = fleet.nodes[0]!;
    assert.equal(node.prefillBusyMs, 501);
    assert.equal(node.prefillTokens, 501);
    assert.equal(node.requests, 3);
    assert.equal(node.running, 0);
    assert.equal(node.waiting, 0);
    assert.equal(node.activeKvTokens, 0);
  });

  test("lives come back in arrival order with their node", () => {
    const requests = [req(0, 0, 100, [1]), req(1, 5, 100, [2]), req(2, 9, 100, [3])];
    const { lives } = simulate(requests, 1, smallFleet({ nodes: 3 }), BLOCK, new FixedDispatcher((id) => 2 - id));
    assert.deepEqual(
      lives.map((l) => [l.req.id, l.node]),
      [
        [0, 2],
        [1, 1],
        [2, 0],
      ],
    );
    // Three idle nodes: no queueing.
    assert.deepEqual(
      lives.map((l) => l.firstToken - l.arrival),
      [100, 100, 100],
    );
  });

  test("caches are per node", () => {
    const requests = [req(0, 0, 300, [1, 2, 3]), req(1, 1000, 300, [1, 2, 3]), req(2, 2000, 300, [1, 2, 3])];
    const { lives } = simulate(requests, 1, smallFleet({ nodes: 2 }), BLOCK, new FixedDispatcher((id) => (id === 1 ? 1 : 0)));
    assert.deepEqual(
      lives.map((l) => l.cachedTokens),
      [0, 0, 299],
    );
  });

  test("a silent restart empties the node's cache at its time, and nothing else changes", () => {
    const requests = [req(0, 0, 300, [1, 2, 3]), req(1, 1000, 300, [1, 2, 3]), req(2, 2000, 300, [1, 2, 3]), req(3, 3000, 300, [1, 2, 3])];
    const fixed = () => new FixedDispatcher(() => 0);
    const plain = simulate(requests, 1, smallFleet({ nodes: 1 }), BLOCK, fixed());
    assert.deepEqual(
      plain.lives.map((l) => l.cachedTokens),
      [0, 299, 299, 299],
    );
    // Restart at the arrival of the request at half the run (request 2): it finds nothing cached.
    const restarted = simulate(requests, 1, smallFleet({ nodes: 1 }), BLOCK, fixed(), { silentRestart: { node: 0, atFraction: 0.5 } });
    assert.deepEqual(
      restarted.lives.map((l) => l.cachedTokens),
      [0, 299, 0, 299],
    );
  });

  test("the capacity bound evicts least recently used blocks, tails first", () => {
    // 4 blocks of cache.
    const requests = [
      req(0, 0, 200, [1, 2]),
      req(1, 1000, 200, [3, 4]),
      req(2, 2000, 200, [1, 2]), // hit; now 3,4 are the coldest
      req(3, 3000, 100, [5]), // evicts 4
      req(4, 4000, 200, [3, 4]), // 3 still there: one block; touching 3,4 evicts 2
      req(5, 5000, 200, [1, 2]), // 1 still there: one block
    ];
    const { lives } = simulate(requests, 1, smallFleet({ capacityTokens: 400 }), BLOCK, new FixedDispatcher());
    assert.deepEqual(
      lives.map((l) => l.cachedTokens),
      [0, 0, 199, 0, 100, 100],
    );
  });

  test("a block is reused only while every block before it is cached", () => {
    const requests = [req(0, 0, 300, [1, 2, 3]), req(1, 1000, 300, [9, 2, 3]), req(2, 2000, 300, [1, 2, 3])];
    const { lives } = simulate(requests, 1, smallFleet({ capacityTokens: 300 }), BLOCK, new FixedDispatcher());
    // Request 1 evicts block 1 (the coldest): blocks 2 and 3 are cached but unusable for request 2.
    assert.deepEqual(
      lives.map((l) => [l.cachedTokens, l.firstToken - l.arrival]),
      [
        [0, 300],
        [0, 300],
        [0, 300],
      ],
    );
  });

  test("decode runs concurrently and does not slow prefill", () => {
    const requests = [
      req(0, 0, 100, [1], 100), // prefill 0..100, decode 100..1100
      req(1, 0, 100, [2], 100), // prefill 100..200, decode 200..1200
      req(2, 150, 100, [3], 1), // prefill 200..300 while two decode
    ];
    const { lives } = simulate(requests, 1, smallFleet(), BLOCK, new FixedDispatcher());
    assert.deepEqual(
      lives.map((l) => [l.firstToken, l.end]),
      [
        [100, 1100],
        [200, 1200],
        [300, 310],
      ],
    );
  });

  test("a request waits for a free slot, FCFS, and slot waits are counted", () => {
    const requests = [
      req(0, 0, 100, [1], 10), // prefill 0..100, decode 100..200 holds the only slot
      req(1, 10, 100, [2], 10), // waits for the slot until 200: prefill 200..300, decode to 400
      req(2, 20, 50, [3], 1), // short, but does not overtake: waits for the slot until 400
    ];
    const { lives, fleet } = simulate(requests, 1, smallFleet({ slots: 1 }), BLOCK, new FixedDispatcher());
    assert.deepEqual(
      lives.map((l) => [l.prefillStart, l.firstToken, l.end, l.slotWait]),
      [
        [0, 100, 200, false],
        [200, 300, 400, true],
        [400, 450, 460, true],
      ],
    );
    assert.equal(summarise("w", 1, "fixed", 0, lives, fleet).slotWaits, 2);
  });

  test("a slot freed at the instant of an arrival is free for it (fleet events before arrivals)", () => {
    const requests = [req(0, 0, 100, [1], 10), req(1, 200, 100, [2], 1)];
    const { lives } = simulate(requests, 1, smallFleet({ slots: 1 }), BLOCK, new FixedDispatcher());
    assert.equal(lives[1]!.slotWait, false);
    assert.equal(lives[1]!.prefillStart, 200);
    assert.equal(lives[1]!.firstToken, 300);
  });

  test("speed divides arrival times", () => {
    const requests = [req(0, 0, 300, [1, 2, 3]), req(1, 100, 100, [9])];
    const { lives } = simulate(requests, 2, smallFleet(), BLOCK, new FixedDispatcher());
    assert.equal(lives[1]!.arrival, 50);
    assert.equal(lives[1]!.firstToken, 400);
    assert.equal(lives[1]!.firstToken - lives[1]!.arrival, 350);
  });

  test("dispatcher callbacks: first token at end of prefill, completion at end of decode, staggered reports", () => {
    const d = new FixedDispatcher();
    simulate([req(0, 0, 250, [1, 2, 3], 1)], 1, smallFleet({ nodes: 2, reportIntervalMs: 100 }), BLOCK, d);
    const nonReport = d.calls.filter((c) => c.kind !== "report");
    assert.deepEqual(nonReport, [
      { kind: "route", id: 0, t: 0 },
      { kind: "firstToken", id: 0, t: 250 },
      { kind: "complete", id: 0, t: 260 },
    ]);
    const reports = (node: number) => d.calls.filter((c) => c.kind === "report" && c.id === node);
    assert.deepEqual(
      reports(0).map((c) => c.t),
      [0, 100, 200],
    );
    assert.deepEqual(
      reports(1).map((c) => c.t),
      [50, 150, 250],
    );
    // The report at t=0 comes before the arrival at t=0; later ones see the running request.
    assert.deepEqual(
      reports(0).map((c) => c.running),
      [0, 1, 1],
    );
    assert.ok(reports(1).every((c) => c.running === 0 && c.waiting === 0));
    assert.equal(d.calls[0]!.kind, "report");
  });

  test("reports see queued requests as waiting", () => {
    const d = new FixedDispatcher();
    const requests = [req(0, 0, 300, range(1, 3)), req(1, 10, 100, [9]), req(2, 20, 100, [8])];
    simulate(requests, 1, smallFleet({ reportIntervalMs: 100 }), BLOCK, d);
    const at100 = d.calls.find((c) => c.kind === "report" && c.t === 100)!;
    assert.equal(at100.running, 1);
    assert.equal(at100.waiting, 2);
  });

  test("hidden noise scales the prefill time, same draw for every run", () => {
    const cfg = smallFleet({ noiseSigma: 0.5 });
    const { lives, fleet } = simulate([req(7, 0, 1000, range(1, 10))], 1, cfg, BLOCK, new FixedDispatcher());
    const f = noiseFactor(7, 0.5);
    assert.notEqual(f, 1);
    assert.equal(lives[0]!.noise, f);
    assert.ok(Math.abs(lives[0]!.firstToken - 1000 * f) < 1e-9);
    assert.ok(Math.abs(fleet.nodes[0]!.prefillBusyMs - 1000 * f) < 1e-9);
  });

  test("empty workload terminates", () => {
    const { lives } = simulate([], 1, smallFleet(), BLOCK, new FixedDispatcher());
    assert.deepEqual(lives, []);
  });
});

describe("noiseFactor", () => {
  test("is 1 without noise, deterministic per id, lognormal with mean about 1", () => {
    assert.equal(noiseFactor(3, 0), 1);
    assert.equal(noiseFactor(3, 1), noiseFactor(3, 1));
    let sum = 0;
    let min = Infinity;
    const n = 20_000;
    for (let i = 0; i < n; i++) {
      const f = noiseFactor(i, 0.5);
      sum += f;
      min = Math.min(min, f);
    }
    assert.ok(min > 0);
    assert.ok(Math.abs(sum / n - 1) < 0.03, `mean ${sum / n}`);
  });
});

describe("EventHeap", () => {
  test("pops by time, ties in push order", () => {
    const h = new EventHeap<{ t: number; seq: number; name: string }>();
    assert.equal(h.peekTime(), Infinity);
    const input = [5, 1, 3, 1, 5, 0, 3, 1].map((t, i) => ({ t, seq: 0, name: `${t}:${i}` }));
    for (const e of input) h.push(e);
    const out: string[] = [];
    while (h.size > 0) out.push(h.pop()!.name);
    assert.deepEqual(out, ["0:5", "1:1", "1:3", "1:7", "3:2", "3:6", "5:0", "5:4"]);
    assert.equal(h.pop(), undefined);
  });
});
