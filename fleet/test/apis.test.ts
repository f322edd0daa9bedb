/**
 * The APIs beyond chat over HTTP against a real node: the Responses API (shapes, stored responses
 * and `previous_response_id`, streaming events), Anthropic's Messages API, batched and token-id
 * completions prompts, and function calls in all three; the faults that cut a stream, in each
 * API's shapes. Each test uses its own `cache_salt`, so tests never share cached blocks.
 */
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import type { NodeHandle } from "../node.ts";
import { MODEL, postJson, sseEvents, startTestNode } from "./test-node.ts";
import { countTokens, renderChat, tokenIdsText } from "../prompt.ts";

/** The node's natural answer length (default_max_tokens). */
const D = 12;
let node: NodeHandle;

before(async () => {
  node = await startTestNode("apis", D);
});

after(async () => {
  await node.stop();
});

const post = (path: string, body: unknown) => postJson(node, path, body);
const sse = sseEvents;

const long = (word: string) => `${word}: background on prefix caches, routers and GPU fleets. `.repeat(30);

const WEATHER = {
  type: "object",
  properties: { city: { type: "string" }, days: { type: "integer" }, metric: { type: "boolean" }, note: { type: "string" } },
  required: ["city", "days", "metric"],
};

/** Arguments valid against WEATHER's required properties (and nothing it does not require). */
function assertWeatherArguments(args: unknown) {
  assert.ok(args && typeof args === "object");
  const a = args as Record<string, unknown>;
  assert.deepEqual(Object.keys(a).sort(), ["city", "days", "metric"]);
  assert.equal(typeof a.city, "string");
  assert.ok((a.city as string).length > 0);
  assert.equal(a.days, 1);
  assert.equal(a.metric, true);
}

// ---------------------------------------------------------------- Responses API

test("responses: the whole JSON answer, rendered as chat renders the same conversation", async () => {
  const salt = "resp-shape";
  const instructions = "Be brief.";
  const input = long("shape");
  const r = await post("/v1/responses", { model: MODEL, instructions, input, cache_salt: salt });
  assert.equal(r.status, 200);
  const b = r.json;
  assert.match(b.id, /^resp_[0-9a-f]{32}$/);
  assert.equal(b.object, "response");
  assert.equal(b.status, "completed");
  assert.equal(b.model, MODEL);
  assert.equal(b.instructions, instructions);
  assert.equal(b.output.length, 1);
  const [item] = b.output;
  assert.equal(item.type, "message");
  assert.equal(item.role, "assistant");
  assert.match(item.id, /^msg_/);
  assert.equal(item.content[0].type, "output_text");
  assert.equal(item.content[0].text.split(" ").length, D);
  const prompt = renderChat({
    messages: [
      { role: "system", content: instructions },
      { role: "user", content: input },
    ],
  });
  assert.deepEqual(b.usage, {
    input_tokens: countTokens(prompt),
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: D,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: countTokens(prompt) + D,
  });
  // The same conversation as a chat completion is the same prompt: it hits the blocks just computed.
  const chat = await post("/v1/chat/completions", {
    model: MODEL,
    cache_salt: salt,
    max_tokens: 1,
    messages: [
      { role: "system", content: instructions },
      { role: "user", content: input },
    ],
  });
  assert.equal(chat.json.usage.prompt_tokens, countTokens(prompt));
  assert.equal(chat.json.usage.prompt_tokens_details.cached_tokens, Math.floor((countTokens(prompt) - 1) / 16) * 16);
  // max_output_tokens cuts the answer: status incomplete, as vLLM says it.
  const cut = await post("/v1/responses", { model: MODEL, input: "short", max_output_tokens: 3, cache_salt: salt });
  assert.equal(cut.json.status, "incomplete");
  assert.deepEqual(cut.json.incomplete_details, { reason: "max_output_tokens" });
  assert.equal(cut.json.usage.output_tokens, 3);
});

