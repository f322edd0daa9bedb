/** Each policy's choice on hand-built candidates: the behaviour that defines it. */
import { describe, expect, it } from "vitest";
import { createPolicy, parsePolicySpec, type Candidate, type PolicyInput, type PolicyName } from "../../src/core/policies/index.ts";
import { seededRandom } from "../../src/core/random.ts";

const PROMPT = 10_000;
const BLOCK = 128;

function node(id: string, over: Partial<Candidate> = {}): Candidate {
  const matchBlocks = over.matchBlocks ?? 0;
  const matchTokens = Math.min(PROMPT, matchBlocks * BLOCK);
  return {
    id,
    matchBlocks,
    matchTokens,
    uncachedTokens: PROMPT - matchTokens,
    workAheadTokens: 0,
    recentPrefillTokens: 0,
    prefillRate: 10_000,
    inflight: 0,
    dispatched: 0,
    lastDispatchAt: -Infinity,
    activeTokens: 0,
    queuedPrefillTokens: 0,
    activeBlocks: 0,
    activeMatchBlocks: 0,
    indexBlocks: 0,
    kvCapacityTokens: 500_000,
    running: 0,
    waiting: 0,
    kvUsage: 0,
    ...over,
  };
}

function input(candidates: Candidate[], over: Partial<PolicyInput["request"]> = {}, seed = 7): PolicyInput {
  const hashes = Array.from({ length: 79 }, (_, i) => `${over.sessionKey ?? "k"}-${i}`.padEnd(16, "0"));
  return {
    candidates,
    request: { hashes, promptTokens: PROMPT, blockTokens: BLOCK, sessionKey: undefined, sessionNode: undefined, ...over },
    random: seededRandom(seed),
  };
}

const makePolicy = (spec: object) => createPolicy(parsePolicySpec(spec));

const pick = (name: PolicyName, i: PolicyInput) => {
  const c = makePolicy({ name }).choose(i);
  return { id: i.candidates[c.index]!.id, decision: c.decision };
};

