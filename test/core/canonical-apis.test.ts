/** The Responses and Messages APIs canonicalised as chat (src/core/canonical-apis.ts). */
import { describe, expect, it } from "vitest";
import { canonicalText } from "../../src/core/canonical.ts";
import { anthropicPrompt, responsesPrompt } from "../../src/core/canonical-apis.ts";

const tool = {
  name: "get_weather",
  description: "Weather by city",
  parameters: { type: "object", properties: { city: { type: "string" } } },
};
const chatTool = { type: "function", function: tool };

describe("Responses API as chat", () => {
  it("renders instructions, input and function tools as the same chat conversation", () => {
    const responses = responsesPrompt({
      instructions: "You are terse.",
      input: [
        { role: "user", content: [{ type: "input_text", text: "Weather in Oslo?" }] },
        { type: "function_call", call_id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { type: "function_call_output", call_id: "c1", output: "4 C, rain" },
      ],
      tools: [{ type: "function", ...tool }],
    });
    const chat = {
      kind: "chat" as const,
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: [{ type: "text", text: "Weather in Oslo?" }] },
        {
          role: "assistant",
          tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }],
        },
        { role: "tool", tool_call_id: "c1", content: "4 C, rain" },
      ],
      tools: [chatTool],
    };
    expect(canonicalText(responses)).toBe(canonicalText(chat));
  });

  it("keeps earlier items' text when the input grows, and a string input is one user turn", () => {
    const one = canonicalText(responsesPrompt({ instructions: "Be brief.", input: "Hello" }));
    const two = canonicalText(
      responsesPrompt({
        instructions: "Be brief.",
        input: [
          { role: "user", content: "Hello" },
          { type: "message", role: "assistant", content: [{ type: "output_text", text: "Hi." }] },
          { role: "user", content: "More" },
        ],
      }),
    );
    expect(two.startsWith(one)).toBe(true);
  });
});

describe("Anthropic Messages API as chat", () => {
  it("renders system, tool use and tool results as the same chat conversation", () => {
    const messages = anthropicPrompt({
      system: [{ type: "text", text: "You are terse.", cache_control: { type: "ephemeral" } }],
      messages: [
        { role: "user", content: "Weather in Oslo?" },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Checking." },
            { type: "tool_use", id: "t1", name: "get_weather", input: { city: "Oslo" } },
          ],
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "4 C, rain" }] },
      ],
      tools: [{ name: tool.name, description: tool.description, input_schema: tool.parameters }],
    });
    const chat = {
      kind: "chat" as const,
      messages: [
        { role: "system", content: [{ type: "text", text: "You are terse." }] },
        { role: "user", content: "Weather in Oslo?" },
        {
          role: "assistant",
          content: [{ type: "text", text: "Checking." }],
          tool_calls: [{ id: "t1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }],
        },
        { role: "tool", tool_call_id: "t1", content: "4 C, rain" },
      ],
      tools: [chatTool],
    };
    expect(canonicalText(messages)).toBe(canonicalText(chat));
    // A system prompt as a string or as text blocks (cache_control aside) is the same prefix.
    const asString = anthropicPrompt({
      system: "You are terse.",
      messages: [{ role: "user", content: "Weather in Oslo?" }],
      tools: [{ name: tool.name, description: tool.description, input_schema: tool.parameters }],
    });
    expect(canonicalText(messages).startsWith(canonicalText(asString))).toBe(true);
  });
});
