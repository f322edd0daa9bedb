import { describe, expect, it } from "vitest";
import { StreamFailure } from "../../src/proxy/event-filter.ts";
import { SeamFilter } from "../../src/region/seam.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
const ev = (data: unknown) => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;
const chunk = (id: string, delta: Record<string, unknown>, finish: string | null = null) => ({
  id,
  object: "chat.completion.chunk",
  created: id === "first" ? 1 : 2,
  model: id === "first" ? "m" : "m-other",
  choices: [{ index: 0, delta, finish_reason: finish }],
});

describe("SeamFilter", () => {
  it("passes the first node's events byte for byte, keeps its text and drops an unfinished event on failure", () => {
    const seam = new SeamFilter("chat", false);
    const bytes = ev(chunk("first", { role: "assistant", content: "" })) + ev(chunk("first", { content: "Hel" }));
    expect(dec.decode(seam.push(enc.encode(bytes + 'data: {"id":"first","cho')))).toBe(bytes);
    seam.abandon();
    expect(seam.snapshot()).toMatchObject({ text: "Hel", tokens: 1, finishReason: null, blocker: undefined });
  });

  it("makes a continuing node's events read as the first's: its ids, no second role, usage of the whole answer", () => {
    const seam = new SeamFilter("chat", false);
    seam.push(
      enc.encode(
        ev(chunk("first", { role: "assistant", content: "" })) +
          ev(chunk("first", { content: "a" })) +
          ev(chunk("first", { content: " b" })),
      ),
    );
    seam.beginSegment();
    const usage = { prompt_tokens: 12, completion_tokens: 1, total_tokens: 13, prompt_tokens_details: { cached_tokens: 11 } };
    const out = dec.decode(
      seam.push(
        enc.encode(
          ev(chunk("second", { role: "assistant", content: "" })) +
            ev(chunk("second", { content: " c" }, "stop")) +
            ev({ id: "second", object: "chat.completion.chunk", created: 2, model: "m-other", choices: [], usage }) +
            ev("[DONE]"),
        ),
      ),
    );
    const events = out.split("\n\n").filter(Boolean);
    expect(events).toHaveLength(3);
    expect(JSON.parse(events[0]!.slice(6))).toEqual({ ...chunk("first", { content: " c" }, "stop") });
    expect(JSON.parse(events[1]!.slice(6)).usage).toEqual({
      prompt_tokens: 10,
      completion_tokens: 3,
      total_tokens: 13,
      prompt_tokens_details: { cached_tokens: 10 },
    });
    expect(events[2]).toBe("data: [DONE]");
  });

  it("takes the usage event the router asked for out, and sees a node's error event and a malformed one as failures", () => {
    const seam = new SeamFilter("completion", true);
    const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 };
    expect(seam.push(enc.encode(ev({ id: "x", choices: [], usage })))).toHaveLength(0);
    expect(() => seam.push(enc.encode(ev({ error: { message: "dead", code: 500 } })))).toThrow(StreamFailure);
    expect(() => seam.push(enc.encode("data: {not json\n\n"))).toThrow(expect.objectContaining({ kind: "malformed" }));
  });

  it("knows what it cannot continue: a tool call, reasoning, logprobs, a second choice", () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: "{" } }] } }, "tool-call"],
      [{ index: 0, delta: { reasoning_content: "hmm" } }, "reasoning"],
      [{ index: 0, delta: { content: "a" }, logprobs: { content: [] } }, "logprobs"],
      [{ index: 1, delta: { content: "a" } }, "choices"],
    ];
    for (const [choice, blocker] of cases) {
      const seam = new SeamFilter("chat", false);
      seam.push(enc.encode(ev({ id: "first", choices: [choice] })));
      expect(seam.snapshot().blocker).toBe(blocker);
    }
  });

  it("counts tokens by the chunks when a node's usage is not counts, and caps an absurd one by the text relayed", () => {
    const lying = (completion: number) => {
      const seam = new SeamFilter("chat", false);
      seam.push(enc.encode(ev(chunk("first", { content: "ab" })) + ev(chunk("first", { content: "cd" }))));
      const usage = { prompt_tokens: 5, completion_tokens: completion, total_tokens: 5 + completion };
      seam.push(enc.encode(ev({ ...chunk("first", { content: "e" }), usage })));
      return seam;
    };
    // Negative or fractional: not usage; three chunks with text were relayed.
    expect(lying(-100_000).snapshot().tokens).toBe(3);
    expect(lying(2.5).snapshot().tokens).toBe(3);
    expect(lying(-100_000).answerUsage()).toBeUndefined();
    // Absurd: at most 3 bytes a character of the 5 relayed, plus the slack.
    expect(lying(9e15).snapshot().tokens).toBe(5 * 3 + 16);
    // Honest and within the bounds: the node's own count.
    expect(lying(4).snapshot().tokens).toBe(4);
  });

  it("stops keeping text past its bound (the stream can then not be continued) but still counts it", () => {
    const seam = new SeamFilter("chat", false, 10);
    seam.push(enc.encode(ev(chunk("first", { content: "12345" })) + ev(chunk("first", { content: "6789" }))));
    expect(seam.snapshot()).toMatchObject({ text: "123456789", textChars: 9, overflow: false });
    seam.push(enc.encode(ev(chunk("first", { content: "abc" }))));
    expect(seam.snapshot()).toMatchObject({ text: "", textChars: 12, overflow: true, tokens: 3 });
  });
});
