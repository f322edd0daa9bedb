/** How each API's stream says it finished (src/proxy/stream-end.ts): a stream without it was cut short. */
import { describe, expect, it } from "vitest";
import { messagesStreamEnd, openaiStreamEnd, responsesStreamEnd } from "../../src/proxy/stream-end.ts";

const ev = (type: string) => `event: ${type}\ndata: {"type":"${type}","sequence_number":3}\n\n`;

describe("stream ends", () => {
  it("chat and completions end with data: [DONE]", () => {
    expect(openaiStreamEnd('data: {"choices":[]}\n\ndata: [DONE]\n\n')).toBe(true);
    expect(openaiStreamEnd('data: {"choices":[]}\n\n')).toBe(false);
  });

  it("the Responses API ends with a final response event or an error, whatever came before", () => {
    expect(responsesStreamEnd(ev("response.created") + ev("response.output_text.delta") + ev("response.completed"))).toBe(true);
    expect(responsesStreamEnd(ev("response.created") + ev("response.incomplete"))).toBe(true);
    expect(responsesStreamEnd(ev("response.created") + ev("error"))).toBe(true);
    // Cut after a delta, even one whose text mentions the final event's name.
    expect(responsesStreamEnd(ev("response.completed").replace("response.completed", "x") + ev("response.output_text.delta"))).toBe(false);
    expect(
      responsesStreamEnd(
        ev("response.created") + 'event: response.output_text.delta\ndata: {"delta":"\\"type\\":\\"response.completed\\""}\n\n',
      ),
    ).toBe(false);
  });

  it("Anthropic's Messages API ends with message_stop", () => {
    expect(messagesStreamEnd(ev("message_start") + ev("content_block_delta") + ev("message_delta") + ev("message_stop"))).toBe(true);
    expect(messagesStreamEnd(ev("message_start") + ev("content_block_delta"))).toBe(false);
  });
});
