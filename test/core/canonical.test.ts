import { describe, expect, it } from "vitest";
import { canonicalText, stableJson } from "../../src/core/canonical.ts";
import { anthropicPrompt, responsesPrompt } from "../../src/core/canonical-apis.ts";
import { checkJsonBounds, JsonBoundsError, MAX_JSON_DEPTH, MAX_JSON_VALUES } from "../../src/core/json-bounds.ts";

/** `levels` nested arrays (`nest(1)` is `[]`), built without recursion. */
function nest(levels: number): unknown {
  let value: unknown[] = [];
  for (let i = 1; i < levels; i++) value = [value];
  return value;
}

/** The error `fn` throws (undefined if none). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
    return undefined;
  } catch (e) {
    return e;
  }
}

describe("canonicalisation", () => {
  const sys = { role: "system", content: "You are terse." };
  const u1 = { role: "user", content: "Hi" };
  const a1 = { role: "assistant", content: "Hello." };
  const u2 = { role: "user", content: "More" };

  it("keeps the text of earlier turns when a conversation grows", () => {
    const turn1 = canonicalText({ kind: "chat", messages: [sys, u1] });
    const turn2 = canonicalText({ kind: "chat", messages: [sys, u1, a1, u2] });
    expect(turn2.startsWith(turn1)).toBe(true);
  });

  it("distinguishes role, name, content parts, tool calls and tools", () => {
    const base = canonicalText({ kind: "chat", messages: [u1] });
    expect(canonicalText({ kind: "chat", messages: [{ role: "system", content: "Hi" }] })).not.toBe(base);
    expect(canonicalText({ kind: "chat", messages: [{ ...u1, name: "bob" }] })).not.toBe(base);
    expect(canonicalText({ kind: "chat", messages: [u1], tools: [{ type: "function", function: { name: "f" } }] })).not.toBe(base);
    const withCall = canonicalText({
      kind: "chat",
      messages: [{ role: "assistant", content: null, tool_calls: [{ id: "1", function: { name: "f", arguments: "{}" } }] }],
    });
    const otherCall = canonicalText({
      kind: "chat",
      messages: [{ role: "assistant", content: null, tool_calls: [{ id: "1", function: { name: "g", arguments: "{}" } }] }],
    });
    expect(withCall).not.toBe(otherCall);
    const image = canonicalText({
      kind: "chat",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Hi" },
            { type: "image_url", image_url: { url: "https://x/1.png" } },
          ],
        },
      ],
    });
    const image2 = canonicalText({
      kind: "chat",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Hi" },
            { type: "image_url", image_url: { url: "https://x/2.png" } },
          ],
        },
      ],
    });
    expect(image).not.toBe(image2);
  });

  it("treats text content parts like the same string", () => {
    const plain = canonicalText({ kind: "chat", messages: [u1] });
    const parts = canonicalText({ kind: "chat", messages: [{ role: "user", content: [{ type: "text", text: "Hi" }] }] });
    expect(parts).toBe(plain);
  });

  it("ignores key order in tool definitions", () => {
    expect(stableJson({ b: 1, a: [{ y: 2, x: 1 }] })).toBe(stableJson({ a: [{ x: 1, y: 2 }], b: 1 }));
  });

  it("canonicalises completion prompts of every shape", () => {
    expect(canonicalText({ kind: "completion", prompt: "abc" })).toBe("abc");
    expect(canonicalText({ kind: "completion", prompt: ["a", "b"] })).not.toBe(canonicalText({ kind: "completion", prompt: ["ab"] }));
    expect(canonicalText({ kind: "completion", prompt: [1, 2, 3] })).toBe("[1,2,3]");
  });
});

describe("the JSON depth and size bounds", () => {
  it("checkJsonBounds: the body is level 1; a primitive adds no level", () => {
    expect(() => checkJsonBounds(nest(MAX_JSON_DEPTH))).not.toThrow();
    expect(() => checkJsonBounds({ a: nest(MAX_JSON_DEPTH - 1) })).not.toThrow();
    expect(() => checkJsonBounds([[["deep string"]]], { maxDepth: 3, maxValues: 100 })).not.toThrow();
    const e = thrown(() => checkJsonBounds(nest(MAX_JSON_DEPTH + 1)));
    expect(e).toBeInstanceOf(JsonBoundsError);
    expect((e as JsonBoundsError).code).toBe("nesting_too_deep");
    expect((e as JsonBoundsError).message).toContain(String(MAX_JSON_DEPTH));
    expect(() => checkJsonBounds("text")).not.toThrow();
    expect(() => checkJsonBounds(null)).not.toThrow();
  });

  it("checkJsonBounds is iterative: a million levels is a JsonBoundsError, never a stack overflow", () => {
    expect((thrown(() => checkJsonBounds(nest(1_000_000))) as JsonBoundsError).code).toBe("nesting_too_deep");
    // Nesting through objects, and deep nesting in one branch of a wide value.
    let obj: unknown = {};
    for (let i = 0; i < 100_000; i++) obj = { k: obj };
    expect((thrown(() => checkJsonBounds(obj)) as JsonBoundsError).code).toBe("nesting_too_deep");
    expect((thrown(() => checkJsonBounds({ a: [1, 2, 3], b: { c: nest(MAX_JSON_DEPTH) } })) as JsonBoundsError).code).toBe(
      "nesting_too_deep",
    );
  });

  it("checkJsonBounds counts values, the body included", () => {
    expect(() => checkJsonBounds(new Array(99).fill(0), { maxDepth: 64, maxValues: 100 })).not.toThrow();
    const e = thrown(() => checkJsonBounds({ a: new Array(100).fill(0) }, { maxDepth: 64, maxValues: 100 }));
    expect((e as JsonBoundsError).code).toBe("too_many_json_values");
    expect(MAX_JSON_VALUES).toBeGreaterThanOrEqual(2 * 1024 * 1024);
  });

  it("stableJson and canonicalText carry the depth bound in their own walk: a 400-able error, not a RangeError", () => {
    expect(stableJson(nest(MAX_JSON_DEPTH))).toBe("[".repeat(MAX_JSON_DEPTH) + "]".repeat(MAX_JSON_DEPTH));
    for (const levels of [MAX_JSON_DEPTH + 1, 2_800, 100_000]) {
      const deep = nest(levels);
      expect((thrown(() => stableJson(deep)) as JsonBoundsError).code).toBe("nesting_too_deep");
      // Where the attack put it: tool definitions, a content part, tool calls.
      const walks = [
        () => canonicalText({ kind: "chat", messages: [{ role: "user", content: "x" }], tools: [{ type: "function", function: deep }] }),
        () => canonicalText({ kind: "chat", messages: [{ role: "user", content: [{ type: "image_url", image_url: deep }] }] }),
        () => canonicalText({ kind: "chat", messages: [{ role: "assistant", tool_calls: [{ id: "a", function: deep }] }] }),
        () => canonicalText({ kind: "completion", prompt: deep }),
        () => canonicalText(responsesPrompt({ input: "x", tools: [{ type: "function", name: "f", parameters: deep }] })),
        () => canonicalText(responsesPrompt({ input: [{ type: "reasoning", summary: deep }] })),
        () =>
          canonicalText(
            anthropicPrompt({ messages: [{ role: "user", content: [{ type: "tool_use", id: "t", name: "f", input: deep }] }] }),
          ),
      ];
      for (const walk of walks) expect(thrown(walk)).toBeInstanceOf(JsonBoundsError);
    }
  });

  it("the bound changes no canonical text within it", () => {
    const value = { b: [1, "two", null, true, { d: 4.5, c: [] }], a: { z: -0, y: "\u0000\ud800" } };
    expect(stableJson(value)).toBe('{"a":{"y":"\\u0000\\ud800","z":0},"b":[1,"two",null,true,{"c":[],"d":4.5}]}');
  });
});