test("responses: a follow-up by previous_response_id extends the stored conversation and hits the cache", async () => {
  const salt = "resp-follow";
  const instructions = "Answer in one line.";
  const first = await post("/v1/responses", { model: MODEL, instructions, input: long("first"), cache_salt: salt });
  assert.equal(first.status, 200);
  const firstPrompt = renderChat({
    messages: [
      { role: "system", content: instructions },
      { role: "user", content: long("first") },
    ],
  });
  assert.equal(first.json.usage.input_tokens, countTokens(firstPrompt));
  const second = await post("/v1/responses", {
    model: MODEL,
    instructions,
    input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "And then?" }] }],
    previous_response_id: first.json.id,
    cache_salt: salt,
  });
  assert.equal(second.status, 200);
  assert.equal(second.json.previous_response_id, first.json.id);
  // The prompt is the first conversation, its answer as the assistant's, then the new input.
  const secondPrompt = renderChat({
    messages: [
      { role: "system", content: instructions },
      { role: "user", content: long("first") },
      { role: "assistant", content: first.json.output[0].content[0].text },
      { role: "user", content: "And then?" },
    ],
  });
  assert.ok(secondPrompt.startsWith(firstPrompt));
  assert.equal(second.json.usage.input_tokens, countTokens(secondPrompt));
  // Every full block of the first prompt is cached (the answer's KV is not kept: decode is not modelled).
  assert.equal(second.json.usage.input_tokens_details.cached_tokens, Math.floor(firstPrompt.length / 64) * 16);
  // The chain goes on: the third carries both earlier turns.
  const third = await post("/v1/responses", {
    model: MODEL,
    instructions,
    input: "Last one.",
    previous_response_id: second.json.id,
    cache_salt: salt,
  });
  assert.ok(third.json.usage.input_tokens_details.cached_tokens >= Math.floor(secondPrompt.length / 64) * 16 - 16);
  assert.ok(third.json.usage.input_tokens > second.json.usage.input_tokens);
});

test("responses: an id the node does not hold is a 404 response_not_found, as vLLM's; store false keeps nothing; a restart forgets", async () => {
  const unknown = await post("/v1/responses", { model: MODEL, input: "x", previous_response_id: "resp_0123" });
  assert.equal(unknown.status, 404);
  assert.deepEqual(unknown.json, {
    error: {
      message: "Response with id 'resp_0123' not found.",
      type: "invalid_request_error",
      param: "response_id",
      code: "response_not_found",
    },
  });
  const unstored = await post("/v1/responses", { model: MODEL, input: "not kept", store: false });
  assert.equal(unstored.json.store, false);
  assert.equal((await post("/v1/responses", { model: MODEL, input: "x", previous_response_id: unstored.json.id })).status, 404);
  const kept = await post("/v1/responses", { model: MODEL, input: "kept" });
  assert.equal((await post("/v1/responses", { model: MODEL, input: "x", previous_response_id: kept.json.id })).status, 200);
  assert.ok(node.state().stored_responses >= 2);
  await node.restart();
  await new Promise((r) => setTimeout(r, 50)); // the client's pooled connections see theirs closed
  assert.equal(node.state().stored_responses, 0);
  assert.equal((await post("/v1/responses", { model: MODEL, input: "x", previous_response_id: kept.json.id })).status, 404);
  assert.equal((await post("/v1/responses", { model: MODEL, input: [{ type: "web_search_call" }] })).status, 400);
  assert.equal((await post("/v1/responses", { model: "nope", input: "x" })).status, 404);
});

