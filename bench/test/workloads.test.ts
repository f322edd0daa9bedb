import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { closeSync, existsSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { loadMooncake } from "../workloads/mooncake.ts";
import { CHAT_HEAVY, MIX, TEMPLATE_HEAVY, engineBlocks, generate, generateMix, type GeneratorConfig } from "../workloads/generator.ts";
import { entityText, KIND } from "../text.ts";
import { hashCanonicalText, DEFAULT_PREFIX_SETTINGS } from "../../src/core/prefix.ts";
import { namespaceSeed } from "../../src/core/canonical.ts";
import type { BenchRequest } from "../workloads/types.ts";
import { commonPrefix } from "./helpers.ts";
import { baseBlocksBefore } from "../../src/core/block-layout.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const TRACE = resolve(HERE, "..", "..", "..", "shared", "traces", "mooncake_conversation_trace.jsonl");
const ROUTER_BLOCK_CHARS = DEFAULT_PREFIX_SETTINGS.blockChars; // 512
const TRACE_BLOCK_CHARS = 512 * DEFAULT_PREFIX_SETTINGS.charsPerToken; // 2048

/** Router blocks for a text of `chars` characters: fixed blocks, then doubling (src/core/block-layout.ts). */
function routerBlocks(chars: number): number {
  let k = 0;
  while (baseBlocksBefore(k) * ROUTER_BLOCK_CHARS < chars) k++;
  return k;
}

describe("entityText", () => {
  test("same entity, same text; a shorter length is a prefix; kinds and ids differ", () => {
    const a = entityText(KIND.traceBlock, 42, 2048);
    assert.equal(a.length, 2048);
    assert.equal(entityText(KIND.traceBlock, 42, 2048), a);
    assert.equal(entityText(KIND.traceBlock, 42, 700), a.slice(0, 700));
    assert.equal(entityText(KIND.traceBlock, 42, 0), "");
    assert.notEqual(entityText(KIND.traceBlock, 43, 2048).slice(0, 512), a.slice(0, 512));
    assert.notEqual(entityText(KIND.document, 42, 2048).slice(0, 512), a.slice(0, 512));
    // Ids past 2^32 are distinct too.
    assert.notEqual(entityText(KIND.answer, 2 ** 32 + 5, 512), entityText(KIND.answer, 5, 512));
  });
});

describe("Mooncake workload", () => {
  let dir = "";
  const lines = [
    { timestamp: 0, input_length: 1500, output_length: 10, hash_ids: [0, 1, 2] }, // 6000 chars: 2048 + 2048 + 1904
    { timestamp: 5, input_length: 1200, output_length: 0, hash_ids: [0, 1, 7] }, // 4800 chars: diverges at id 7
    { timestamp: 9, input_length: 700, output_length: 3, hash_ids: [0, 1] }, // 2800 chars: a prefix of line 0's text
    { timestamp: 12, input_length: 1100, output_length: 4, hash_ids: [0, 1] }, // 4400 chars: ids cover 4096, padded
  ];
  let path = "";
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "bench-mooncake-"));
    path = join(dir, "trace.jsonl");
    writeFileSync(path, lines.map((l) => JSON.stringify(l)).join("\n") + "\n\n");
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("fleet view is the trace itself: ids, lengths, timestamps", () => {
    const w = loadMooncake({ path });
    assert.equal(w.name, "mooncake");
    assert.equal(w.trueBlockTokens, 512);
    assert.equal(w.requests.length, 4);
    w.requests.forEach((r, i) => {
      const l = lines[i]!;
      assert.equal(r.id, i);
      assert.equal(r.arrival, l.timestamp);
      assert.equal(r.promptTokens, l.input_length);
      assert.deepEqual(r.trueBlocks, l.hash_ids);
      assert.equal(r.outputTokens, Math.max(1, l.output_length));
      // A conversation is named by its first two ids (block 0 is shared by every request).
      assert.equal(r.sessionKey, `${l.hash_ids[0]}/${l.hash_ids[1]}`);
      assert.equal(r.hashes.length, Math.ceil((l.input_length * 4) / ROUTER_BLOCK_CHARS));
    });
  });

  test("router hashes are those of the id texts, via prefixKey's path", () => {
    const w = loadMooncake({ path });
    const text = entityText(KIND.traceBlock, 0, 2048) + entityText(KIND.traceBlock, 1, 2048) + entityText(KIND.traceBlock, 2, 1904);
    const expected = hashCanonicalText(text, namespaceSeed({ model: "bench-model", namespace: "mooncake" }), DEFAULT_PREFIX_SETTINGS);
    assert.deepEqual(w.requests[0]!.hashes, expected.hashes);
    assert.equal(expected.promptTokens, 1500);
  });

  test("shared id prefixes give shared router hash prefixes, and only those", () => {
    const [a, b, c, d] = loadMooncake({ path }).requests as [BenchRequest, BenchRequest, BenchRequest, BenchRequest];
    const perId = TRACE_BLOCK_CHARS / ROUTER_BLOCK_CHARS; // 4 router blocks per trace id
    assert.equal(commonPrefix(a.hashes, b.hashes), 2 * perId); // ids 0,1 shared, then 2 vs 7
    // c's text (2800 chars) is a prefix of a's: its 5 full blocks match, its partial 6th does not.
    assert.equal(commonPrefix(a.hashes, c.hashes), Math.floor(2800 / ROUTER_BLOCK_CHARS));
    // d is padded past its ids with request-unique text: ids 0,1 still match a's.
    assert.equal(commonPrefix(a.hashes, d.hashes), 2 * perId);
    assert.equal(d.promptTokens, 1100);
  });

  test("limit keeps the first requests", () => {
    const w = loadMooncake({ path, limit: 2 });
    assert.deepEqual(
      w.requests.map((r) => r.arrival),
      [0, 5],
    );
  });

  test("a slice of the real trace: lengths and shared prefixes line up", (t) => {
    if (!existsSync(TRACE)) {
      t.skip(`Mooncake trace not found at ${TRACE}`);
      return;
    }
    // Only the first 50 lines: read a bounded chunk, not the whole file.
    const fd = openSync(TRACE, "r");
    const buf = Buffer.alloc(256 * 1024);
    const n = readSync(fd, buf, 0, buf.length, 0);
    closeSync(fd);
    const head = buf.subarray(0, n).toString("utf8").split("\n").slice(0, 50);
    assert.equal(head.length, 50);
    const slice = join(dir, "slice.jsonl");
    writeFileSync(slice, head.join("\n") + "\n");
    const raw = head.map((l) => JSON.parse(l) as { input_length: number; hash_ids: number[] });
    const w = loadMooncake({ path: slice });
    assert.equal(w.requests.length, 50);
    let sharedPairs = 0;
    for (let i = 0; i < 50; i++) {
      const r = w.requests[i]!;
      assert.equal(r.promptTokens, raw[i]!.input_length);
      assert.equal(r.hashes.length, routerBlocks(raw[i]!.input_length * 4));
      for (let j = 0; j < i; j++) {
        const q = w.requests[j]!;
        const ids = commonPrefix(r.trueBlocks, q.trueBlocks);
        // Text shared by both: whole shared ids, as far as both prompts go.
        const sharedChars = Math.min(ids * TRACE_BLOCK_CHARS, r.promptTokens * 4, q.promptTokens * 4);
        const full = Math.floor(sharedChars / ROUTER_BLOCK_CHARS);
        const got = commonPrefix(r.hashes, q.hashes);
        assert.ok(got >= full, `requests ${j},${i}: ${ids} shared ids but ${got} shared hashes`);
        if (ids === 0) assert.equal(got, 0);
        if (full > 0) sharedPairs++;
      }
    }
    assert.ok(sharedPairs > 0, "the trace's first lines share prefixes");
  });
});

