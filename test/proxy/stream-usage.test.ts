import { describe, expect, it } from "vitest";
import { UsageEventFilter, asksNoUsage, requestStreamUsage } from "../../src/proxy/stream-usage.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

describe("requestStreamUsage", () => {
  it("asks for usage on a stream that did not, changing nothing else of the bytes", () => {
    const raw = ` { "model":"m",  "stream": true, "messages":[{"role":"user","content":"é ✓"}] }`;
    const { body, injected } = requestStreamUsage(enc.encode(raw), JSON.parse(raw));
    expect(injected).toBe(true);
    expect(dec.decode(body)).toBe(
      ` {"stream_options":{"include_usage":true}, "model":"m",  "stream": true, "messages":[{"role":"user","content":"é ✓"}] }`,
    );
    expect(JSON.parse(dec.decode(body)).stream_options).toEqual({ include_usage: true });
  });

  it("leaves a non-stream and a stream that asked for usage itself untouched", () => {
    for (const raw of [`{"model":"m","messages":[]}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`]) {
      const bytes = enc.encode(raw);
      const out = requestStreamUsage(bytes, JSON.parse(raw));
      expect(out.injected).toBe(false);
      expect(out.body).toBe(bytes);
      expect(asksNoUsage(JSON.parse(raw))).toBe(false);
    }
  });

  it("asks for usage whatever else stream_options said (false, null, {}, not an object), keeping its other keys", () => {
    for (const [options, expected] of [
      [`{"include_usage":false}`, { include_usage: true }],
      [`null`, { include_usage: true }],
      [`{}`, { include_usage: true }],
      [`{"continuous_usage_stats":false,"include_usage":null}`, { continuous_usage_stats: false, include_usage: true }],
      [`"yes"`, { include_usage: true }],
    ] as const) {
      const raw = `{"model":"m","stream":true,"stream_options":${options},"messages":[{"role":"user","content":"\\"stream_options\\""}]}`;
      expect(asksNoUsage(JSON.parse(raw))).toBe(true);
      // As the edge calls it (parsed), and as the region worker does (the bytes only).
      for (const out of [requestStreamUsage(enc.encode(raw), JSON.parse(raw)), requestStreamUsage(enc.encode(raw))]) {
        expect(out.injected).toBe(true);
        const body = JSON.parse(dec.decode(out.body));
        expect(body.stream_options).toEqual(expected);
        expect(body.messages).toEqual(JSON.parse(raw).messages);
      }
    }
  });

  it("rewrites only stream_options's value: every other byte reaches the node as the client sent it", () => {
    const raw = `{"model":"m","stream":true,"stream_options": {"include_usage":false} ,"seed":18446744073709551615,"temperature":1e999,"n":1.50}`;
    for (const out of [requestStreamUsage(enc.encode(raw), JSON.parse(raw)), requestStreamUsage(enc.encode(raw))]) {
      expect(out.injected).toBe(true);
      // Parsed and written whole, the seed became 18446744073709552000 and 1e999 null.
      expect(dec.decode(out.body)).toBe(
        `{"model":"m","stream":true,"stream_options": {"include_usage":true},"seed":18446744073709551615,"temperature":1e999,"n":1.50}`,
      );
    }
  });

  it("in the region worker, injects without re-writing when the body has no stream_options, and leaves one that asked", () => {
    const raw = `{"model":"m", "stream":true}`;
    expect(dec.decode(requestStreamUsage(enc.encode(raw)).body)).toBe(
      `{"stream_options":{"include_usage":true},"model":"m", "stream":true}`,
    );
    const asked = enc.encode(`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`);
    expect(requestStreamUsage(asked)).toEqual({ body: asked, injected: false });
  });
});

describe("UsageEventFilter", () => {
  const content = (i: number) =>
    `data: {"id":"x","choices":[{"index":0,"delta":{"content":"w${i} \\"usage\\""},"finish_reason":null}]}\n\n`;
  const usage = `data: {"id":"x","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}}\n\n`;
  const node = [content(0), content(1), `: keep-alive\n\n`, content(2), usage, `data: [DONE]\n\n`].join("");
  const expected = node.replace(usage, "");

  /** Feeds `text` cut at `cuts` (byte offsets) and returns what comes out. */
  function run(text: string, cuts: number[]): string {
    const bytes = enc.encode(text);
    const f = new UsageEventFilter();
    const parts: Uint8Array[] = [];
    let at = 0;
    for (const c of [...cuts, bytes.length]) {
      parts.push(f.push(bytes.subarray(at, c)));
      at = c;
    }
    parts.push(f.flush());
    return parts.map((p) => dec.decode(p)).join("");
  }

  it("drops exactly the usage-only event, byte for byte, however the stream is cut", () => {
    const n = enc.encode(node).length;
    expect(run(node, [])).toBe(expected);
    for (let cut = 1; cut < n; cut += 7) expect(run(node, [cut])).toBe(expected);
    expect(
      run(
        node,
        Array.from({ length: n - 1 }, (_, i) => i + 1),
      ),
    ).toBe(expected); // one byte at a time
  });

  it("handles CRLF event boundaries and keeps a content chunk that merely mentions usage", () => {
    const crlf = node.replaceAll("\n\n", "\r\n\r\n");
    expect(run(crlf, [13, 200])).toBe(expected.replaceAll("\n\n", "\r\n\r\n"));
    expect(run(content(5), [])).toBe(content(5));
  });

  it("passes an unterminated last event through at the end", () => {
    expect(run(`${content(0)}data: {"partial`, [20])).toBe(`${content(0)}data: {"partial`);
  });
});
