import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { AGENTIC, agenticPrompt, generateAgentic, planAgentic, type AgenticConfig } from "../workloads/agentic.ts";
import { engineBlocks } from "../workloads/generator.ts";
import { prefixKey, DEFAULT_PREFIX_SETTINGS } from "../../src/core/prefix.ts";
import { baseBlocksBefore } from "../../src/core/block-layout.ts";
import { canonicalText, type CanonicalMessage } from "../../src/core/canonical.ts";
import type { BenchRequest, Workload } from "../workloads/types.ts";
import { commonPrefix } from "./helpers.ts";
import { percentile } from "../../src/core/stats.ts";

const CHARS = DEFAULT_PREFIX_SETTINGS.charsPerToken; // 4
const ROUTER_BLOCK_CHARS = DEFAULT_PREFIX_SETTINGS.blockChars; // 512
const ENGINE_BLOCK_CHARS = 64 * CHARS; // 256

/** A quick slice: the default model, fewer and shorter-lived sessions, three tenants. */
const SMALL: AgenticConfig = { ...AGENTIC, name: "small-agentic", durationSeconds: 400, sessionsPerSecond: 0.04, tenants: 3 };

/**
 * The default sessions, started eight times further apart: a session's draws do not depend on
 * the start rate, so these are the first sessions of the default workload, and over 2,400 s
 * most of them run to their end. A few hundred requests, so the test stays quick.
 */
const SPARSE: AgenticConfig = { ...AGENTIC, sessionsPerSecond: AGENTIC.sessionsPerSecond / 8 };

let small: Workload | undefined;
const smallWorkload = () => (small ??= generateAgentic(SMALL));
let sparse: Workload | undefined;
const sparseWorkload = () => (sparse ??= generateAgentic(SPARSE));

/** Router blocks a prompt of `tokens` is cut into (the block layout of src/core/block-layout.ts). */
function routerBlocks(tokens: number): number {
  // Canonical characters are in (4 (tokens - 1), 4 tokens], and blocks end on multiples of 512.
  const base = Math.ceil((tokens * CHARS) / ROUTER_BLOCK_CHARS);
  let depth = 0;
  while (baseBlocksBefore(depth) < base) depth++;
  return Math.min(DEFAULT_PREFIX_SETTINGS.maxBlocks, depth);
}

const tenantOf = (r: BenchRequest) => Number(r.sessionKey!.split("/")[0]!.slice(1));

function bySession(requests: readonly BenchRequest[]): Map<string, BenchRequest[]> {
  const m = new Map<string, BenchRequest[]>();
  for (const r of requests) {
    const list = m.get(r.sessionKey!) ?? [];
    list.push(r);
    m.set(r.sessionKey!, list);
  }
  return m;
}

