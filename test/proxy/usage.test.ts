import { describe, expect, it } from "vitest";
import { parseAnswerTail, parseUsageTail } from "../../src/proxy/usage.ts";

describe("parseUsageTail", () => {
  it("reads usage from the last SSE event", () => {
    const tail = `data: {"choices":[{"delta":{"content":"x"}}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"total_tokens":107,"prompt_tokens_details":{"cached_tokens":64}}}\n\ndata: [DONE]\n\n`;
    expect(parseUsageTail(tail)).toEqual({ promptTokens: 100, cachedTokens: 64, completionTokens: 7 });
  });
  it("reads usage from a JSON answer; without cache details the cached tokens are unknown, not zero", () => {
    expect(parseUsageTail(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)).toEqual({
      promptTokens: 5,
      completionTokens: 1,
    });
  });
  it("ignores a usage key inside content and a cut-off object", () => {
    expect(parseUsageTail(`{"content":"the \\"usage\\" is","usage":{"prompt_tokens":`)).toBeUndefined();
    expect(parseUsageTail(`data: {"usage": null}`)).toBeUndefined();
  });
});

describe("parseAnswerTail: llama.cpp's timings", () => {
  // The shape of llama-server's final stream event (tools/server: timings with cache_n and prompt_n).
  const llama = `data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1,"model":"m","object":"chat.completion.chunk","usage":{"completion_tokens":8,"prompt_tokens":1024,"total_tokens":1032},"timings":{"cache_n":960,"prompt_n":64,"prompt_ms":20.5,"predicted_n":8,"predicted_ms":90.1}}\n\ndata: [DONE]\n\n`;

  it("fills cached tokens from timings.cache_n when usage has no details", () => {
    expect(parseAnswerTail(llama)).toEqual({ promptTokens: 1024, cachedTokens: 960, completionTokens: 8 });
  });
  it("reads timings alone (a server that sends no usage)", () => {
    expect(parseAnswerTail(`{"content":"hi","timings":{"cache_n":10,"prompt_n":5}}`)).toEqual({
      promptTokens: 15,
      cachedTokens: 10,
      completionTokens: 0,
    });
  });
  it("prefers usage's own cached tokens when both are there", () => {
    const both = `{"usage":{"prompt_tokens":100,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":90}},"timings":{"cache_n":1,"prompt_n":99}}`;
    expect(parseAnswerTail(both)).toMatchObject({ cachedTokens: 90 });
  });
});

describe("usage of the Responses and Messages APIs", () => {
  it("reads the Responses API's input_tokens_details.cached_tokens (the last event's response.usage)", () => {
    const tail =
      'event: response.completed\ndata: {"type":"response.completed","response":{"id":"resp_1","usage":{"input_tokens":2000,"input_tokens_details":{"cached_tokens":1536},"output_tokens":12,"total_tokens":2012}}}\n\n';
    expect(parseAnswerTail(tail)).toEqual({ promptTokens: 2000, cachedTokens: 1536, completionTokens: 12 });
  });

  it("adds Anthropic's cache reads and writes to input_tokens, which counts only the rest", () => {
    const body =
      '{"type":"message","usage":{"input_tokens":100,"cache_read_input_tokens":1800,"cache_creation_input_tokens":50,"output_tokens":7}}';
    expect(parseAnswerTail(body)).toEqual({ promptTokens: 1950, cachedTokens: 1800, completionTokens: 7 });
    // Without cache fields nothing is known about the cache: not "none cached".
    expect(parseAnswerTail('{"usage":{"input_tokens":100,"output_tokens":7}}')).toEqual({ promptTokens: 100, completionTokens: 7 });
  });

  it("takes an Anthropic stream's completion from message_delta when it carries only output_tokens", () => {
    const stream =
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":40,"cache_read_input_tokens":960,"output_tokens":1}}}\n\n' +
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n' +
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":25}}\n\n' +
      'event: message_stop\ndata: {"type":"message_stop"}\n\n';
    expect(parseAnswerTail(stream)).toEqual({ promptTokens: 1000, cachedTokens: 960, completionTokens: 25 });
    // A message_delta with the whole usage (vLLM, the simulated fleet) is read as it is.
    const whole = stream.replace(
      '"usage":{"output_tokens":25}',
      '"usage":{"input_tokens":40,"cache_read_input_tokens":960,"output_tokens":25}',
    );
    expect(parseAnswerTail(whole)).toEqual({ promptTokens: 1000, cachedTokens: 960, completionTokens: 25 });
    // An output count before the whole usage (a chat chunk's) changes nothing.
    expect(parseAnswerTail('{"usage":{"output_tokens":3}} {"usage":{"prompt_tokens":10,"completion_tokens":4}}')).toEqual({
      promptTokens: 10,
      completionTokens: 4,
    });
  });
});
