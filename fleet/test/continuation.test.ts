/**
 * Mid-stream continuation against a real node over HTTP: an answer equals its first k tokens plus
 * the continuation a router would send for the rest (chat `continue_final_message`, completions
 * with the text appended), text and finish reason; vLLM's 400s; the faults that cut a stream; and
 * the engine a node reports.
 */
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { NodeHandle } from "../node.ts";
import { MODEL, startTestNode } from "./test-node.ts";
import { parseFleet } from "../config.ts";
import { startFleet } from "../fleet.ts";
import { fillerToken } from "../openai.ts";
import { countTokens, renderChat, renderChatPrompt } from "../prompt.ts";
import { chatContinuation, completionContinuation, planAnswer } from "../continuation.ts";

/** The node's natural answer length (its default_max_tokens). */
const D = 40;
let node: NodeHandle;

before(async () => {
  node = await startTestNode("cont", D);
});

after(async () => {
  await node.stop();
});

interface Answer {
  status: number;
  /** The streamed text pieces, one per token chunk (or the whole text, not streamed). */
  pieces: string[];
  text: string;
  finish: string | null;
  usage: any;
  events: any[];
  body: any;
}

/** One request, streamed (with usage) or not, read to its end. */
async function ask(path: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(node.url + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body.stream ? { ...body, stream_options: { include_usage: true } } : body),
  });
  const raw = await res.text();
  if (res.status !== 200 || !body.stream) {
    const b = JSON.parse(raw);
    const choice = b.choices?.[0];
    const text = choice ? (choice.message?.content ?? choice.text) : "";
    return { status: res.status, pieces: [text], text, finish: choice?.finish_reason ?? null, usage: b.usage, events: [], body: b };
  }
  const events = raw
    .split("\n\n")
    .filter((e) => e.startsWith("data: "))
    .map((e) => e.slice(6))
    .map((d) => (d === "[DONE]" ? d : JSON.parse(d)));
  assert.equal(events.at(-1), "[DONE]");
  const chunks = events.filter((e) => e !== "[DONE]" && e.choices.length > 0);
  const pieces = chunks.map((c) => c.choices[0].delta?.content ?? c.choices[0].text);
  return {
    status: res.status,
    pieces,
    text: pieces.join(""),
    finish: chunks.at(-1).choices[0].finish_reason,
    usage: events.at(-2).usage,
    events,
    body: null,
  };
}

const system = "You answer briefly. " + "Background on prefix caches and routers. ".repeat(40);
const messages = [
  { role: "system", content: system },
  { role: "user", content: "Tell me something." },
];
const completionPrompt = "Once upon a time, in a fleet of GPU nodes, " + "a router kept track of caches. ".repeat(20);

/** The chat request a router sends to continue after `carried` (max_tokens reduced by the tokens carried). */
function chatContinuationBody(carried: string, k: number, maxTokens: number | undefined, stream: boolean) {
  return {
    model: MODEL,
    stream,
    messages: [...messages, { role: "assistant", content: carried }],
    continue_final_message: true,
    add_generation_prompt: false,
    ...(maxTokens === undefined ? {} : { max_tokens: maxTokens - k }),
  };
}

function completionContinuationBody(carried: string, k: number, maxTokens: number | undefined, stream: boolean) {
  return {
    model: MODEL,
    stream,
    prompt: completionPrompt + carried,
    ...(maxTokens === undefined ? {} : { max_tokens: maxTokens - k }),
  };
}

const CASES: { k: number; maxTokens: number | undefined }[] = [];
for (const maxTokens of [undefined, 25, D, D + 7]) {
  for (const k of [1, 2, 13, D - 1]) if (maxTokens === undefined || k < maxTokens) CASES.push({ k, maxTokens });
}

