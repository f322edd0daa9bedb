/**
 * Structured output (structured-output.ts) over HTTP against a real node: chat's and completions'
 * `response_format`, the Responses API's `text.format`, whole and streamed; the token accounting
 * (4 characters a token, `max_tokens` cutting the JSON with `finish_reason` "length"); and vLLM's
 * 400s for a bad format, in OpenAI's shape. Schemas are zod's (`z.toJSONSchema`), and the answers
 * must parse with the zod schema they came from.
 */
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { z } from "zod";
import type { NodeHandle } from "../node.ts";
import { MODEL, postJson, sseEvents, startTestNode } from "./test-node.ts";
import { chatResponseFormat, jsonOutput, responsesTextFormat, structuredText } from "../structured-output.ts";

/** The node's natural answer length (default_max_tokens). */
const D = 24;
let node: NodeHandle;

before(async () => {
  node = await startTestNode("structured", D);
});

after(async () => {
  await node.stop();
});

const post = (path: string, body: unknown) => postJson(node, path, body);
const sse = sseEvents;

const Weather = z
  .object({
    city: z.string().min(2),
    days: z.array(z.object({ day: z.int().min(1).max(7), high: z.number(), sky: z.enum(["sun", "rain"]) })).min(3),
    alert: z.string().nullable(),
    unit: z.enum(["C", "F"]).optional(),
  })
  .strict();
const WEATHER_SCHEMA = z.toJSONSchema(Weather);
const jsonSchemaFormat = { type: "json_schema", json_schema: { name: "weather", schema: WEATHER_SCHEMA, strict: true } };
const messages = (word: string) => [{ role: "user", content: `${word}: the weather for Oslo this week, as JSON.` }];

// ---------------------------------------------------------------- chat

test("chat, whole: content is JSON valid against the schema; completion tokens are its 4-character pieces", async () => {
  const r = await post("/v1/chat/completions", { model: MODEL, messages: messages("whole"), response_format: jsonSchemaFormat });
  assert.equal(r.status, 200);
  const choice = r.json.choices[0];
  const content: string = choice.message.content;
  const parsed = Weather.parse(JSON.parse(content));
  assert.equal(parsed.days.length, 3);
  assert.equal(choice.finish_reason, "stop");
  assert.equal(r.json.usage.completion_tokens, Math.ceil(content.length / 4));
  // The same prompt, the same answer (the node is deterministic); another prompt, other words.
  const again = await post("/v1/chat/completions", { model: MODEL, messages: messages("whole"), response_format: jsonSchemaFormat });
  assert.equal(again.json.choices[0].message.content, content);
  const other = await post("/v1/chat/completions", { model: MODEL, messages: messages("other prompt"), response_format: jsonSchemaFormat });
  assert.notEqual(other.json.choices[0].message.content, content);
  Weather.parse(JSON.parse(other.json.choices[0].message.content));
});