/** A quick generator config: one tenant, almost one session per user, no documents. */
const SMALL_CHAT: GeneratorConfig = {
  ...CHAT_HEAVY,
  name: "small-chat",
  seed: 5,
  durationSeconds: 60,
  sessionsPerSecond: 0.5,
  tenants: 1,
  usersPerTenant: 100_000,
  meanTurns: 4,
  thinkTimeSeconds: 5,
  documentProbability: 0,
};

function bySession(requests: readonly BenchRequest[]): Map<string, BenchRequest[]> {
  const m = new Map<string, BenchRequest[]>();
  for (const r of requests) {
    const k = r.sessionKey!;
    const list = m.get(k) ?? [];
    list.push(r);
    m.set(k, list);
  }
  return m;
}

describe("generated workloads", () => {
  test("deterministic for a seed, different for another", () => {
    const a = generate(SMALL_CHAT);
    const b = generate(SMALL_CHAT);
    assert.deepEqual(a, b);
    const c = generate({ ...SMALL_CHAT, seed: 6 });
    assert.notDeepEqual(
      c.requests.map((r) => r.hashes),
      a.requests.map((r) => r.hashes),
    );
  });

  test("the mix's seed offset draws the same tenants anew, deterministically, and a flood changes only its tenant", () => {
    const tenantsOf = (w: { requests: BenchRequest[] }) => [...new Set(w.requests.map((r) => `${r.tenant}:${r.priority}`))].sort();
    const base = generateMix(MIX, { durationSeconds: 60 });
    const again = generateMix(MIX, { durationSeconds: 60, seedOffset: 7 });
    assert.deepEqual(again, generateMix(MIX, { durationSeconds: 60, seedOffset: 7 }));
    assert.deepEqual(tenantsOf(again), tenantsOf(base));
    assert.match(again.description, /seeds \+7/);
    for (const tenant of MIX.tenants.map((t) => t.name)) {
      const arrivals = (w: { requests: BenchRequest[] }) => w.requests.filter((r) => r.tenant === tenant).map((r) => r.arrival);
      assert.notDeepEqual(arrivals(again), arrivals(base), `${tenant} drawn anew`);
    }
    // Each tenant keeps its own stream under an offset too: a flood of one leaves the others' requests as they were.
    const flooded = generateMix(MIX, { durationSeconds: 60, seedOffset: 7, rateFactor: { "rag-b": 5 } });
    const others = (w: { requests: BenchRequest[] }) =>
      w.requests.filter((r) => r.tenant !== "rag-b").map((r) => [r.tenant, r.arrival, r.promptTokens]);
    assert.deepEqual(others(flooded), others(again));
    assert.ok(flooded.requests.length > again.requests.length);
  });

  test("a flood after history: the tenant's own rate before its start, five times it after, the others unchanged", () => {
    const base = generateMix(MIX, { durationSeconds: 240 });
    const flooded = generateMix(MIX, { durationSeconds: 240, rateFactor: { "rag-b": 5 }, rateFactorFromSeconds: 120 });
    assert.match(flooded.description, /rag-b x5 from 120 s/);
    const key = (r: BenchRequest) => [r.tenant, r.arrival, r.promptTokens, r.hashes.join("")];
    // Before the start, every request is the unflooded mix's, the flooding tenant's included (its history).
    assert.deepEqual(
      flooded.requests.filter((r) => r.arrival < 120_000).map(key),
      base.requests.filter((r) => r.arrival < 120_000).map(key),
    );
    // The others are the same throughout; the flooder sends several times as much after the start.
    const others = (w: { requests: BenchRequest[] }) => w.requests.filter((r) => r.tenant !== "rag-b").map(key);
    assert.deepEqual(others(flooded), others(base));
    const after = (w: { requests: BenchRequest[] }) => w.requests.filter((r) => r.tenant === "rag-b" && r.arrival >= 120_000).length;
    assert.ok(after(flooded) > 3 * after(base), `${after(flooded)} vs ${after(base)}`);
  });

  test("requests are in arrival order within the window, with consistent sizes", () => {
    const w = generate(TEMPLATE_HEAVY, { durationSeconds: 10 });
    assert.equal(w.trueBlockTokens, 64);
    assert.ok(w.requests.length > 20);
    let last = -Infinity;
    w.requests.forEach((r, i) => {
      assert.equal(r.id, i);
      assert.ok(r.arrival >= last && r.arrival < 10_000);
      last = r.arrival;
      // Router and engine blocks cut the same text: 512 and 256 characters.
      assert.equal(r.trueBlocks.length, Math.ceil(r.promptTokens / 64));
      assert.equal(r.hashes.length, routerBlocks(r.promptTokens * 4));
      assert.ok(r.outputTokens >= TEMPLATE_HEAVY.answerTokens[0] && r.outputTokens <= TEMPLATE_HEAVY.answerTokens[1]);
    });
  });

  test("chat sessions grow: each turn's prompt extends the previous turn's prompt and answer", () => {
    const w = generate(SMALL_CHAT);
    let followUps = 0;
    for (const turns of bySession(w.requests).values()) {
      for (let k = 1; k < turns.length; k++) {
        const prev = turns[k - 1]!;
        const next = turns[k]!;
        followUps++;
        // The previous prompt's full blocks are a prefix of the next one's (its partial last block is not).
        assert.ok(commonPrefix(prev.hashes, next.hashes) >= prev.hashes.length - 1, `router hashes, request ${next.id}`);
        assert.ok(commonPrefix(prev.trueBlocks, next.trueBlocks) >= prev.trueBlocks.length - 1, `engine blocks, request ${next.id}`);
        // The previous answer and a new user message are appended.
        assert.ok(next.promptTokens >= prev.promptTokens + prev.outputTokens + SMALL_CHAT.userTurnTokens[0]);
      }
    }
    assert.ok(followUps >= 10, `only ${followUps} follow-up turns`);
  });

  test("template-heavy documents are reused across users", () => {
    const w = generate(TEMPLATE_HEAVY, { durationSeconds: 20 });
    // Longer than any system prompt, so a longer shared prefix must include a shared document.
    const maxSystemBlocks = Math.ceil((TEMPLATE_HEAVY.systemPromptTokens[1] * 4) / ROUTER_BLOCK_CHARS) + 1;
    let crossUser = 0;
    const rs = w.requests;
    for (let i = 0; i < rs.length; i++) {
      for (let j = 0; j < i; j++) {
        if (rs[i]!.sessionKey === rs[j]!.sessionKey) continue;
        if (commonPrefix(rs[i]!.hashes, rs[j]!.hashes) > maxSystemBlocks) {
          crossUser++;
          // The engine's view shares the document too (64-token blocks).
          assert.ok(commonPrefix(rs[i]!.trueBlocks, rs[j]!.trueBlocks) > TEMPLATE_HEAVY.systemPromptTokens[1] / 64);
        }
      }
    }
    assert.ok(crossUser >= 10, `only ${crossUser} cross-user pairs share a document`);
  });

  test("requests share their first block exactly when they share a tenant", () => {
    const w = generate(TEMPLATE_HEAVY, { durationSeconds: 5 });
    const tenantOf = (r: BenchRequest) => r.sessionKey!.split("/")[0];
    for (const a of w.requests)
      for (const b of w.requests) {
        const same = tenantOf(a) === tenantOf(b);
        assert.equal(a.hashes[0] === b.hashes[0], same);
        assert.equal(a.trueBlocks[0] === b.trueBlocks[0], same);
      }
  });

  test("engineBlocks chains 256-character blocks", () => {
    const text = entityText(KIND.document, 1, 1000);
    const blocks = engineBlocks(text);
    assert.equal(blocks.length, 4);
    assert.deepEqual(engineBlocks(text.slice(0, 512)), blocks.slice(0, 2));
    assert.notDeepEqual(engineBlocks("x" + text.slice(1)).slice(1), blocks.slice(1), "chained: block 2 depends on block 1");
    for (const b of blocks) assert.ok(Number.isSafeInteger(b) && b >= 0);
  });
});