for (const [kind, path] of [
  ["chat", "/v1/chat/completions"],
  ["completions", "/v1/completions"],
] as const) {
  test(`${kind}: an answer is its first k tokens plus the continuation, text and finish reason`, async () => {
    const continuation = kind === "chat" ? chatContinuationBody : completionContinuationBody;
    const original = (maxTokens: number | undefined, stream: boolean) =>
      ask(path, {
        model: MODEL,
        stream,
        ...(kind === "chat" ? { messages } : { prompt: completionPrompt }),
        ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
      });
    for (const { k, maxTokens } of CASES) {
      const whole = await original(maxTokens, true);
      const expectedLength = Math.min(maxTokens ?? D, D);
      assert.equal(whole.pieces.length, expectedLength);
      assert.equal(whole.finish, maxTokens !== undefined && maxTokens <= D ? "length" : "stop");
      const carried = whole.pieces.slice(0, k).join("");
      for (const stream of [true, false]) {
        const rest = await ask(path, continuation(carried, k, maxTokens, stream));
        const what = `${kind} k=${k} max_tokens=${maxTokens} stream=${stream}`;
        assert.equal(rest.status, 200, what);
        assert.equal(carried + rest.text, whole.text, what);
        assert.equal(rest.finish, whole.finish, what);
        assert.equal(rest.usage.completion_tokens, expectedLength - k, what);
        assert.equal(
          rest.usage.prompt_tokens,
          countTokens((kind === "chat" ? renderChat({ messages }) : completionPrompt) + carried),
          what,
        );
        if (stream) {
          assert.equal(rest.pieces.length, expectedLength - k, what);
          if (kind === "chat") assert.equal(rest.events[0].choices[0].delta.role, "assistant", "the first chunk still names the role");
        }
      }
    }
    // Not streamed, the original answer is the same text.
    const flat = await original(undefined, false);
    assert.equal(flat.text, (await original(undefined, true)).text);
  });

  test(`${kind}: a continuation of a continuation, and a continuation carrying the whole answer`, async () => {
    const continuation = kind === "chat" ? chatContinuationBody : completionContinuationBody;
    const whole = await ask(path, { model: MODEL, stream: true, ...(kind === "chat" ? { messages } : { prompt: completionPrompt }) });
    const first = whole.pieces.slice(0, 5).join("");
    const second = await ask(path, continuation(first, 5, 20, true)); // cut at 20 tokens: "length"
    assert.equal(second.finish, "length");
    const both = first + second.text;
    const third = await ask(path, continuation(both, 20, undefined, true));
    assert.equal(both + third.text, whole.text);
    assert.equal(third.finish, "stop");
    // The whole answer carried (a node died before sending the finish reason): the model ends at once.
    const done = await ask(path, continuation(whole.text, D, undefined, true));
    assert.equal(done.text, "");
    assert.equal(done.finish, "stop");
    assert.equal(done.usage.completion_tokens, 1, "the end of sequence is a generated token");
  });
}

test("chat continuation: the prompt extends the original one block for block, so it hits the cache", async () => {
  const base = renderChat({ messages });
  const carried = fillerToken(countTokens(base), 0) + fillerToken(countTokens(base), 1);
  const r = renderChatPrompt({ messages: [...messages, { role: "assistant", content: carried }], continue_final_message: true });
  assert.equal(r.prompt, base + carried, "the open final message is the generation prompt and its text");
  assert.equal(r.continued?.before, base);
  assert.deepEqual(chatContinuation(r.continued!.before, r.continued!.content, D), { seed: countTokens(base), start: 2 });
  // One message only: its prompt is the generation prompt alone.
  const lone = renderChatPrompt({ messages: [{ role: "assistant", content: "Hi" }], continue_final_message: true });
  assert.equal(lone.continued?.before, "<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n");

  await fetch(node.url + "/reset_prefix_cache", { method: "POST" });
  await ask("/v1/chat/completions", { model: MODEL, messages, max_tokens: 2 }); // the original, cached
  const cont = await ask("/v1/chat/completions", chatContinuationBody(carried, 2, undefined, false));
  assert.equal(cont.usage.prompt_tokens, countTokens(base + carried));
  // Every full block of the original prompt is reused (64 characters = one 16-token block).
  assert.equal(cont.usage.prompt_tokens_details.cached_tokens, Math.floor(base.length / 64) * 16);
});

