import { describe, expect, it } from "vitest";
import { parseUsageTail } from "../../src/proxy/usage.ts";

describe("parseUsageTail", () => {
  it("reads usage from the last SSE event", () => {
    const tail = `data: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"total_tokens":107,"prompt_tokens_details":{"cached_tokens":64}}}\n\ndata: [DONE]\n\n`;
    expect(parseUsageTail(tail)).toEqual({ promptTokens: 100, cachedTokens: 64, completionTokens: 7 });
  });
  it("reads usage from a JSON answer, without cache details", () => {
    expect(parseUsageTail(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)).toEqual({
      promptTokens: 5,
      cachedTokens: 0,
      completionTokens: 1,
    });
  });
  it("ignores a usage key inside content and a cut-off object", () => {
    expect(parseUsageTail(`{"content":"the \\"usage\\" is","usage":{"prompt_tokens":`)).toBeUndefined();
    expect(parseUsageTail(`data: {"usage": null}`)).toBeUndefined();
  });
});
