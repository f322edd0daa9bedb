/**
 * The official OpenAI and Anthropic SDKs against a node, with no router between: their parsers
 * and stream accumulators (which check event order) take the node's answers. The SDKs are the
 * repository's dev dependencies; the fleet itself needs none of them.
 */
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import type { NodeHandle } from "../node.ts";
import { MODEL, startTestNode } from "./test-node.ts";

let node: NodeHandle;
let openai: OpenAI;
let anthropic: Anthropic;

before(async () => {
  node = await startTestNode("sdk", 8);
  openai = new OpenAI({ baseURL: node.url + "/v1", apiKey: "unused", maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: node.url, apiKey: "unused", maxRetries: 0 });
});

after(async () => {
  await node.stop();
});

const parameters = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
const context = "Background on prefix caches. ".repeat(40);

test("OpenAI: responses.create and a follow-up; responses.stream with a function call", async () => {
  const first = await openai.responses.create({ model: MODEL, instructions: "Be brief.", input: context + "First?" });
  assert.match(first.id, /^resp_/);
  assert.equal(first.output_text.split(" ").length, 8);
  const second = await openai.responses.create({
    model: MODEL,
    instructions: "Be brief.",
    input: "Second?",
    previous_response_id: first.id,
  });
  assert.ok(second.usage!.input_tokens_details.cached_tokens > 0);
  await assert.rejects(openai.responses.create({ model: MODEL, input: "x", previous_response_id: "resp_gone" }), (e: unknown) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, "response_not_found");
    return true;
  });
  const stream = openai.responses.stream({
    model: MODEL,
    input: "Use get_weather for Oslo.",
    tools: [{ type: "function", name: "get_weather", parameters, strict: false }],
  });
  const types: string[] = [];
  for await (const event of stream) types.push(event.type);
  const final = await stream.finalResponse();
  assert.equal(types[0], "response.created");
  assert.equal(types.at(-1), "response.completed");
  const call = final.output[0]!;
  assert.equal(call.type, "function_call");
  assert.equal(call.type === "function_call" && call.name, "get_weather");
  assert.equal(typeof JSON.parse(call.type === "function_call" ? call.arguments : "")["city"], "string");
});

test("OpenAI: a streamed chat completion with a tool call; completions with several prompts", async () => {
  const stream = openai.chat.completions.stream({
    model: MODEL,
    messages: [{ role: "user", content: "Use get_weather for Oslo." }],
    tools: [{ type: "function", function: { name: "get_weather", parameters } }],
  });
  const done = await stream.finalChatCompletion();
  assert.equal(done.choices[0]!.finish_reason, "tool_calls");
  const call = done.choices[0]!.message.tool_calls![0]!;
  assert.equal(call.type === "function" && call.function.name, "get_weather");
  assert.deepEqual(Object.keys(JSON.parse(call.type === "function" ? call.function.arguments : "")), ["city"]);
  const batch = await openai.completions.create({ model: MODEL, prompt: ["one", "two"], max_tokens: 2 });
  assert.deepEqual(
    batch.choices.map((c) => c.index),
    [0, 1],
  );
});

test("Anthropic: messages.create and messages.stream, text and tool_use", async () => {
  const request = { model: MODEL, max_tokens: 64, system: context, messages: [{ role: "user" as const, content: "Hello" }] };
  await anthropic.messages.create(request);
  const warm = await anthropic.messages.create(request);
  assert.equal(warm.content[0]!.type, "text");
  assert.equal(warm.stop_reason, "end_turn");
  assert.ok(warm.usage.cache_read_input_tokens! > 0);
  const stream = anthropic.messages.stream({
    model: MODEL,
    max_tokens: 64,
    tools: [{ name: "get_weather", input_schema: parameters as Anthropic.Tool.InputSchema }],
    messages: [{ role: "user", content: "Use get_weather for Oslo." }],
  });
  const message = await stream.finalMessage();
  assert.equal(message.stop_reason, "tool_use");
  const block = message.content[0]!;
  assert.equal(block.type, "tool_use");
  assert.equal(typeof (block.type === "tool_use" && (block.input as { city: unknown }).city), "string");
  assert.ok(message.usage.output_tokens > 1);
  await assert.rejects(anthropic.messages.create({ ...request, model: "nope" }), Anthropic.NotFoundError);
});