test("chat continuation of text that is not (wholly) the answer goes on after the whole tokens that match", async () => {
  const whole = await ask("/v1/chat/completions", { model: MODEL, messages });
  const three = whole.text.split(" ").slice(0, 3).join(" ");
  const after3 = whole.text.slice(three.length);
  // Trailing text that differs, or a token cut in the middle: the answer goes on from token 3.
  for (const carried of [three + " and something else", three + whole.text.slice(three.length, three.length + 2)]) {
    const r = await ask("/v1/chat/completions", chatContinuationBody(carried, 0, undefined, false));
    assert.equal(r.text, after3);
    assert.equal(r.usage.completion_tokens, D - 3);
  }
  // Nothing matches (or nothing carried): the whole answer, from token 0.
  for (const carried of ["Hello there", ""]) {
    const r = await ask("/v1/chat/completions", chatContinuationBody(carried, 0, undefined, false));
    assert.equal(r.text, whole.text);
  }
});

test("a continuation's first byte is counted apart from the tag's first bytes", async () => {
  const tagged = [{ role: "user", content: "[request-tag:cont-1] go on" }];
  const whole = await ask("/v1/chat/completions", { model: MODEL, stream: true, messages: tagged });
  const carried = whole.pieces.slice(0, 4).join("");
  const rest = await ask("/v1/chat/completions", {
    model: MODEL,
    stream: true,
    messages: [...tagged, { role: "assistant", content: carried }],
    continue_final_message: true,
    add_generation_prompt: false,
  });
  assert.equal(carried + rest.text, whole.text);
  const prompt = "[request-tag:cont-2] Once upon a time";
  const c = await ask("/v1/completions", { model: MODEL, prompt });
  await ask("/v1/completions", { model: MODEL, prompt: prompt + c.text.split(" ").slice(0, 2).join(" ") });
  const state = node.state();
  assert.equal(state.first_byte_tags["cont-1"], 1);
  assert.equal(state.continued_tags["cont-1"], 1);
  assert.equal(state.first_byte_tags["cont-2"], 1);
  assert.equal(state.continued_tags["cont-2"], 1);
});

test("completions: carried answer text is found only at the end of the prompt, for the seed before it", () => {
  const seed = countTokens(completionPrompt);
  const answer = (s: number, k: number) => Array.from({ length: k }, (_, i) => fillerToken(s, i)).join("");
  for (const k of [1, 2, 13, D - 1, D]) {
    assert.deepEqual(completionContinuation(completionPrompt + answer(seed, k), D), { seed, start: k });
  }
  assert.deepEqual(completionContinuation(completionPrompt, D), { seed, start: 0 });
  assert.deepEqual(completionContinuation("Once upon a time", D), { seed: 4, start: 0 });
  // The text of another prompt's answer (another seed), or followed by more text, is not carried.
  assert.equal(completionContinuation(completionPrompt + "zzzz" + answer(seed, 3), D).start, 0);
  assert.equal(completionContinuation(completionPrompt + answer(seed, 3) + " then", D).start, 0);
  // More than the natural answer is not an answer; the search is bounded to the prompt's tail.
  assert.equal(completionContinuation(completionPrompt + answer(seed, D + 1), D).start, 0);
  // planAnswer: the natural length counts the carried tokens; "length" only when max_tokens cut it.
  assert.deepEqual(planAnswer({ seed, start: 10 }, undefined, D), {
    seed,
    start: 10,
    completionTokens: D - 10,
    finishReason: "stop",
    endOfSequence: false,
  });
  assert.equal(planAnswer({ seed, start: 10 }, D - 10, D).finishReason, "length");
  assert.equal(planAnswer({ seed, start: 10 }, D - 9, D).finishReason, "stop");
});