test("responses: streamed events in vLLM's order, created before the prefill, completed last with usage", async () => {
  const salt = "resp-stream";
  const res = await fetch(node.url + "/v1/responses", {
    method: "POST",
    body: JSON.stringify({ model: MODEL, input: long("stream"), stream: true, cache_salt: salt }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type")!, /^text\/event-stream/);
  const text = await res.text();
  const events = sse(text);
  const types = events.map((e) => e.data.type);
  assert.deepEqual(types, [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    ...Array(D).fill("response.output_text.delta"),
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
  ]);
  assert.deepEqual(
    events.map((e) => e.event),
    types,
    "each event is named as its type",
  );
  assert.deepEqual(
    events.map((e) => e.data.sequence_number),
    types.map((_, i) => i),
  );
  assert.ok(!text.includes("[DONE]"));
  const created = events[0]!.data.response;
  assert.equal(created.status, "in_progress");
  assert.deepEqual(created.output, []);
  assert.equal(created.usage, null);
  assert.equal(res.headers.get("x-request-id"), created.id);
  const done = events.at(-1)!.data.response;
  assert.equal(done.id, created.id);
  assert.equal(done.status, "completed");
  const deltas = events.filter((e) => e.data.type === "response.output_text.delta").map((e) => e.data.delta);
  assert.equal(deltas.join(""), done.output[0].content[0].text);
  assert.equal(events.find((e) => e.data.type === "response.output_text.done")!.data.text, deltas.join(""));
  const itemId = events[2]!.data.item.id;
  assert.ok(events.slice(3, -1).every((e) => (e.data.item_id ?? e.data.item.id) === itemId));
  assert.equal(done.usage.input_tokens, countTokens(renderChat({ messages: [{ role: "user", content: long("stream") }] })));
  assert.equal(done.usage.output_tokens, D);
  // A streamed response is stored too: its follow-up hits the cache.
  const next = await post("/v1/responses", { model: MODEL, input: "more", previous_response_id: done.id, cache_salt: salt });
  assert.ok(next.json.usage.input_tokens_details.cached_tokens > 300);
});

test("responses: the first events come at once, the first delta at the end of the prefill", async () => {
  // ~4,000 uncached tokens at 50,000/s and time factor 10: 8 ms of prefill, slowed 40x: 320 ms.
  await node.setFaults({ prefill_slowdown: 40 });
  try {
    const t0 = performance.now();
    const res = await fetch(node.url + "/v1/responses", {
      method: "POST",
      body: JSON.stringify({ model: MODEL, input: "slow ".repeat(3_200), stream: true, cache_salt: "resp-timing" }),
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    let createdMs = 0;
    let deltaMs = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (!createdMs && text.includes("response.in_progress")) createdMs = performance.now() - t0;
      if (!deltaMs && text.includes("response.output_text.delta")) deltaMs = performance.now() - t0;
    }
    assert.ok(deltaMs >= 300, `first delta after ${deltaMs} ms`);
    assert.ok(deltaMs - createdMs >= 250, `response.created after ${createdMs} ms, first delta after ${deltaMs} ms`);
  } finally {
    await node.setFaults({ prefill_slowdown: 1 });
  }
});

test("responses: a function call, whole and streamed; its output in a follow-up hits the cache", async () => {
  const salt = "resp-tools";
  const tools = [
    { type: "function", name: "get_time", parameters: { type: "object", properties: {} } },
    { type: "function", name: "get_weather", description: "Weather by city", parameters: WEATHER },
  ];
  const input = "What does get_weather say for Oslo? " + long("tools");
  const whole = await post("/v1/responses", { model: MODEL, input, tools, cache_salt: salt });
  const [call] = whole.json.output;
  assert.equal(call.type, "function_call");
  assert.equal(call.name, "get_weather");
  assert.equal(call.status, "completed");
  assert.match(call.id, /^fc_/);
  assert.match(call.call_id, /^call_/);
  assertWeatherArguments(JSON.parse(call.arguments));
  assert.equal(whole.json.status, "completed");

  const streamed = sse((await post("/v1/responses", { model: MODEL, input, tools, stream: true, cache_salt: salt })).text);
  const types = streamed.map((e) => e.data.type);
  const pieces = types.filter((t) => t === "response.function_call_arguments.delta").length;
  assert.deepEqual(types, [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    ...Array(pieces).fill("response.function_call_arguments.delta"),
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
  ]);
  assert.ok(pieces > 3, "the arguments come in pieces");
  const added = streamed[2]!.data.item;
  assert.deepEqual([added.type, added.name, added.arguments, added.status], ["function_call", "get_weather", "", "in_progress"]);
  const args = streamed
    .filter((e) => e.data.type === "response.function_call_arguments.delta")
    .map((e) => e.data.delta)
    .join("");
  assert.equal(args, streamed.at(-3)!.data.arguments);
  assertWeatherArguments(JSON.parse(args));
  const final = streamed.at(-1)!.data.response;
  assert.equal(final.output[0].arguments, args);
  assert.equal(final.usage.output_tokens, 1 + pieces, "the call's name, then its pieces");

  // tool_choice "none": text; named: that function, whatever the input says.
  const none = await post("/v1/responses", { model: MODEL, input, tools, tool_choice: "none", cache_salt: salt });
  assert.equal(none.json.output[0].type, "message");
  const named = await post("/v1/responses", {
    model: MODEL,
    input,
    tools,
    tool_choice: { type: "function", name: "get_time" },
    cache_salt: salt,
  });
  assert.equal(named.json.output[0].name, "get_time");
  assert.equal(named.json.output[0].arguments, "{}");

  // The tool's result answers the call: text this time, and the conversation so far is cached.
  const followUp = await post("/v1/responses", {
    model: MODEL,
    tools,
    previous_response_id: final.id,
    input: [{ type: "function_call_output", call_id: final.output[0].call_id, output: "4 C and rain" }],
    cache_salt: salt,
  });
  assert.equal(followUp.json.output[0].type, "message");
  const chatTools = tools.map((t) => ({
    type: "function",
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
  const callPrompt = renderChat({ messages: [{ role: "user", content: input }], tools: chatTools });
  assert.equal(followUp.json.usage.input_tokens_details.cached_tokens, Math.floor(callPrompt.length / 64) * 16);
});

// ---------------------------------------------------------------- Messages API

test("messages: max_tokens is required, errors in Anthropic's shape", async () => {
  const missing = await post("/v1/messages", { model: MODEL, messages: [{ role: "user", content: "hi" }] });
  assert.equal(missing.status, 400);
  assert.deepEqual(missing.json, { type: "error", error: { type: "invalid_request_error", message: "max_tokens: Field required" } });
  const unknown = await post("/v1/messages", { model: "nope", max_tokens: 5, messages: [{ role: "user", content: "hi" }] });
  assert.equal(unknown.status, 404);
  assert.equal(unknown.json.error.type, "not_found_error");
  const empty = await post("/v1/messages", { model: MODEL, max_tokens: 5, messages: [] });
  assert.equal(empty.status, 400);
  assert.equal(empty.json.type, "error");
  const bad = await fetch(node.url + "/v1/messages", { method: "POST", body: "{nope" });
  assert.equal(bad.status, 400);
  assert.equal(((await bad.json()) as any).error.type, "invalid_request_error");
});

test("messages: the whole answer, its usage split into uncached and cache-read input tokens", async () => {
  const salt = "msg-shape";
  const body = {
    model: MODEL,
    max_tokens: 100,
    system: [{ type: "text", text: long("system") }],
    messages: [{ role: "user", content: [{ type: "text", text: "Hello there." }] }],
    cache_salt: salt,
  };
  const cold = await post("/v1/messages", body);
  assert.equal(cold.status, 200);
  const m = cold.json;
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.equal(m.model, MODEL);
  assert.equal(m.stop_reason, "end_turn");
  assert.equal(m.stop_sequence, null);
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, "text");
  assert.equal(m.content[0].text.split(" ").length, D);
  const prompt = renderChat({
    messages: [
      { role: "system", content: long("system") },
      { role: "user", content: "Hello there." },
    ],
  });
  assert.deepEqual(m.usage, {
    input_tokens: countTokens(prompt),
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    output_tokens: D,
  });
  const warm = (await post("/v1/messages", body)).json;
  const cached = Math.floor((countTokens(prompt) - 1) / 16) * 16;
  assert.deepEqual(warm.usage, {
    input_tokens: countTokens(prompt) - cached,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
    output_tokens: D,
  });
  const cut = (await post("/v1/messages", { ...body, max_tokens: 2 })).json;
  assert.equal(cut.stop_reason, "max_tokens");
  assert.equal(cut.usage.output_tokens, 2);
});

test("messages: streamed events in Anthropic's order, message_start at the end of the prefill with the usage", async () => {
  const salt = "msg-stream";
  const body = { model: MODEL, max_tokens: 100, stream: true, messages: [{ role: "user", content: long("stream") }], cache_salt: salt };
  await post("/v1/messages", body);
  const res = await post("/v1/messages", body);
  assert.equal(res.status, 200);
  const events = sse(res.text);
  assert.deepEqual(
    events.map((e) => e.event),
    [
      "message_start",
      "content_block_start",
      ...Array(D).fill("content_block_delta"),
      "content_block_stop",
      "message_delta",
      "message_stop",
    ],
  );
  assert.ok(events.every((e) => e.event === e.data.type));
  const start = events[0]!.data.message;
  assert.equal(start.stop_reason, null);
  assert.deepEqual(start.content, []);
  const promptTokens = countTokens(renderChat({ messages: [{ role: "user", content: long("stream") }] }));
  const cached = Math.floor((promptTokens - 1) / 16) * 16;
  assert.equal(start.usage.cache_read_input_tokens, cached);
  assert.equal(start.usage.input_tokens, promptTokens - cached);
  assert.deepEqual(events[1]!.data, { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } });
  const text = events
    .filter((e) => e.event === "content_block_delta")
    .map((e) => {
      assert.equal(e.data.delta.type, "text_delta");
      return e.data.delta.text;
    })
    .join("");
  assert.equal(text.split(" ").length, D);
  const delta = events.at(-2)!.data;
  assert.deepEqual(delta.delta, { stop_reason: "end_turn", stop_sequence: null });
  assert.deepEqual(delta.usage, {
    input_tokens: promptTokens - cached,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
    output_tokens: D,
  });
  assert.ok(!res.text.includes("[DONE]"));
});

test("messages: a tool_use block, whole and streamed as input_json_delta; a tool_result then gets text", async () => {
  const salt = "msg-tools";
  const tools = [{ name: "get_weather", description: "Weather by city", input_schema: WEATHER }];
  const messages = [{ role: "user", content: "Please get_weather for Oslo." }];
  const whole = (await post("/v1/messages", { model: MODEL, max_tokens: 200, tools, messages, cache_salt: salt })).json;
  assert.equal(whole.stop_reason, "tool_use");
  const [block] = whole.content;
  assert.equal(block.type, "tool_use");
  assert.match(block.id, /^toolu_/);
  assert.equal(block.name, "get_weather");
  assertWeatherArguments(block.input);

  const events = sse((await post("/v1/messages", { model: MODEL, max_tokens: 200, tools, messages, stream: true, cache_salt: salt })).text);
  const pieces = events.filter((e) => e.event === "content_block_delta");
  assert.deepEqual(
    events.map((e) => e.event),
    [
      "message_start",
      "content_block_start",
      ...pieces.map(() => "content_block_delta"),
      "content_block_stop",
      "message_delta",
      "message_stop",
    ],
  );
  assert.equal(events[1]!.data.content_block.type, "tool_use");
  assert.equal(events[1]!.data.content_block.name, "get_weather");
  assert.deepEqual(events[1]!.data.content_block.input, {});
  assert.ok(pieces.every((e) => e.data.delta.type === "input_json_delta"));
  assertWeatherArguments(JSON.parse(pieces.map((e) => e.data.delta.partial_json).join("")));
  assert.equal(events.at(-2)!.data.delta.stop_reason, "tool_use");

  // tool_choice any without a mention: the first tool; none: text.
  const any = (
    await post("/v1/messages", {
      model: MODEL,
      max_tokens: 200,
      tools,
      tool_choice: { type: "any" },
      messages: [{ role: "user", content: "hi" }],
    })
  ).json;
  assert.equal(any.content[0].name, "get_weather");
  const none = (await post("/v1/messages", { model: MODEL, max_tokens: 200, tools, tool_choice: { type: "none" }, messages })).json;
  assert.equal(none.content[0].type, "text");
  const unknownTool = await post("/v1/messages", {
    model: MODEL,
    max_tokens: 200,
    tools,
    tool_choice: { type: "tool", name: "nope" },
    messages,
  });
  assert.equal(unknownTool.status, 400);
  assert.equal(unknownTool.json.error.type, "invalid_request_error");

  // The result of the call: the model answers in text, and the conversation so far is cached.
  const result = (
    await post("/v1/messages", {
      model: MODEL,
      max_tokens: 200,
      tools,
      cache_salt: salt,
      messages: [
        ...messages,
        { role: "assistant", content: whole.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: block.id, content: "4 C and rain" }] },
      ],
    })
  ).json;
  assert.equal(result.stop_reason, "end_turn");
  assert.equal(result.content[0].type, "text");
  assert.ok(result.usage.cache_read_input_tokens > 0);
});

// ---------------------------------------------------------------- Completions prompts

test("completions: an array of strings is one choice per prompt, indexed in order; usage sums them", async () => {
  const prompts = ["Alpha prompt. " + long("a"), "Beta. " + long("b"), "Gamma."];
  const whole = (await post("/v1/completions", { model: MODEL, prompt: prompts, max_tokens: 4, cache_salt: "batch" })).json;
  assert.equal(whole.object, "text_completion");
  assert.deepEqual(
    whole.choices.map((c: any) => c.index),
    [0, 1, 2],
  );
  for (const [i, p] of prompts.entries()) {
    const single = (await post("/v1/completions", { model: MODEL, prompt: p, max_tokens: 4, cache_salt: "batch-single" })).json;
    assert.equal(whole.choices[i].text, single.choices[0].text, `prompt ${i} answered as alone`);
    assert.equal(whole.choices[i].finish_reason, "length");
  }
  const promptTokens = prompts.reduce((n, p) => n + countTokens(p), 0);
  assert.deepEqual(whole.usage, {
    prompt_tokens: promptTokens,
    completion_tokens: 12,
    total_tokens: promptTokens + 12,
    prompt_tokens_details: { cached_tokens: 0 },
  });

  const events = sse(
    (
      await post("/v1/completions", {
        model: MODEL,
        prompt: prompts,
        max_tokens: 4,
        stream: true,
        stream_options: { include_usage: true },
        cache_salt: "batch",
      })
    ).text,
  );
  assert.equal(events.at(-1)!.data, "[DONE]");
  const chunks = events.slice(0, -2).map((e) => e.data);
  for (let i = 0; i < 3; i++) {
    const mine = chunks.filter((c) => c.choices[0].index === i);
    assert.equal(mine.length, 4);
    assert.equal(mine.map((c) => c.choices[0].text).join(""), whole.choices[i].text);
    assert.deepEqual(
      mine.map((c) => c.choices[0].finish_reason),
      [null, null, null, "length"],
    );
  }
  const usage = events.at(-2)!.data.usage;
  assert.equal(usage.prompt_tokens, promptTokens);
  assert.ok(usage.prompt_tokens_details.cached_tokens > 0, "the second time, each prompt's blocks are cached");
  assert.equal((await post("/v1/completions", { model: MODEL, prompt: ["ok", ""] })).status, 400);
  assert.equal((await post("/v1/completions", { model: MODEL, prompt: ["ok", 3] })).status, 400);
  assert.equal((await post("/v1/completions", { model: MODEL, prompt: [] })).status, 400);
});

test("completions: token-id prompts count one token an id, and identical id prefixes hit the cache", async () => {
  const ids = Array.from({ length: 200 }, (_, i) => (i * 7919) % 128_000);
  assert.equal(tokenIdsText(ids).length, 4 * ids.length);
  const first = (await post("/v1/completions", { model: MODEL, prompt: ids, max_tokens: 2, cache_salt: "ids" })).json;
  assert.equal(first.usage.prompt_tokens, 200);
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  // Same first 200 ids, then more: the first 12 blocks (192 tokens) are cached.
  const longer = (await post("/v1/completions", { model: MODEL, prompt: [...ids, 1, 2, 3, 4, 5], max_tokens: 2, cache_salt: "ids" })).json;
  assert.equal(longer.usage.prompt_tokens, 205);
  assert.equal(longer.usage.prompt_tokens_details.cached_tokens, 192);
  // An array of arrays: one choice each; a different first id shares nothing.
  const batch = (await post("/v1/completions", { model: MODEL, prompt: [ids, [9, ...ids]], max_tokens: 2, cache_salt: "ids" })).json;
  assert.equal(batch.choices.length, 2);
  assert.equal(batch.usage.prompt_tokens, 401);
  assert.equal(batch.usage.prompt_tokens_details.cached_tokens, 192);
  const oov = await post("/v1/completions", { model: MODEL, prompt: [1, 999_999] });
  assert.equal(oov.status, 400);
  assert.match(oov.json.error.message, /Token id 999999 is out of vocabulary/);
  assert.equal((await post("/v1/completions", { model: MODEL, prompt: [1, -2] })).status, 400);
  assert.equal((await post("/v1/completions", { model: MODEL, prompt: [[1], []] })).status, 400);
});

// ---------------------------------------------------------------- Chat tool calls

test("chat: tool calls when the model decides to, whole and streamed in pieces; otherwise text", async () => {
  const tools = [
    {
      type: "function",
      function: { name: "lookup", parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } },
    },
    { type: "function", function: { name: "get_weather", parameters: WEATHER } },
  ];
  const ask = (content: string, extra: Record<string, unknown> = {}) =>
    post("/v1/chat/completions", { model: MODEL, tools, messages: [{ role: "user", content }], ...extra });

  const mentioned = (await ask("What would get_weather say about Oslo?")).json.choices[0];
  assert.equal(mentioned.finish_reason, "tool_calls");
  assert.equal(mentioned.message.content, null);
  assert.equal(mentioned.message.tool_calls.length, 1);
  const call = mentioned.message.tool_calls[0];
  assert.match(call.id, /^chatcmpl-tool-/);
  assert.equal(call.type, "function");
  assert.equal(call.function.name, "get_weather");
  assertWeatherArguments(JSON.parse(call.function.arguments));

  const plain = (await ask("Tell me about the weather.")).json.choices[0];
  assert.equal(plain.finish_reason, "stop");
  assert.deepEqual(plain.message.tool_calls, []);
  assert.equal((await ask("a lookup_table is not lookup's name")).json.choices[0].message.tool_calls[0].function.name, "lookup");
  assert.equal((await ask("lookups and relookup")).json.choices[0].finish_reason, "stop", "a name inside a word is no mention");
  assert.equal((await ask("hi", { tool_choice: "required" })).json.choices[0].message.tool_calls[0].function.name, "lookup");
  const named = (await ask("hi", { tool_choice: { type: "function", function: { name: "get_weather" } } })).json.choices[0];
  assert.equal(named.message.tool_calls[0].function.name, "get_weather");
  assert.equal((await ask("get_weather", { tool_choice: "none" })).json.choices[0].finish_reason, "stop");
  assert.equal((await ask("hi", { tool_choice: { type: "function", function: { name: "nope" } } })).status, 400);
  assert.equal(
    (await post("/v1/chat/completions", { model: MODEL, tool_choice: "required", messages: [{ role: "user", content: "x" }] })).status,
    400,
  );
  // Deterministic: the same request, the same arguments.
  assert.equal(
    (await ask("What would get_weather say about Oslo?")).json.choices[0].message.tool_calls[0].function.arguments,
    call.function.arguments,
  );

  // The tool's result last: the model answers in text (an agent loop ends).
  const afterResult = await post("/v1/chat/completions", {
    model: MODEL,
    tools,
    messages: [
      { role: "user", content: "What would get_weather say about Oslo?" },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: "4 C and rain" },
    ],
  });
  assert.equal(afterResult.json.choices[0].finish_reason, "stop");
  assert.ok(afterResult.json.usage.prompt_tokens_details.cached_tokens > 0);

  const streamed = sse(
    (await ask("What would get_weather say about Oslo?", { stream: true, stream_options: { include_usage: true } })).text,
  );
  assert.equal(streamed.at(-1)!.data, "[DONE]");
  const chunks = streamed.slice(0, -2).map((e) => e.data);
  const first = chunks[0].choices[0].delta;
  assert.equal(first.role, "assistant");
  assert.deepEqual(first.tool_calls[0], {
    index: 0,
    id: first.tool_calls[0].id,
    type: "function",
    function: { name: "get_weather", arguments: "" },
  });
  assert.ok(
    chunks.slice(1).every((c) => c.choices[0].delta.tool_calls[0].index === 0 && c.choices[0].delta.tool_calls[0].id === undefined),
  );
  const args = chunks.map((c) => c.choices[0].delta.tool_calls[0].function.arguments).join("");
  assertWeatherArguments(JSON.parse(args));
  assert.deepEqual(
    chunks.map((c) => c.choices[0].finish_reason),
    [...Array(chunks.length - 1).fill(null), "tool_calls"],
  );
  assert.equal(streamed.at(-2)!.data.usage.completion_tokens, chunks.length);

  // max_tokens cuts a call short: finish_reason length, arguments not whole.
  const cut = (await ask("get_weather", { max_tokens: 3 })).json.choices[0];
  assert.equal(cut.finish_reason, "length");
  assert.equal(cut.message.tool_calls[0].function.arguments.length, 8);
});

// ---------------------------------------------------------------- Faults in each API's shapes

test("faults that cut a stream strike the Responses and Messages streams too, in their shapes", async () => {
  const responses = { model: MODEL, input: "cut me", stream: true };
  const messages = { model: MODEL, max_tokens: 50, stream: true, messages: [{ role: "user", content: "cut me" }] };
  try {
    await node.setFaults({ error_event_after_tokens: 2 });
    const r = sse((await post("/v1/responses", responses)).text);
    assert.equal(r.filter((e) => e.data.type === "response.output_text.delta").length, 2);
    assert.deepEqual(r.at(-1), {
      event: "error",
      data: { type: "error", sequence_number: r.length - 1, code: "server_error", message: "Internal server error", param: null },
    });
    const m = sse((await post("/v1/messages", messages)).text);
    assert.equal(m.filter((e) => e.event === "content_block_delta").length, 2);
    assert.deepEqual(m.at(-1), { event: "error", data: { type: "error", error: { type: "api_error", message: "Internal server error" } } });

    await node.setFaults({ error_event_after_tokens: null, malformed_after_tokens: 3 });
    for (const [path, body, event] of [
      ["/v1/responses", responses, "response.output_text.delta"],
      ["/v1/messages", messages, "content_block_delta"],
    ] as const) {
      const text = (await post(path, body)).text;
      const last = text.trimEnd().split("\n\n").at(-1)!;
      assert.match(last, new RegExp(`^event: ${event.replace(".", "\\.")}\ndata: \\{`));
      assert.throws(() => JSON.parse(last.split("\n")[1]!.slice(6)));
    }
    await node.setFaults({ malformed_after_tokens: null, error_rate: 1 });
    const failed = await post("/v1/messages", { ...messages, stream: false });
    assert.equal(failed.status, 500);
    assert.equal(failed.json.error.type, "api_error");
    assert.equal((await post("/v1/responses", { ...responses, stream: false })).json.error.code, 500);
  } finally {
    await node.setFaults({ error_event_after_tokens: null, malformed_after_tokens: null, error_rate: 0 });
  }
});

test("first bytes are recorded by request tag on every API", async () => {
  await post("/v1/responses", { model: MODEL, input: "[request-tag:api-resp] hi", stream: true });
  await post("/v1/responses", { model: MODEL, input: "[request-tag:api-resp-whole] hi" });
  await post("/v1/messages", {
    model: MODEL,
    max_tokens: 3,
    stream: true,
    messages: [{ role: "user", content: "[request-tag:api-msg] hi" }],
  });
  await post("/v1/completions", { model: MODEL, max_tokens: 3, prompt: ["no tag", "[request-tag:api-batch] hi"] });
  const tags = node.state().first_byte_tags;
  for (const t of ["api-resp", "api-resp-whole", "api-msg", "api-batch"]) assert.equal(tags[t], 1, t);
});
