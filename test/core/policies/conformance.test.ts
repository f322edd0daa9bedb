/**
 * The contract every policy in the registry must meet, generated per POLICY_NAMES entry: a policy
 * added to the registry is tested here without a line of test code. Behaviour that defines one
 * policy belongs in policies.test.ts; this file holds what they all share.
 */
import { describe, expect, it } from "vitest";
import {
  createPolicy,
  parsePolicySpec,
  policySpecSchema,
  POLICY_NAMES,
  type Candidate,
  type PolicyInput,
  type PolicyName,
} from "../../../src/core/policies/index.ts";
import { DECISIONS } from "../../../src/core/policies/types.ts";
import { seededRandom } from "../../../src/core/random.ts";
import { DEFAULT_REGION_SETTINGS, RegionRouter } from "../../../src/core/region/index.ts";

const BLOCK = 128;
const hashes = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`.padEnd(16, "0").slice(0, 16));

/** A varied, reproducible candidate set: 1 to 6 nodes with random matches, queues and loads. */
function randomInput(rnd: () => number, random: () => number): PolicyInput {
  const n = 1 + Math.floor(rnd() * 6);
  const promptBlocks = 1 + Math.floor(rnd() * 80);
  const promptTokens = promptBlocks * BLOCK;
  const candidates: Candidate[] = Array.from({ length: n }, (_, i) => {
    const matchBlocks = Math.floor(rnd() * (promptBlocks + 1));
    const matchTokens = matchBlocks * BLOCK;
    return {
      id: `node-${i}`,
      matchBlocks,
      matchTokens,
      uncachedTokens: promptTokens - matchTokens,
      workAheadTokens: Math.floor(rnd() * 50_000),
      recentPrefillTokens: Math.floor(rnd() * 100_000),
      prefillRate: 5_000 + Math.floor(rnd() * 10_000),
      inflight: Math.floor(rnd() * 200),
      dispatched: Math.floor(rnd() * 5_000),
      lastDispatchAt: rnd() < 0.1 ? -Infinity : Math.floor(rnd() * 100_000),
      activeTokens: Math.floor(rnd() * 400_000),
      queuedPrefillTokens: Math.floor(rnd() * 50_000),
      activeBlocks: Math.floor(rnd() * 3_000),
      activeMatchBlocks: Math.floor(rnd() * (promptBlocks + 1)),
      indexBlocks: Math.floor(rnd() * 4_000),
      kvCapacityTokens: 500_000,
      running: Math.floor(rnd() * 64),
      waiting: Math.floor(rnd() * 16),
      kvUsage: rnd(),
    };
  });
  const session = rnd() < 0.5 ? `user-${Math.floor(rnd() * 10)}` : undefined;
  return {
    candidates,
    request: {
      hashes: hashes(`p${Math.floor(rnd() * 20)}`, promptBlocks),
      promptTokens,
      blockTokens: BLOCK,
      sessionKey: session,
      sessionNode: session !== undefined && rnd() < 0.5 ? candidates[Math.floor(rnd() * n)]!.id : undefined,
    },
    random,
  };
}

const fresh = (name: PolicyName) => createPolicy(parsePolicySpec({ name }));

/** Choices of a fresh instance over a sequence of inputs, all from `seed`. */
function choices(name: PolicyName, seed: number, count: number): Array<{ index: number; decision: string }> {
  const policy = fresh(name);
  const rnd = seededRandom(seed);
  const random = seededRandom(seed + 1);
  return Array.from({ length: count }, () => policy.choose(randomInput(rnd, random)));
}

describe.each(POLICY_NAMES)("policy conformance: %s", (name) => {
  it("is named as in the registry", () => {
    expect(fresh(name).name).toBe(name);
  });

  it("returns a valid candidate index and a decision a policy may give", () => {
    const policy = fresh(name);
    const rnd = seededRandom(11);
    const random = seededRandom(12);
    for (let k = 0; k < 300; k++) {
      const input = randomInput(rnd, random);
      const { index, decision } = policy.choose(input);
      expect(Number.isInteger(index)).toBe(true);
      expect(index).toBeGreaterThanOrEqual(0);
      expect(index).toBeLessThan(input.candidates.length);
      expect(DECISIONS).toContain(decision);
      // `retry` is the router's label and `failover` the worker's; a policy never gives them.
      expect(["retry", "failover"]).not.toContain(decision);
    }
  });

  it("handles a single candidate", () => {
    const rnd = seededRandom(21);
    const random = seededRandom(22);
    for (let k = 0; k < 50; k++) {
      const input = randomInput(rnd, random);
      const single = { ...input, candidates: input.candidates.slice(0, 1) };
      expect(fresh(name).choose(single).index).toBe(0);
    }
  });

  it("is deterministic under a seed: fresh instances, same inputs, same choices", () => {
    const a = choices(name, 31, 200);
    expect(choices(name, 31, 200)).toEqual(a);
  });

  it("never picks an unavailable node (cooling down, excluded, at its in-flight limit, silent)", () => {
    const now = 10_000;
    const r = new RegionRouter({
      ...DEFAULT_REGION_SETTINGS,
      name: "conformance",
      blockTokens: BLOCK,
      policy: parsePolicySpec({ name }),
      nodeSilenceMs: 5_000,
      failureCooldownMs: 60_000,
      maxInflightPerNode: 2,
    });
    const ids = ["cooling", "excluded", "free-a", "free-b", "full", "silent"];
    for (const id of ids) {
      const lastSeen = id === "silent" ? 0 : now;
      r.upsertNode({ id, url: `http://${id}`, models: ["m"], kvCapacityTokens: 1_000_000, static: false, lastSeen }, lastSeen);
    }
    const hot = hashes("hot", 40);
    // Sends a request holding the hot prefix to one node (every other node excluded).
    const sendTo = (id: string) => {
      const res = r.route({ requestId: id, model: "m", hashes: hot, promptTokens: 40 * BLOCK, exclude: ids.filter((o) => o !== id) }, now);
      if (!res.ok || res.nodeId !== id) throw new Error(`setup: expected ${id}, got ${JSON.stringify(res)}`);
      return res.ticket;
    };
    // The unavailable nodes are made the most attractive: they hold the prefix the probes share.
    r.complete(sendTo("cooling"), { status: "failed" }, now);
    r.complete(sendTo("excluded"), { status: "ok" }, now);
    sendTo("full");
    sendTo("full");
    const snapshot = r.snapshot(now).nodes;
    expect(snapshot.find((n) => n.id === "cooling")!.available).toBe(false);
    expect(snapshot.find((n) => n.id === "silent")!.available).toBe(false);
    expect(snapshot.find((n) => n.id === "full")!.load.inflight).toBe(2);

    const chosen = new Set<string>();
    for (let k = 0; k < 60; k++) {
      const res = r.route(
        {
          requestId: `probe-${k}`,
          model: "m",
          hashes: [...hot, ...hashes(`probe-${k % 7}`, 10)],
          promptTokens: 50 * BLOCK,
          sessionKey: k % 3 === 0 ? `user-${k % 5}` : undefined,
          exclude: ["excluded"],
        },
        now + k,
      );
      if (!res.ok) throw new Error(res.message);
      chosen.add(res.nodeId);
      r.firstByte(res.ticket, now + k);
      r.complete(res.ticket, { status: "ok" }, now + k);
    }
    expect([...chosen].every((id) => id === "free-a" || id === "free-b")).toBe(true);
  });
});