test("continue_final_message: vLLM's 400s", async () => {
  const post = async (body: Record<string, unknown>) => {
    const res = await fetch(node.url + "/v1/chat/completions", { method: "POST", body: JSON.stringify({ model: MODEL, ...body }) });
    return { status: res.status, body: (await res.json()) as any };
  };
  const both = await post({
    messages: [...messages, { role: "assistant", content: "The" }],
    continue_final_message: true,
    add_generation_prompt: true,
  });
  assert.equal(both.status, 400);
  assert.deepEqual(both.body, {
    error: {
      message: "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
      type: "BadRequestError",
      param: null,
      code: 400,
    },
  });
  const notAssistant = await post({ messages, continue_final_message: true, add_generation_prompt: false });
  assert.equal(notAssistant.status, 400);
  assert.equal(notAssistant.body.error.type, "BadRequestError");
  assert.equal(notAssistant.body.error.code, 400);
  assert.equal(notAssistant.body.error.param, "messages[1].role");
  assert.match(notAssistant.body.error.message, /continue_final_message/);
  assert.equal((await post({ messages, continue_final_message: "yes" })).status, 400);
  // Without add_generation_prompt (vLLM's default is true, but only an explicit true conflicts), it continues.
  assert.equal((await post({ messages: [...messages, { role: "assistant", content: "The" }], continue_final_message: true })).status, 200);
  // continue_final_message false: an ordinary request, its final assistant message closed.
  assert.equal((await post({ messages: [...messages, { role: "assistant", content: "The" }], continue_final_message: false })).status, 200);
});

/** A streamed request read with node:http, so that a reset after the data still shows the data. */
function rawStream(body: Record<string, unknown>): Promise<{ status: number; text: string; ended: "end" | "error"; error?: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(node.url + "/v1/chat/completions");
    let status = 0;
    let text = "";
    const broke = (err: NodeJS.ErrnoException) =>
      status ? resolve({ status, text, ended: "error", error: err.code ?? err.message }) : reject(err);
    const req = request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      status = res.statusCode!;
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => resolve({ status, text, ended: "end" }));
      res.on("error", broke);
    });
    req.on("error", broke);
    req.end(JSON.stringify({ model: MODEL, stream: true, max_tokens: 20, ...body }));
  });
}

const dataLines = (text: string) =>
  text
    .split("\n\n")
    .filter((e) => e.startsWith("data: "))
    .map((e) => e.slice(6));

