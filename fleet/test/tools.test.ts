/** The simulated model's tool decision and its arguments (tools.ts). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { chooseTool, exampleArguments, mentions, toolCallOutput, type FunctionTool } from "../tools.ts";

const tools: FunctionTool[] = [
  { name: "search", parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] } },
  { name: "get_weather", parameters: {} },
];

test("a function is mentioned only as a word of its own", () => {
  assert.ok(mentions("please search for it", "search"));
  assert.ok(mentions("search", "search"));
  assert.ok(mentions("(get_weather)", "get_weather"));
  assert.ok(!mentions("research this", "search"));
  assert.ok(!mentions("searching", "search"));
  assert.ok(!mentions("my_search_tool", "search"));
  assert.ok(mentions("research, then search", "search"), "a later occurrence counts");
});

test("the decision: none, named, required, auto by mention", () => {
  assert.equal(chooseTool(tools, { mode: "none" }, "search"), undefined);
  assert.equal(chooseTool(tools, { mode: "auto" }, "what is the weather"), undefined);
  assert.equal(chooseTool(tools, { mode: "auto" }, undefined), undefined, "no user text last: no call");
  assert.equal(chooseTool(tools, { mode: "auto" }, "call get_weather")?.name, "get_weather");
  assert.equal(chooseTool(tools, { mode: "auto" }, "get_weather or search")?.name, "search", "the first in tools order");
  assert.equal(chooseTool(tools, { mode: "required" }, "hello")?.name, "search");
  assert.equal(chooseTool(tools, { mode: "required" }, "get_weather")?.name, "get_weather");
  assert.equal(chooseTool(tools, { mode: "named", name: "get_weather" }, "search")?.name, "get_weather");
  assert.throws(() => chooseTool(tools, { mode: "named", name: "nope" }, "x"), /does not match/);
  assert.throws(() => chooseTool([], { mode: "required" }, "x"), /tools` must be set/);
  assert.equal(chooseTool([], { mode: "auto" }, "search"), undefined);
});

test("arguments are valid against the schema: required properties only, deterministic", () => {
  const schema = {
    type: "object",
    properties: {
      city: { type: "string" },
      unit: { type: "string", enum: ["celsius", "fahrenheit"] },
      days: { type: "integer", minimum: 3, maximum: 10 },
      ratio: { type: "number", exclusiveMaximum: 1 },
      metric: { type: "boolean" },
      tags: { type: "array", items: { type: "string" }, minItems: 2 },
      none: { type: "array", items: { type: "string" } },
      where: { type: "object", properties: { lat: { type: "number" }, name: { type: ["string", "null"] } }, required: ["lat", "name"] },
      kind: { const: "fixed" },
      either: { anyOf: [{ type: "integer" }, { type: "string" }] },
      optional: { type: "string" },
    },
    required: ["city", "unit", "days", "ratio", "metric", "tags", "none", "where", "kind", "either"],
  };
  const a = exampleArguments(schema, 7) as Record<string, any>;
  assert.deepEqual(Object.keys(a), ["city", "unit", "days", "ratio", "metric", "tags", "none", "where", "kind", "either"]);
  assert.match(a.city, /^[a-z]+$/);
  assert.equal(a.unit, "celsius");
  assert.equal(a.days, 3);
  assert.equal(a.ratio, 0);
  assert.equal(a.metric, true);
  assert.equal(a.tags.length, 2);
  assert.ok(a.tags.every((t: unknown) => typeof t === "string"));
  assert.deepEqual(a.none, []);
  assert.equal(a.where.lat, 1);
  assert.equal(typeof a.where.name, "string");
  assert.equal(a.kind, "fixed");
  assert.equal(a.either, 1);
  assert.deepEqual(exampleArguments(schema, 7), a, "deterministic");
  assert.notDeepEqual(exampleArguments(schema, 8), a, "seeded by the prompt");
  assert.deepEqual(exampleArguments(undefined, 1), {});
  assert.deepEqual(exampleArguments({ type: "object" }, 1), {});
});

test("a call streams its name, then its arguments 4 characters a token; max_tokens cuts it", () => {
  const whole = toolCallOutput(tools[0]!, 3, "call_1", undefined);
  const args = whole.call!.arguments;
  assert.deepEqual(Object.keys(JSON.parse(args)), ["q"]);
  assert.equal(whole.completionTokens, 1 + Math.ceil(args.length / 4));
  assert.equal(whole.finishReason, "tool_calls");
  assert.equal(whole.piece(0), "");
  assert.equal(Array.from({ length: whole.completionTokens }, (_, i) => whole.piece(i)).join(""), args);
  const cut = toolCallOutput(tools[0]!, 3, "call_1", 2);
  assert.equal(cut.completionTokens, 2);
  assert.equal(cut.finishReason, "length");
  assert.equal(cut.call!.arguments, args.slice(0, 4));
  assert.equal(toolCallOutput(tools[0]!, 3, "call_1", whole.completionTokens + 1).finishReason, "tool_calls");
});