describe("warmpath", () => {
  it("spills a prefix off a busy holder at light load, and keeps it there near saturation", () => {
    // a holds 70 of the prompt's blocks but has 2 s of prefill queued; b is idle and holds nothing.
    const busyHolder = (recent: number) => [
      node("a", { matchBlocks: 70, workAheadTokens: 20_000, recentPrefillTokens: recent }),
      node("b", { recentPrefillTokens: recent }),
    ];
    // Light load: b answers in 1 s against a's 2.1 s.
    expect(pick("warmpath", input(busyHolder(0)))).toEqual({ id: "b", decision: "hot-spill" });
    // 95% of each node's prefill capacity used over the last minute: recomputing the prefix on b
    // would delay everyone queued after it, so the holder wins.
    expect(pick("warmpath", input(busyHolder(0.95 * 60 * 10_000)))).toEqual({ id: "a", decision: "prefix-hit" });
  });

  it("prefers the longest believed prefix on idle nodes", () => {
    expect(pick("warmpath", input([node("a"), node("b", { matchBlocks: 40 }), node("c", { matchBlocks: 10 })]))).toEqual({
      id: "b",
      decision: "prefix-hit",
    });
  });

  it("spills when the holder's queue costs more than the prefill it saves", () => {
    // b saves 5,120 tokens of prefill but has 30,000 tokens queued.
    const r = pick("warmpath", input([node("a", { workAheadTokens: 1_000 }), node("b", { matchBlocks: 40, workAheadTokens: 30_000 })]));
    expect(r).toEqual({ id: "a", decision: "hot-spill" });
  });

  it("stays on the holder while its queue is shorter than the saving", () => {
    const r = pick("warmpath", input([node("a", { workAheadTokens: 1_000 }), node("b", { matchBlocks: 40, workAheadTokens: 4_000 })]));
    expect(r).toEqual({ id: "b", decision: "prefix-hit" });
  });

  it("measures load as work, not request count", () => {
    // a has 50 requests decoding but nothing to prefill; b has one huge cold prompt queued.
    const r = pick(
      "warmpath",
      input([node("a", { inflight: 50, activeTokens: 500_000, matchBlocks: 1 }), node("b", { inflight: 1, workAheadTokens: 100_000 })]),
    );
    expect(r.id).toBe("a");
  });

  it("places cold requests by consistent hashing: repeats converge, distinct prompts spread", () => {
    const nodes = ["a", "b", "c", "d"].map((id) => node(id));
    const first = pick("warmpath", input(nodes, { sessionKey: "p1" }));
    expect(first.decision).toBe("cold-spread");
    expect(pick("warmpath", input(nodes, { sessionKey: "p1" })).id).toBe(first.id);
    const spread = new Set(Array.from({ length: 40 }, (_, i) => pick("warmpath", input(nodes, { sessionKey: `p${i}` })).id));
    expect(spread.size).toBe(4);
  });

  it("bounds cold load: a key's first choice is skipped when it is busier than the least loaded node", () => {
    const nodes = ["a", "b", "c", "d"].map((id) => node(id));
    const first = pick("warmpath", input(nodes, { sessionKey: "hot-key" })).id;
    const loaded = nodes.map((n) => (n.id === first ? { ...n, workAheadTokens: 5_000 } : n));
    const next = pick("warmpath", input(loaded, { sessionKey: "hot-key" }));
    expect(next.id).not.toBe(first);
    expect(next.decision).toBe("cold-spread");
  });

  it("with load_factor, uses the classic bound: up to load_factor x the mean work", () => {
    const classic = makePolicy({ name: "warmpath", load_factor: 1.25 });
    const nodes = ["a", "b", "c", "d"].map((id) => node(id, { workAheadTokens: 10_000 }));
    const first = nodes[classic.choose(input(nodes, { sessionKey: "k2" })).index]!.id;
    // 20% above the mean (within 1.25x, counting the request): still the key's node.
    const busier = nodes.map((n) => (n.id === first ? { ...n, workAheadTokens: 14_000 } : n));
    expect(busier[classic.choose(input(busier, { sessionKey: "k2" })).index]!.id).toBe(first);
    // Far above: skipped.
    const hot = nodes.map((n) => (n.id === first ? { ...n, workAheadTokens: 40_000 } : n));
    expect(hot[classic.choose(input(hot, { sessionKey: "k2" })).index]!.id).not.toBe(first);
  });

  it("breaks a tie toward the node given less prefill work lately", () => {
    const nodes = ["a", "b", "c", "d"].map((id) => node(id, { recentPrefillTokens: 50_000 }));
    const first = pick("warmpath", input(nodes, { sessionKey: "tie" })).id;
    // Equal estimates now (idle nodes, no match), but another node has done far less work lately.
    const other = nodes.find((n) => n.id !== first)!.id;
    const lighter = nodes.map((n) => (n.id === other ? { ...n, recentPrefillTokens: 1_000 } : n));
    expect(pick("warmpath", input(lighter, { sessionKey: "tie" })).id).toBe(other);
    // A longer match still wins over lighter recent work.
    const holder = lighter.map((n) => (n.id === first ? { ...n, matchBlocks: 2 } : n));
    expect(pick("warmpath", input(holder, { sessionKey: "tie" })).id).toBe(first);
  });

  it("labels a prefix held by every candidate as a hit", () => {
    expect(pick("warmpath", input([node("a", { matchBlocks: 3 }), node("b", { matchBlocks: 3 })])).decision).toBe("prefix-hit");
    expect(pick("warmpath", input([node("only", { matchBlocks: 3 })])).decision).toBe("prefix-hit");
  });

  it("uses the session hint to break a tie, not to pin", () => {
    const tie = [node("a", { matchBlocks: 40 }), node("b", { matchBlocks: 40 }), node("c")];
    // Equal holders only for the tie-break; a very busy session node is not chosen.
    const hinted = pick("warmpath", input(tie, { sessionNode: "b" }));
    expect(hinted.id).toBe("b");
    const busy = [node("a", { matchBlocks: 40 }), node("b", { matchBlocks: 40, workAheadTokens: 50_000 }), node("c")];
    expect(pick("warmpath", input(busy, { sessionNode: "b" })).id).toBe("a");
  });

  it("discounts a node under KV pressure", () => {
    const r = pick("warmpath", input([node("a", { matchBlocks: 30 }), node("b", { matchBlocks: 40, kvUsage: 0.99 })]));
    expect(r.id).toBe("a");
  });
});

