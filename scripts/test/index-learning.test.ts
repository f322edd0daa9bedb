/**
 * The index learns from what nodes report, on the running system (wrangler dev + the simulated
 * fleet): a node whose prefix cache is reset behind the router's back (vLLM's
 * `POST /reset_prefix_cache`: same process, same boot id, so no report says so) is found within
 * three answers, its entries are dropped, and the next request for one of its old prefixes is
 * not predicted as a hit there. ~15 s.
 */
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { DEV_ADMIN_TOKEN, DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { startSystem, type System } from "../system.ts";

let system: System;

before(async () => {
  system = await startSystem({ port: 0, timeFactorScale: 20 });
});

after(async () => {
  await system?.stop();
});

/** Distinct documents, each a prefix of ~2,000 tokens, shared by every question about it. */
const DOCUMENTS = 12;
const document = (k: number) =>
  `Contract ${k} between the parties, clause by clause. ` + `Clause ${k}: the terms apply as written. `.repeat(200);

async function ask(k: number, question: string) {
  const res = await fetch(`${system.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEV_API_KEY}`, "content-type": "application/json", "x-warmpath-region": "us-east" },
    body: JSON.stringify({
      model: "llama-3.1-8b-instruct",
      max_tokens: 4,
      messages: [
        { role: "system", content: document(k) },
        { role: "user", content: question },
      ],
    }),
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens: number } } };
  return {
    node: res.headers.get("x-warmpath-node")!,
    decision: res.headers.get("x-warmpath-decision")!,
    match: res.headers.get("x-warmpath-prefix-match")!,
    cached: body.usage.prompt_tokens_details?.cached_tokens ?? -1,
  };
}

interface NodeState {
  id: string;
  indexBlocks: number;
  metrics: { silentRestarts: number; compared: number; agreed: number };
}

async function nodeState(id: string): Promise<NodeState> {
  const res = await fetch(`${system.url}/admin/state/us-east`, { headers: { authorization: `Bearer ${DEV_ADMIN_TOKEN}` } });
  const state = (await res.json()) as { nodes: NodeState[] };
  return state.nodes.find((n) => n.id === id)!;
}

/** The router records an answer's usage just after its body ends. */
const settle = () => new Promise((r) => setTimeout(r, 300));

test(
  "a node whose cache was reset without a restart is found within three answers, and its entries dropped",
  { timeout: 90_000 },
  async () => {
    // Each document read twice: the second read is a hit where the first one was placed.
    const holder = new Map<number, string>();
    for (let k = 0; k < DOCUMENTS; k++) holder.set(k, (await ask(k, "Summarise it.")).node);
    for (let k = 0; k < DOCUMENTS; k++) {
      const again = await ask(k, "Who signs it?");
      assert.equal(again.node, holder.get(k));
      assert.equal(again.decision, "prefix-hit");
      assert.ok(again.cached > 0, `document ${k}: the node reported ${again.cached} cached tokens`);
    }
    // The node holding the most documents (at least four of twelve across three nodes).
    const counts = new Map<string, number[]>();
    for (const [k, node] of holder) counts.set(node, [...(counts.get(node) ?? []), k]);
    const [victim, documents] = [...counts.entries()].sort((a, b) => b[1].length - a[1].length)[0]!;
    assert.ok(documents.length >= 4);
    await settle();
    const before = await nodeState(victim);
    assert.ok(before.indexBlocks > 0);
    assert.equal(before.metrics.silentRestarts, 0);

    const url = system.fleet!.node("us-east", victim)!.url;
    const reset = await fetch(`${url}/reset_prefix_cache`, { method: "POST" });
    assert.equal(reset.status, 200);
    assert.ok(((await reset.json()) as { dropped_blocks: number }).dropped_blocks > 0);

    // Three of its documents again: predicted as hits there, answered with (almost) nothing cached.
    for (const k of documents.slice(0, 3)) {
      const r = await ask(k, "What is the term?");
      assert.equal(r.node, victim);
      assert.equal(r.decision, "prefix-hit");
      assert.ok(r.cached < 64, `after the reset, document ${k} had ${r.cached} tokens cached`);
      await settle();
    }
    const after = await nodeState(victim);
    assert.equal(after.metrics.silentRestarts, 1, "the cache loss was found");
    // Its fourth document is no longer believed to be there.
    const fourth = await ask(documents[3]!, "What is the term?");
    assert.match(fourth.match, /^0\//, `the index still believed ${fourth.match} blocks of document ${documents[3]} on ${victim}`);
  },
);
