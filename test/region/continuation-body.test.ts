import { describe, expect, it } from "vitest";
import { continuationBody, refusalOf } from "../../src/region/continuation-body.ts";

const chat = { model: "m", stream: true, messages: [{ role: "user", content: "hi" }] };

describe("continuationBody", () => {
  it("appends the text as a final assistant message to continue, the rest of the body unchanged", () => {
    const out = continuationBody({ ...chat, cache_salt: "s", max_completion_tokens: 10 }, "chat", "Hello wor", 3, "vllm");
    expect(out).toEqual({
      ok: true,
      body: {
        ...chat,
        cache_salt: "s",
        max_completion_tokens: 7,
        messages: [...chat.messages, { role: "assistant", content: "Hello wor" }],
        continue_final_message: true,
        add_generation_prompt: false,
      },
    });
  });

  it("appends to a client's own prefill rather than adding a second assistant message", () => {
    const prefill = { ...chat, continue_final_message: true, messages: [...chat.messages, { role: "assistant", content: "{" }] };
    const out = continuationBody(prefill, "chat", '"a":', 2, "sglang");
    expect(out.ok && (out.body.messages as unknown[]).at(-1)).toEqual({ role: "assistant", content: '{"a":' });
    expect(out.ok && (out.body.messages as unknown[]).length).toBe(2);
  });

  it("resends the request as it was when nothing reached the client", () => {
    expect(continuationBody(chat, "chat", "", 0, "vllm")).toEqual({ ok: true, body: chat });
  });

  it("appends to a completion's prompt, and spends the rest of vLLM's and SGLang's default of 16 tokens", () => {
    const body = { model: "m", prompt: ["Once"], stream: true };
    expect(continuationBody(body, "completion", " upon", 1, "vllm")).toEqual({
      ok: true,
      body: { ...body, prompt: "Once upon", max_tokens: 15 },
    });
    expect(continuationBody(body, "completion", " upon", 1, "llama.cpp")).toEqual({ ok: true, body: { ...body, prompt: "Once upon" } });
  });

  it("says the answer is over when its budget is spent", () => {
    expect(continuationBody({ ...chat, max_tokens: 4 }, "chat", "a b c d", 4, "vllm")).toEqual({ ok: false, finish: "length" });
  });

  it("refuses what it cannot continue exactly", () => {
    expect(refusalOf({ ...chat, n: 2 }, "chat")).toBe("n");
    expect(refusalOf({ ...chat, logprobs: true }, "chat")).toBe("logprobs");
    expect(refusalOf({ ...chat, logprobs: false }, "chat")).toBeUndefined();
    expect(refusalOf({ model: "m", prompt: "x", logprobs: 0 }, "completion")).toBe("logprobs");
    expect(refusalOf({ model: "m", prompt: "x", echo: true }, "completion")).toBe("echo");
    expect(refusalOf({ model: "m", prompt: "x", best_of: 3 }, "completion")).toBe("best-of");
    expect(refusalOf({ model: "m", prompt: [1, 2, 3] }, "completion")).toBe("prompt");
    expect(refusalOf({ ...chat, response_format: { type: "json_schema" } }, "chat")).toBe("structured-output");
    expect(refusalOf({ ...chat, guided_regex: "a+" }, "chat")).toBe("structured-output");
    const parts = { ...chat, continue_final_message: true, messages: [{ role: "assistant", content: [{ type: "text", text: "{" }] }] };
    expect(refusalOf(parts, "chat")).toBe("prefill-parts");
  });

  it("never asks for more than the client has left, whatever count it is given", () => {
    // A node's `completion_tokens: -100000` once made this 100,012 for a client that asked for 12.
    for (const tokens of [-100_000, -1, 2.5, Number.NaN]) {
      const built = continuationBody({ ...chat, max_tokens: 12 }, "chat", "a b", tokens, "vllm");
      expect(built.ok && built.body.max_tokens).toBe(12);
    }
    const built = continuationBody({ ...chat, max_tokens: 12, max_completion_tokens: 12 }, "chat", "a b", 2, "vllm");
    expect(built.ok && [built.body.max_tokens, built.body.max_completion_tokens]).toEqual([10, 10]);
    expect(continuationBody({ ...chat, max_tokens: 12 }, "chat", "a", 9e15, "vllm")).toEqual({ ok: false, finish: "length" });
  });
});
