import { describe, expect, it } from "vitest";
import { MAX_FIELD_VALUE_BYTES, fieldValue, topLevelFields } from "../../src/proxy/body-fields.ts";
import { completionBudget } from "../../src/proxy/completion-budget.ts";

const enc = new TextEncoder();
const read = (json: string, keys: string[]) => topLevelFields(enc.encode(json), keys);

describe("topLevelFields", () => {
  it("reads top-level keys only: not nested ones, not text inside strings", () => {
    const body = JSON.stringify({
      model: "m",
      messages: [{ role: "user", content: '"max_tokens": 99, {"stream_options": 1}' }],
      tools: [{ type: "function", function: { parameters: { max_tokens: 7 } } }],
      max_tokens: 12,
    });
    const f = read(body, ["max_tokens", "stream_options"]);
    expect(fieldValue(f, "max_tokens")).toBe(12);
    expect(f.get("stream_options")).toEqual({ present: false });
  });

  it("reads values of any kind, with spacing, and the last of a repeated key (as JSON.parse)", () => {
    const body = '{ "stream_options" : {"include_usage": false} , "max_tokens" : 5, "max_tokens": 9, "n": null }';
    const f = read(body, ["stream_options", "max_tokens", "n"]);
    expect(f.get("stream_options")).toMatchObject({ present: true, value: { include_usage: false } });
    expect(fieldValue(f, "max_tokens")).toBe(9);
    expect(f.get("n")).toMatchObject({ present: true, value: null });
    // Where each value's bytes are (up to its delimiter): what a rewrite of one field replaces.
    const span = (key: string) => {
      const field = f.get(key)!;
      return field.present ? body.slice(field.start, field.end) : undefined;
    };
    expect(span("stream_options")).toBe('{"include_usage": false} ');
    expect(span("max_tokens")).toBe("9");
    expect(span("n")).toBe("null ");
  });

  it("finds each string's end past escaped quotes and runs of backslashes, as JSON.parse does", () => {
    // Content ending in an escaped backslash (its quote closes it), and content holding an escaped
    // quote followed by text that looks like a top-level key.
    const body = JSON.stringify({
      messages: [
        { role: "user", content: "path C:\\" },
        { role: "user", content: 'say \\"max_tokens": 3, "x' },
      ],
      'we"ird': 1,
      max_tokens: 42,
    });
    expect(JSON.parse(body).max_tokens).toBe(42);
    const f = read(body, ["max_tokens", 'we"ird']);
    expect(fieldValue(f, "max_tokens")).toBe(42);
    expect(fieldValue(f, 'we"ird')).toBe(1);
    // A body cut inside a string reads nothing after the cut.
    expect(read('{"messages": "unterminated \\", "max_tokens": 4', ["max_tokens"]).get("max_tokens")).toEqual({ present: false });
  });

  it("says present but does not parse a value past its bound, and reads nothing of a non-object", () => {
    const f = read(`{"stream_options":"${"x".repeat(MAX_FIELD_VALUE_BYTES)}"}`, ["stream_options"]);
    expect(f.get("stream_options")).toMatchObject({ present: true, value: undefined });
    expect(read("[1,2]", ["max_tokens"]).get("max_tokens")).toEqual({ present: false });
    const text = read('{"max_tokens":"5"}', ["max_tokens"]);
    expect(fieldValue(text, "max_tokens")).toBe("5");
    expect(completionBudget((k) => fieldValue(text, k))).toBeUndefined();
  });
});