test("chat, streamed: the deltas are the JSON, one token a chunk, usage counting them", async () => {
  const body = { model: MODEL, messages: messages("stream"), response_format: jsonSchemaFormat };
  const whole = (await post("/v1/chat/completions", body)).json;
  const r = await post("/v1/chat/completions", { ...body, stream: true, stream_options: { include_usage: true } });
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type") ?? "", /text\/event-stream/);
  const events = sse(r.text);
  assert.equal(events.at(-1)!.data, "[DONE]");
  const chunks = events.slice(0, -1).map((e) => e.data);
  const usage = chunks.at(-1).usage;
  const tokens = chunks.filter((c) => c.choices.length > 0);
  const text = tokens.map((c) => c.choices[0].delta.content).join("");
  assert.equal(text, whole.choices[0].message.content);
  Weather.parse(JSON.parse(text));
  assert.equal(tokens.length, usage.completion_tokens);
  assert.equal(tokens[0].choices[0].delta.role, "assistant");
  assert.equal(tokens.at(-1).choices[0].finish_reason, "stop");
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

test("chat: max_tokens cuts the JSON short with finish_reason length, as an engine does", async () => {
  const body = { model: MODEL, messages: messages("cut"), response_format: jsonSchemaFormat };
  const whole: string = (await post("/v1/chat/completions", body)).json.choices[0].message.content;
  const r = await post("/v1/chat/completions", { ...body, max_tokens: 5 });
  assert.equal(r.json.choices[0].finish_reason, "length");
  assert.equal(r.json.usage.completion_tokens, 5);
  assert.equal(r.json.choices[0].message.content, whole.slice(0, 20));
  assert.throws(() => JSON.parse(r.json.choices[0].message.content), SyntaxError);
  const s = await post("/v1/chat/completions", { ...body, max_completion_tokens: 5, stream: true });
  const tokens = sse(s.text)
    .slice(0, -1)
    .map((e) => e.data);
  assert.equal(tokens.length, 5);
  assert.equal(tokens.at(-1).choices[0].finish_reason, "length");
});

test("chat: json_object answers a JSON object within the natural length", async () => {
  const r = await post("/v1/chat/completions", { model: MODEL, messages: messages("object"), response_format: { type: "json_object" } });
  const content: string = r.json.choices[0].message.content;
  const parsed = z
    .object({ answer: z.string().min(1) })
    .strict()
    .parse(JSON.parse(content));
  assert.ok(parsed.answer.split(" ").length > 1);
  assert.ok(r.json.usage.completion_tokens <= D);
  assert.equal(r.json.usage.completion_tokens, Math.ceil(content.length / 4));
  assert.equal(r.json.choices[0].finish_reason, "stop");
  // A json_schema without a schema is any JSON object: the same answer.
  const noSchema = await post("/v1/chat/completions", {
    model: MODEL,
    messages: messages("object"),
    response_format: { type: "json_schema", json_schema: { name: "anything" } },
  });
  assert.equal(noSchema.json.choices[0].message.content, content);
  // "text" is the filler answer.
  const text = await post("/v1/chat/completions", { model: MODEL, messages: messages("object"), response_format: { type: "text" } });
  assert.throws(() => JSON.parse(text.json.choices[0].message.content));
});

test("chat: a named tool_choice calls the function, whatever the response_format", async () => {
  const r = await post("/v1/chat/completions", {
    model: MODEL,
    messages: messages("tool"),
    response_format: jsonSchemaFormat,
    tools: [{ type: "function", function: { name: "lookup", parameters: { type: "object", properties: {} } } }],
    tool_choice: { type: "function", function: { name: "lookup" } },
  });
  assert.equal(r.json.choices[0].finish_reason, "tool_calls");
  assert.equal(r.json.choices[0].message.tool_calls[0].function.name, "lookup");
});

test("completions: response_format applies to each prompt of a batch", async () => {
  const r = await post("/v1/completions", {
    model: MODEL,
    prompt: ["The weather in Oslo:", "The weather in Bergen, this week:"],
    response_format: jsonSchemaFormat,
  });
  assert.equal(r.status, 200);
  assert.equal(r.json.choices.length, 2);
  let tokens = 0;
  for (const c of r.json.choices) {
    Weather.parse(JSON.parse(c.text));
    tokens += Math.ceil(c.text.length / 4);
  }
  assert.equal(r.json.usage.completion_tokens, tokens);
});

test("a bad response_format is a 400 in OpenAI's shape naming the field", async () => {
  const cases: [unknown, string][] = [
    ["json", "response_format"],
    [{ type: "xml" }, "response_format.type"],
    [{ type: "json_schema" }, "response_format.json_schema"],
    [{ type: "json_schema", json_schema: { schema: {} } }, "response_format.json_schema.name"],
    [{ type: "json_schema", json_schema: { name: "x", schema: "object" } }, "response_format.json_schema.schema"],
    [{ type: "json_schema", json_schema: { name: "x", schema: {}, strict: "yes" } }, "response_format.json_schema.strict"],
  ];
  for (const [format, param] of cases) {
    const r = await post("/v1/chat/completions", { model: MODEL, messages: messages("bad"), response_format: format });
    assert.equal(r.status, 400, JSON.stringify(format));
    assert.deepEqual(Object.keys(r.json.error).sort(), ["code", "message", "param", "type"]);
    assert.equal(r.json.error.type, "BadRequestError");
    assert.equal(r.json.error.code, 400);
    assert.equal(r.json.error.param, param);
    assert.ok(!r.json.error.message.includes("xml"), "the message names the field, never the value sent");
  }
});

// ---------------------------------------------------------------- Responses API

const responsesFormat = { format: { type: "json_schema", name: "weather", schema: WEATHER_SCHEMA, strict: true } };

test("responses: text.format json_schema, whole and streamed; the format echoed; max_output_tokens cuts it", async () => {
  const body = { model: MODEL, input: "The weather for Tromsø, as JSON.", text: responsesFormat, store: false };
  const r = await post("/v1/responses", body);
  assert.equal(r.status, 200);
  const text: string = r.json.output[0].content[0].text;
  Weather.parse(JSON.parse(text));
  assert.deepEqual(r.json.text, responsesFormat);
  assert.equal(r.json.usage.output_tokens, Math.ceil(text.length / 4));
  assert.equal(r.json.status, "completed");

  const s = await post("/v1/responses", { ...body, stream: true });
  const events = sse(s.text);
  const deltas = events.filter((e) => e.event === "response.output_text.delta").map((e) => e.data.delta);
  assert.equal(deltas.join(""), text);
  assert.equal(events.find((e) => e.event === "response.output_text.done")!.data.text, text);
  assert.equal(events.at(-1)!.event, "response.completed");
  assert.equal(events.at(-1)!.data.response.usage.output_tokens, deltas.length);

  const cut = await post("/v1/responses", { ...body, max_output_tokens: 3 });
  assert.equal(cut.json.status, "incomplete");
  assert.equal(cut.json.output[0].content[0].text, text.slice(0, 12));

  const object = await post("/v1/responses", { ...body, text: { format: { type: "json_object" } } });
  assert.equal(typeof JSON.parse(object.json.output[0].content[0].text).answer, "string");
});

test("responses: a json_schema format without its schema, or of an unknown type, is a 400", async () => {
  for (const [format, param] of [
    [{ type: "json_schema", name: "x" }, "text.format.schema"],
    [{ type: "yaml" }, "text.format.type"],
  ] as const) {
    const r = await post("/v1/responses", { model: MODEL, input: "x", text: { format } });
    assert.equal(r.status, 400);
    assert.equal(r.json.error.param, param);
  }
});

// ---------------------------------------------------------------- units

test("parsing: text and absent formats are text; json_schema keeps name, schema and strict", () => {
  assert.deepEqual(chatResponseFormat(undefined), { type: "text" });
  assert.deepEqual(chatResponseFormat({ type: "text" }), { type: "text" });
  assert.deepEqual(chatResponseFormat({ type: "json_schema", json_schema: { name: "n", schema: { type: "object" }, strict: true } }), {
    type: "json_schema",
    name: "n",
    schema: { type: "object" },
    strict: true,
  });
  assert.deepEqual(responsesTextFormat({}), { type: "text" });
  assert.deepEqual(responsesTextFormat({ format: { type: "json_object" } }), { type: "json_object" });
});

test("jsonOutput: pieces of 4 characters, the limit at or under the length is 'length'", () => {
  const json = structuredText({ type: "json_object" }, 7, 16);
  const whole = jsonOutput(json, undefined);
  assert.equal(whole.completionTokens, Math.ceil(json.length / 4));
  assert.equal(Array.from({ length: whole.completionTokens }, (_, i) => whole.piece(i)).join(""), json);
  assert.equal(whole.text(), json);
  assert.equal(whole.finishReason, "stop");
  assert.equal(jsonOutput(json, whole.completionTokens).finishReason, "length");
  assert.equal(jsonOutput(json, whole.completionTokens + 1).finishReason, "stop");
  assert.equal(jsonOutput(json, 2).text(), json.slice(0, 8));
});