async function setFaults(body: Record<string, unknown>) {
  const res = await fetch(node.url + "/admin/faults", { method: "POST", body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any };
}

test("faults that cut a stream after N tokens: die, error event, malformed line", async () => {
  for (const f of ["die_after_tokens", "error_event_after_tokens", "malformed_after_tokens"]) {
    assert.equal((await setFaults({ [f]: 0 })).status, 400, `${f}: 0 is refused`);
    assert.equal((await setFaults({ [f]: 2.5 })).status, 400, `${f}: not an integer`);
  }
  const msgs = [{ role: "user", content: "cut me" }];
  const before = node.state().injected_faults;

  // die: three token chunks, then the connection is reset: no [DONE], no end of the body.
  assert.equal((await setFaults({ die_after_tokens: 3 })).body.faults.die_after_tokens, 3);
  const died = await rawStream({ messages: msgs });
  assert.equal(died.status, 200);
  assert.equal(died.ended, "error");
  assert.equal(died.error, "ECONNRESET");
  assert.equal(dataLines(died.text).length, 3);
  assert.ok(dataLines(died.text).every((d) => JSON.parse(d).choices[0].finish_reason === null));
  const whole = await ask("/v1/chat/completions", { model: MODEL, max_tokens: 20, messages: msgs });
  assert.equal(whole.usage.completion_tokens, 20, "a whole JSON answer is not affected");
  assert.ok(
    whole.text.startsWith(
      dataLines(died.text)
        .map((d) => JSON.parse(d).choices[0].delta.content)
        .join(""),
    ),
  );
  await setFaults({ die_after_tokens: null });

  // error event: two tokens, vLLM's error event, [DONE], and a properly ended body.
  await setFaults({ error_event_after_tokens: 2 });
  const errored = await rawStream({ messages: msgs, stream_options: { include_usage: true } });
  assert.equal(errored.ended, "end");
  const lines = dataLines(errored.text);
  assert.equal(lines.length, 4);
  assert.equal(JSON.parse(lines[1]!).choices[0].finish_reason, null);
  assert.deepEqual(JSON.parse(lines[2]!), {
    error: { message: "Internal server error", type: "InternalServerError", param: null, code: 500 },
  });
  assert.equal(lines[3], "[DONE]", "no usage chunk after the error");
  await setFaults({ error_event_after_tokens: null });

  // malformed: two tokens, then a data line that is not JSON, then the end (no [DONE]).
  await setFaults({ malformed_after_tokens: 2 });
  const garbled = await rawStream({ messages: msgs });
  assert.equal(garbled.ended, "end");
  const g = dataLines(garbled.text);
  assert.equal(g.length, 3);
  JSON.parse(g[1]!);
  assert.throws(() => JSON.parse(g[2]!), SyntaxError);
  assert.ok(!garbled.text.includes("[DONE]"));
  await setFaults({ malformed_after_tokens: null });

  // Several set: the smallest count cuts first.
  await setFaults({ malformed_after_tokens: 1, error_event_after_tokens: 4 });
  assert.equal(dataLines((await rawStream({ messages: msgs })).text).length, 2);
  // A stream shorter than the count is not cut.
  await setFaults({ malformed_after_tokens: null, error_event_after_tokens: 5 });
  const short = await rawStream({ messages: msgs, max_tokens: 5 });
  assert.equal(dataLines(short.text).at(-1), "[DONE]");
  await setFaults({ error_event_after_tokens: null });

  const state = node.state();
  const more = (k: string) => (state.injected_faults[k] ?? 0) - (before[k] ?? 0);
  assert.deepEqual([more("die_after_tokens"), more("error_event_after_tokens"), more("malformed_after_tokens")], [1, 1, 2]);
  assert.equal(state.running, 0, "no cut stream holds a batch slot");
  const metrics = await (await fetch(node.url + "/metrics")).text();
  assert.match(metrics, /^vllm:request_success_total\{finished_reason="error",model_name="[^"]+"\} 3\.0$/m);
  assert.match(metrics, /^vllm:request_success_total\{finished_reason="abort",model_name="[^"]+"\} [1-9]/m);
});

test("the fleet file's engine is validated and sent in every report", async () => {
  const reports: any[] = [];
  const router: Server = createServer((req, res) => {
    let b = "";
    req.on("data", (c) => (b += c));
    req.on("end", () => {
      if (req.url === "/v1/nodes/report") reports.push(JSON.parse(b));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => router.listen(0, "127.0.0.1", r));
  const routerUrl = `http://127.0.0.1:${(router.address() as AddressInfo).port}`;
  const config = parseFleet({
    defaults: { engine: "sglang", report_interval_ms: 50 },
    regions: [{ name: "r", token: "t", nodes: [{ id: "a" }, { id: "b", engine: "llama.cpp" }, { id: "c", engine: "vllm" }] }],
  });
  assert.deepEqual(
    config.regions[0]!.nodes.map((n) => n.engine),
    ["sglang", "llama.cpp", "vllm"],
  );
  assert.equal(parseFleet({ regions: [{ name: "r", nodes: [{ id: "a" }] }] }).regions[0]!.nodes[0]!.engine, "vllm");
  assert.throws(
    () => parseFleet({ regions: [{ name: "r", nodes: [{ id: "a", engine: "tgi" }] }] }, "x.json"),
    /regions\[0\]\.nodes\[0\]\.engine/,
  );
  assert.throws(() => parseFleet({ defaults: { engine: "VLLM" }, regions: [{ name: "r", nodes: [{ id: "a" }] }] }), /defaults\.engine/);
  const fleet = await startFleet(config, { routerUrl });
  try {
    for (let i = 0; i < 200 && new Set(reports.map((r) => r.node_id)).size < 3; i++) await new Promise((r) => setTimeout(r, 10));
    const byNode = new Map(reports.map((r) => [r.node_id, r.engine]));
    assert.deepEqual(Object.fromEntries(byNode), { a: "sglang", b: "llama.cpp", c: "vllm" });
    assert.ok(reports.every((r) => typeof r.engine === "string"));
    assert.equal(fleet.node("r", "b")!.state().engine, "llama.cpp");
  } finally {
    await fleet.stop();
    router.closeAllConnections();
    await new Promise((r) => router.close(r));
  }
});
