import { describe, expect, it } from "vitest";
import { AnswerTail } from "../../src/proxy/answer-tail.ts";
import { USAGE_TAIL_CHARS, parseAnswerTail } from "../../src/proxy/usage.ts";

const enc = new TextEncoder();

describe("AnswerTail", () => {
  it("keeps at least the last USAGE_TAIL_CHARS bytes of a long answer, and drops what is older", () => {
    const tail = new AnswerTail();
    const event = (i: number) => `data: {"n":${i},"pad":"${"x".repeat(100)}"}\n\n`;
    let whole = "";
    for (let i = 0; i < 1000; i++) {
      tail.push(enc.encode(event(i)));
      whole += event(i);
    }
    const text = tail.text();
    expect(whole.endsWith(text)).toBe(true);
    expect(text.length).toBeGreaterThanOrEqual(USAGE_TAIL_CHARS);
    // Older chunks went: it holds no more than the bound and the chunk that crossed it.
    expect(text.length).toBeLessThan(USAGE_TAIL_CHARS + event(999).length);
  });

  it("decodes a character split across chunks whole, and reads the same text twice", () => {
    const tail = new AnswerTail();
    const bytes = enc.encode('data: {"content":"café ☕"}\n\n');
    const cut = bytes.indexOf(0xe2) + 1; // inside the three bytes of ☕
    tail.push(bytes.subarray(0, cut));
    tail.push(bytes.subarray(cut));
    expect(tail.text()).toBe('data: {"content":"café ☕"}\n\n');
    expect(tail.text()).toBe('data: {"content":"café ☕"}\n\n');
    tail.push(enc.encode("data: [DONE]\n\n"));
    expect(tail.text().endsWith("data: [DONE]\n\n")).toBe(true);
  });

  it("is empty before any chunk", () => {
    expect(new AnswerTail().text()).toBe("");
  });

  it("keeps the answer's first bytes too: a long Anthropic stream's prompt counts, said only at its start", () => {
    const tail = new AnswerTail();
    tail.push(
      enc.encode(
        'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":40,"cache_read_input_tokens":960,"output_tokens":1}}}\n\n',
      ),
    );
    const delta =
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word "}}\n\n';
    for (let i = 0; i < 200; i++) tail.push(enc.encode(delta)); // ~22 KB, past the tail
    tail.push(
      enc.encode(
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":200}}\n\n',
      ),
    );
    tail.push(enc.encode('event: message_stop\ndata: {"type":"message_stop"}\n\n'));
    expect(tail.text()).not.toContain("message_start");
    expect(tail.head().length).toBeLessThanOrEqual(USAGE_TAIL_CHARS);
    // From the tail alone, no prompt count: the request would be billed by estimate.
    expect(parseAnswerTail(tail.text())).toBeUndefined();
    expect(parseAnswerTail(tail.text(), tail.head())).toEqual({ promptTokens: 1000, cachedTokens: 960, completionTokens: 200 });
  });
});