describe("agentic workload", () => {
  test("deterministic for a seed, different for another", () => {
    const a = smallWorkload();
    assert.deepEqual(generateAgentic(SMALL), a);
    const c = generateAgentic({ ...SMALL, seed: SMALL.seed + 1 });
    assert.notDeepEqual(
      c.requests.map((r) => r.hashes),
      a.requests.map((r) => r.hashes),
    );
  });

  test("requests are in arrival order within the window, ids sequential, sizes consistent", () => {
    const w = smallWorkload();
    assert.equal(w.name, "small-agentic");
    assert.equal(w.trueBlockTokens, 64);
    assert.ok(w.requests.length >= 100, `only ${w.requests.length} requests`);
    let last = -Infinity;
    w.requests.forEach((r, i) => {
      assert.equal(r.id, i);
      assert.ok(r.arrival >= last && r.arrival >= 0 && r.arrival < SMALL.durationSeconds * 1000, `arrival of request ${i}`);
      last = r.arrival;
      // Router and engine blocks cut the same canonical text: 512 and 256 characters.
      assert.equal(r.trueBlocks.length, Math.ceil(r.promptTokens / 64));
      assert.equal(r.hashes.length, routerBlocks(r.promptTokens));
      assert.ok(r.outputTokens >= SMALL.outputTokens[0] && r.outputTokens <= SMALL.outputTokens[1]);
      assert.ok(r.promptTokens >= SMALL.preambleTokens[0] && r.promptTokens <= SMALL.maxContextTokens);
      assert.match(r.sessionKey!, /^t\d+\/s\d+$/);
    });
  });

  test("a shorter window gives the same sessions and turns, cut at the window", () => {
    const full = smallWorkload();
    const cut = generateAgentic(SMALL, { durationSeconds: 150 });
    const expected = full.requests.filter((r) => r.arrival < 150_000).map((r, id) => ({ ...r, id }));
    assert.ok(expected.length > 10 && expected.length < full.requests.length);
    assert.deepEqual(cut.requests, expected);
  });

  test("each turn's prompt extends the previous turn's prompt and answer, for the router and the engine", () => {
    const w = smallWorkload();
    const newPartMin = Math.min(SMALL.toolOutputTokens[0], SMALL.userMessageTokens[0]);
    let followUps = 0;
    for (const turns of bySession(w.requests).values()) {
      for (let k = 1; k < turns.length; k++) {
        const prev = turns[k - 1]!;
        const next = turns[k]!;
        followUps++;
        assert.ok(next.arrival > prev.arrival);
        // Every full block of the previous prompt is a prefix of the next one's; only its
        // partial last block may differ.
        assert.ok(commonPrefix(prev.hashes, next.hashes) >= prev.hashes.length - 1, `router hashes, request ${next.id}`);
        assert.ok(commonPrefix(prev.trueBlocks, next.trueBlocks) >= prev.trueBlocks.length - 1, `engine blocks, request ${next.id}`);
        assert.ok(next.trueBlocks.length > prev.trueBlocks.length);
        // The previous answer (split over at most 4 tool calls, so up to 3 tokens short) and a
        // new part are appended.
        assert.ok(next.promptTokens >= prev.promptTokens + prev.outputTokens + newPartMin - 3, `request ${next.id} grows`);
      }
    }
    assert.ok(followUps >= 100, `only ${followUps} follow-up turns`);
  });

  test("a tenant's sessions share its preamble, and only it; different tenants share nothing", () => {
    const plan = planAgentic(SMALL);
    const w = smallWorkload();
    const firsts = [...bySession(w.requests).values()].map((turns) => turns[0]!);
    let sameTenant = 0;
    let otherTenant = 0;
    for (let i = 0; i < firsts.length; i++) {
      for (let j = 0; j < i; j++) {
        const a = firsts[i]!;
        const b = firsts[j]!;
        const engine = commonPrefix(a.trueBlocks, b.trueBlocks);
        const router = commonPrefix(a.hashes, b.hashes);
        if (tenantOf(a) !== tenantOf(b)) {
          otherTenant++;
          assert.equal(engine, 0);
          assert.equal(router, 0);
          continue;
        }
        sameTenant++;
        const preamble = plan.preambleTokens[tenantOf(a)]! * CHARS;
        // The preamble's texts alone are preambleTokens long; its rendering adds JSON per tool.
        const rendered = preamble + 200 * plan.tools[tenantOf(a)]! + 200;
        assert.ok(engine >= Math.floor(preamble / ENGINE_BLOCK_CHARS), `engine blocks ${a.id},${b.id}: ${engine}`);
        assert.ok(engine <= Math.ceil(rendered / ENGINE_BLOCK_CHARS), `engine blocks ${a.id},${b.id}: ${engine}, past the preamble`);
        assert.ok(router >= Math.floor(preamble / ROUTER_BLOCK_CHARS), `router hashes ${a.id},${b.id}: ${router}`);
        assert.ok(router <= Math.ceil(rendered / ROUTER_BLOCK_CHARS), `router hashes ${a.id},${b.id}: ${router}, past the preamble`);
      }
    }
    assert.ok(sameTenant >= 10 && otherTenant >= 10, `${sameTenant} same-tenant and ${otherTenant} cross-tenant pairs`);
  });

  test("prompts are OpenAI-style agent transcripts: tools, system, task, tool calls and tool results", () => {
    const plan = planAgentic(SMALL);
    const w = smallWorkload();
    const s = plan.sessions.find((x) => x.arrivals.length >= 10 && x.arrivals[9]! < SMALL.durationSeconds * 1000)!;
    assert.ok(s, "a session with 10 turns in the window");
    const prompt = agenticPrompt(plan, s, 9);
    assert.equal(prompt.kind, "chat");
    if (prompt.kind !== "chat") return;
    assert.equal((prompt.tools as unknown[]).length, plan.tools[s.tenant]);
    assert.deepEqual(
      prompt.messages.slice(0, 2).map((m) => m.role),
      ["system", "user"],
    );
    // Every tool result answers a call of the assistant message before it.
    const open = new Set<string>();
    let toolResults = 0;
    for (const m of prompt.messages as CanonicalMessage[]) {
      if (m.role === "assistant" && m.tool_calls) for (const c of m.tool_calls as Array<{ id: string }>) open.add(c.id);
      if (m.role === "tool") {
        assert.ok(open.delete(m.tool_call_id!), `tool result ${m.tool_call_id} answers a call`);
        toolResults++;
      }
    }
    assert.equal(open.size, 0);
    assert.ok(toolResults >= 5, `${toolResults} tool results in 10 turns`);
    // The generated request is this prompt, through the production path.
    const req = w.requests.find((r) => r.sessionKey === `t${s.tenant}/s${s.id}` && r.arrival === s.arrivals[9])!;
    assert.deepEqual(
      req.hashes,
      prefixKey(prompt, { model: "bench-model", namespace: `tenant-${s.tenant}` }, DEFAULT_PREFIX_SETTINGS).hashes,
    );
    assert.deepEqual(req.trueBlocks, engineBlocks(canonicalText(prompt)));
    // Across the plan: parallel tool calls and hand-backs to the human both occur.
    const steps = plan.sessions.flatMap((x) => x.steps.slice(1));
    assert.ok(steps.some((x) => x.calls.length >= 2));
    assert.ok(steps.some((x) => x.human && x.calls.length === 0 && x.userTokens > 0));
  });

  test("long context: many prompts of 100k+ tokens, none past the cap", () => {
    const w = sparseWorkload();
    const tokens = w.requests.map((r) => r.promptTokens);
    const long = tokens.filter((t) => t >= 100_000).length;
    assert.ok(w.requests.length >= 200, `${w.requests.length} requests`);
    assert.ok(long >= 0.15 * tokens.length, `${long} of ${tokens.length} prompts >= 100k tokens`);
    assert.ok(Math.max(...tokens) > 150_000);
    assert.ok(Math.max(...tokens) <= SPARSE.maxContextTokens);
    // Consecutive turns of a long session share all but the previous prompt's last block, for
    // the router (whose blocks grow along long prompts) as for the engine.
    let longFollowUps = 0;
    for (const turns of bySession(w.requests).values()) {
      for (let k = 1; k < turns.length; k++) {
        const prev = turns[k - 1]!;
        if (prev.promptTokens < 100_000) continue;
        longFollowUps++;
        const shared = baseBlocksBefore(commonPrefix(prev.hashes, turns[k]!.hashes)) * ROUTER_BLOCK_CHARS;
        assert.ok(shared >= 0.99 * prev.promptTokens * CHARS, `request ${turns[k]!.id}: router prefix ${shared} chars`);
      }
    }
    assert.ok(longFollowUps >= 20, `${longFollowUps} follow-ups of 100k+ prompts`);
  });

  test("pauses between turns span seconds to minutes", () => {
    const gaps: number[] = [];
    for (const turns of bySession(sparseWorkload().requests).values()) {
      for (let k = 1; k < turns.length; k++) gaps.push((turns[k]!.arrival - turns[k - 1]!.arrival) / 1000);
    }
    gaps.sort((a, b) => a - b);
    const median = percentile(gaps, 0.5);
    assert.ok(gaps[0]! < 3, `shortest pause ${gaps[0]} s`);
    assert.ok(median >= 8 && median <= 25, `median pause ${median} s`);
    assert.ok(gaps[gaps.length - 1]! > 180, `longest pause ${gaps[gaps.length - 1]} s`);
  });
});