describe("parsePolicySpec", () => {
  it("fills each policy's defaults", () => {
    expect(parsePolicySpec({ name: "warmpath" })).toEqual({ name: "warmpath", tie_tolerance_seconds: 0.05, kv_pressure_threshold: 0.95 });
    expect(parsePolicySpec({ name: "consistent-hash" })).toEqual({ name: "consistent-hash", load_factor: 1.25 });
    // The anchors' published defaults (cited at the top of each policy's file).
    for (const name of ["sglang-cache-aware", "sglang-smallest-tree"] as const) {
      expect(parsePolicySpec({ name })).toEqual({
        name,
        cache_threshold: 0.3,
        balance_abs_threshold: 64,
        balance_rel_threshold: 1.5,
        max_tree_size: 2 ** 26,
      });
    }
    expect(parsePolicySpec({ name: "dynamo-kv" })).toEqual({ name: "dynamo-kv", prefill_load_scale: 1 });
    expect(parsePolicySpec({ name: "round-robin" })).toEqual({ name: "round-robin" });
    expect(parsePolicySpec({ name: "warmpath", load_factor: 2 })).toMatchObject({ load_factor: 2, tie_tolerance_seconds: 0.05 });
  });

  it("rejects an unknown option, naming it", () => {
    expect(() => parsePolicySpec({ name: "warmpath", load_facter: 1.2 })).toThrow(/load_facter/);
  });

  it("rejects another policy's option, naming it", () => {
    expect(() => parsePolicySpec({ name: "warmpath", cache_threshold: 0.5 })).toThrow(/cache_threshold/);
    expect(() => parsePolicySpec({ name: "round-robin", load_factor: 1.5 })).toThrow(/load_factor/);
  });

  it("rejects an out-of-range option and an unknown policy", () => {
    expect(() => parsePolicySpec({ name: "consistent-hash", load_factor: 0.5 })).toThrow();
    expect(() => parsePolicySpec({ name: "warmpath", kv_pressure_threshold: 2 })).toThrow();
    expect(() => parsePolicySpec({ name: "nearest" })).toThrow();
  });

  it("describes every option (the configuration reference is generated from it)", () => {
    for (const option of policySpecSchema.options) {
      for (const [key, field] of Object.entries(option.shape)) {
        if (key !== "name") expect(field.description, `${option.shape.name.value}.${key}`).toBeTruthy();
      }
    }
  });
});
