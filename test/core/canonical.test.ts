import { describe, expect, it } from "vitest";
import { canonicalText, stableJson } from "../../src/core/canonical.ts";

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
