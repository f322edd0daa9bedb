import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_WORKLOAD, generateWorkload, promptChars, prose, type WorkloadRequest } from "../workload.ts";

const small = { requests: 300, seed: 7 };

test("is deterministic: the same options give the same requests, byte for byte", () => {
  const a = generateWorkload(small);
  const b = generateWorkload(small);
  assert.equal(JSON.stringify(a.requests), JSON.stringify(b.requests));
  const c = generateWorkload({ ...small, seed: 8 });
  assert.notEqual(JSON.stringify(a.requests), JSON.stringify(c.requests));
});

test("generates exactly `requests` requests, in arrival order, with their knobs applied", () => {
  const w = generateWorkload({ ...small, maxTokens: 17, model: "m" });
  assert.equal(w.requests.length, 300);
  w.requests.forEach((r, i) => {
    assert.equal(r.id, i);
    if (i > 0) assert.ok(r.at >= w.requests[i - 1]!.at);
    assert.equal(r.body.max_tokens, 17);
    assert.equal(r.body.model, "m");
    assert.equal(r.body.stream, true);
    assert.deepEqual(r.body.stream_options, { include_usage: true });
    assert.ok(r.tenant >= 0 && r.tenant < DEFAULT_WORKLOAD.tenants);
  });
});

test("turn k+1 extends turn k exactly: previous messages + the answer + a new user message", () => {
  const w = generateWorkload(small);
  const byId = new Map(w.requests.map((r) => [r.id, r]));
  let followUps = 0;
  for (const r of w.requests) {
    if (r.turn === 0) {
      assert.equal(r.previous, undefined);
      assert.deepEqual(
        r.body.messages.map((m) => m.role),
        ["system", "user"],
      );
      continue;
    }
    followUps++;
    const prev = byId.get(r.previous!)!;
    assert.ok(prev.id < r.id, "the previous turn arrives first");
    assert.equal(prev.conversation, r.conversation);
    assert.equal(prev.turn, r.turn - 1);
    assert.equal(r.user, prev.user);
    assert.equal(r.body.messages.length, prev.body.messages.length + 2);
    assert.deepEqual(r.body.messages.slice(0, prev.body.messages.length), prev.body.messages);
    assert.equal(r.body.messages.at(-2)!.role, "assistant");
    assert.equal(r.body.messages.at(-1)!.role, "user");
    assert.ok(promptChars(r) > promptChars(prev));
  }
  assert.ok(followUps > 50, `multi-turn conversations (${followUps} follow-ups)`);
});

test("a tenant's users share its system prompt; documents are shared across users and sized as configured", () => {
  const w = generateWorkload({ ...small, documentChars: [10_000, 40_000], systemPromptChars: [6_000, 14_000] });
  const systems = new Map<number, string>();
  for (const r of w.requests) {
    const system = r.body.messages[0]!.content;
    assert.ok(system.length >= 6_000 && system.length <= 14_000);
    const seen = systems.get(r.tenant);
    if (seen === undefined) systems.set(r.tenant, system);
    else assert.equal(system, seen);
  }
  assert.equal(new Set(systems.values()).size, systems.size, "tenants have distinct system prompts");

  // The same document opens conversations of different users, with identical text.
  const docUsers = new Map<string, Set<string>>();
  const docText = new Map<string, string>();
  for (const r of w.requests.filter((x) => x.turn === 0 && x.document !== undefined)) {
    const key = `${r.tenant}/${r.document}`;
    const content = r.body.messages[1]!.content;
    const doc = content.slice(0, content.indexOf("</document>"));
    assert.ok(doc.length >= 10_000 && doc.length <= 40_100, `document length ${doc.length}`);
    if (docText.has(key)) assert.equal(doc, docText.get(key));
    docText.set(key, doc);
    docUsers.set(key, (docUsers.get(key) ?? new Set()).add(r.user));
  }
  const shared = [...docUsers.values()].filter((users) => users.size > 1).length;
  assert.ok(shared >= 5, `documents reused across users (${shared})`);
});

test("knobs shape the traffic: document share, turns, rate", () => {
  const noDocs = generateWorkload({ ...small, documentShare: 0 });
  assert.ok(noDocs.requests.every((r) => r.document === undefined));
  const allDocs = generateWorkload({ ...small, documentShare: 1 });
  assert.ok(allDocs.requests.every((r) => r.document !== undefined));

  const single = generateWorkload({ ...small, meanTurns: 1 });
  assert.ok(single.requests.every((r) => r.turn === 0));
  const capped = generateWorkload({ ...small, meanTurns: 50, maxTurns: 3 });
  assert.ok(capped.requests.every((r) => r.turn < 3));

  // Poisson arrivals at requestsPerSecond (model time): the span is about requests / rate.
  const w = generateWorkload({ requests: 2000, requestsPerSecond: 10, seed: 3 });
  const span = w.requests.at(-1)!.at / 1000;
  assert.ok(span > 150 && span < 260, `2000 requests at 10/s span ${span.toFixed(0)} s`);
});

test("users are session keys within their tenant", () => {
  const w = generateWorkload({ ...small, usersPerTenant: 5 });
  const users = new Set(w.requests.map((r: WorkloadRequest) => r.user));
  assert.ok(users.size <= 5 * DEFAULT_WORKLOAD.tenants);
  for (const r of w.requests) assert.match(r.user, /^[a-z-]+(-\d+)?\/user-\d$/);
});

test("prose is English-like text of the exact length, deterministic in its key", () => {
  const a = prose("k", 5000);
  assert.equal(a.length, 5000);
  assert.equal(prose("k", 5000), a);
  assert.equal(prose("k", 1000), a.slice(0, 1000));
  assert.notEqual(prose("other", 5000), a);
  assert.match(a, /^[A-Z][a-z]+ [a-z]+/);
});

test("rejects nonsense knobs with the knob's name", () => {
  assert.throws(() => generateWorkload({ requests: 0 }), /requests/);
  assert.throws(() => generateWorkload({ documentChars: [10, 5] }), /documentChars/);
  assert.throws(() => generateWorkload({ documentShare: 2 }), /documentShare/);
  assert.throws(() => generateWorkload({ requestsPerSecond: 0 }), /requestsPerSecond/);
});