describe("baselines", () => {
  const four = () => ["a", "b", "c", "d"].map((id) => node(id));

  it("round-robin cycles", () => {
    const rr = makePolicy({ name: "round-robin" });
    const ids = Array.from({ length: 8 }, () => four()[rr.choose(input(four())).index]!.id);
    expect(ids).toEqual(["a", "b", "c", "d", "a", "b", "c", "d"]);
  });

  it("random covers every node, reproducibly for a seed", () => {
    const rnd = makePolicy({ name: "random" });
    const i = input(four());
    const ids = new Set(Array.from({ length: 50 }, () => rnd.choose(i).index));
    expect(ids.size).toBe(4);
  });

  it("least-loaded (two choices) never picks the busier of its two samples", () => {
    const nodes = [node("a", { inflight: 9 }), node("b", { inflight: 0 })];
    for (let s = 0; s < 20; s++) expect(pick("least-loaded", input(nodes, {}, s)).id).toBe("b");
  });

  it("sticky pins a session whatever its load or cache", () => {
    const nodes = four();
    const home = pick("sticky", input(nodes, { sessionKey: "user-9" })).id;
    const loaded = nodes.map((n) => (n.id === home ? { ...n, workAheadTokens: 1e9 } : { ...n, matchBlocks: 50 }));
    expect(pick("sticky", input(loaded, { sessionKey: "user-9" }))).toEqual({ id: home, decision: "session" });
  });

  it("consistent-hash keys on the first block and bounds in-flight load", () => {
    const nodes = four();
    const first = pick("consistent-hash", input(nodes));
    const again = pick("consistent-hash", input(nodes));
    expect(again.id).toBe(first.id);
    const loaded = nodes.map((n) => (n.id === first.id ? { ...n, inflight: 10 } : n));
    const spilled = pick("consistent-hash", input(loaded));
    expect(spilled.id).not.toBe(first.id);
    expect(spilled.decision).toBe("hot-spill");
  });

  it("sglang follows the cache above the threshold, the least loaded below it and when imbalanced", () => {
    // 40 blocks of a 10,000-token prompt = 51%: above 0.3, and load is not consulted.
    expect(pick("sglang-cache-aware", input([node("a"), node("b", { matchBlocks: 40, inflight: 30 })]))).toEqual({
      id: "b",
      decision: "prefix-hit",
    });
    // 10 blocks = 13%: a miss goes to the fewest in flight (not the smallest tree).
    expect(
      pick(
        "sglang-cache-aware",
        input([node("a", { indexBlocks: 5, inflight: 9 }), node("b", { matchBlocks: 10, indexBlocks: 900, inflight: 3 })]),
      ),
    ).toEqual({ id: "b", decision: "cold-spread" });
    // Equal load: fewer processed requests, then the lower index.
    expect(pick("sglang-cache-aware", input([node("a", { dispatched: 7 }), node("b", { dispatched: 2 })])).id).toBe("b");
    expect(pick("sglang-cache-aware", input([node("a", { dispatched: 2 }), node("b", { dispatched: 2 })])).id).toBe("a");
    // Imbalanced: 100 vs 10 in flight (diff > 64 and 100 > 1.5 x 10): least loaded, cache ignored.
    expect(pick("sglang-cache-aware", input([node("a", { inflight: 10 }), node("b", { matchBlocks: 79, inflight: 100 })]))).toEqual({
      id: "a",
      decision: "balance",
    });
    // Busy but balanced by its thresholds (diff 50 <= 64): still follows the cache.
    expect(pick("sglang-cache-aware", input([node("a", { inflight: 10 }), node("b", { matchBlocks: 79, inflight: 60 })])).id).toBe("b");
    // Several holders of the deepest match: the one most recently sent a request (SGLang's last tenant).
    expect(
      pick(
        "sglang-cache-aware",
        input([node("a", { matchBlocks: 40, lastDispatchAt: 5 }), node("b", { matchBlocks: 40, lastDispatchAt: 9 })]),
      ).id,
    ).toBe("b");
  });

  it("sglang-smallest-tree sends a miss to the smallest tree, whatever its load", () => {
    expect(
      pick(
        "sglang-smallest-tree",
        input([node("a", { indexBlocks: 5, inflight: 9 }), node("b", { matchBlocks: 10, indexBlocks: 900, inflight: 3 })]),
      ),
    ).toEqual({ id: "a", decision: "cold-spread" });
    // Equal trees (every tree full): the first one, which is how that generation piles misses up.
    expect(pick("sglang-smallest-tree", input([node("a", { indexBlocks: 9, inflight: 50 }), node("b", { indexBlocks: 9 })])).id).toBe("a");
  });

  it("sglang trees are bounded by max_tree_size characters, not by the node's KV capacity", () => {
    const policy = makePolicy({ name: "sglang-cache-aware" });
    expect(policy.indexCapacityTokens?.(500_000)).toBe(2 ** 26 / 4);
    expect(makePolicy({ name: "warmpath" }).indexCapacityTokens).toBeUndefined();
  });

  it("dynamo-kv minimises queued-plus-new prefill blocks less the overlap, plus active blocks", () => {
    expect(pick("dynamo-kv", input([node("a"), node("b", { matchBlocks: 40 })])).id).toBe("b");
    // b's cached overlap (40 blocks) is outweighed by 60 more distinct active blocks.
    expect(pick("dynamo-kv", input([node("a"), node("b", { matchBlocks: 40, activeBlocks: 60 })])).id).toBe("a");
    // ... or by prefill already queued on b (active prefill tokens, 50 blocks' worth).
    expect(pick("dynamo-kv", input([node("a"), node("b", { matchBlocks: 40, queuedPrefillTokens: 50 * BLOCK })])).id).toBe("a");
    // Blocks already active on b (a request sharing this prompt in flight) are not counted again.
    expect(pick("dynamo-kv", input([node("a", { activeBlocks: 30 }), node("b", { activeBlocks: 30, activeMatchBlocks: 30 })])).id).toBe(
      "b",
    );
    // Exact ties are broken at random, so they spread.
    const seen = new Set<string>();
    for (let seed = 1; seed <= 20; seed++) seen.add(pick("dynamo-kv", input([node("a"), node("b"), node("c")], {}, seed)).id);
    expect(seen.size).toBe(3);
  });
});
