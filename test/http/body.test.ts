/** Reading JSON bodies (src/http/body.ts): the exact media type, errors that say where and never what. */
import { describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH } from "../../src/core/json-bounds.ts";
import { ApiError } from "../../src/http/errors.ts";
import { isJsonMediaType, parseJsonBody, readRequestLimited } from "../../src/http/body.ts";
import { CANARY, INVALID_UTF8, nestedText } from "../fuzz/generator.ts";

const encode = (text: string) => new TextEncoder().encode(text);

function refusal(bytes: Uint8Array): ApiError {
  try {
    parseJsonBody(bytes);
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error("accepted");
}

describe("isJsonMediaType", () => {
  it("accepts application/json, in any case, with well-formed parameters and a UTF-8 charset", () => {
    for (const type of [
      "application/json",
      "Application/JSON",
      "application/json; charset=utf-8",
      "application/json;charset=UTF-8",
      'application/json; charset="utf-8"',
      "application/json; charset=utf8",
      "application/json ; charset=utf-8",
      "application/json;",
      'application/json; foo=bar; baz="q\\"x"',
      " application/json\t",
    ]) {
      expect(isJsonMediaType(type), type).toBe(true);
    }
  });

  it("refuses anything that merely contains it, other charsets, and malformed parameters", () => {
    for (const type of [
      "application/jsonx",
      "application/json-seq",
      "text/plain; application/json",
      "application/json, text/plain",
      "application/problem+json",
      "application/x-json",
      "text/json",
      "application/*",
      "*/*",
      "json",
      "",
      "application/json; charset=latin1",
      "application/json; charset=utf-16",
      'application/json; charset="utf-8',
      "application/json; charset",
      "application/json;;x",
      "application/json; a=b c",
      "application/json\u00a0",
      "application /json",
    ]) {
      expect(isJsonMediaType(type), type).toBe(false);
    }
  });
});

describe("readRequestLimited", () => {
  const bytes = (n: number) => Uint8Array.from({ length: n }, (_, i) => i % 251);
  /** A body with no declared length: the runtime sends it chunked. */
  const chunked = (parts: Uint8Array[]) =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (const p of parts) controller.enqueue(p);
        controller.close();
      },
    });

  it("reads a body of declared length up to the bound, byte for byte", async () => {
    const body = bytes(1000);
    const request = new Request("http://x/", { method: "POST", body, headers: { "content-length": "1000" } });
    expect(await readRequestLimited(request, 1000)).toEqual(body);
  });

  it("refuses a declared length over the bound", async () => {
    const request = new Request("http://x/", { method: "POST", body: bytes(1001), headers: { "content-length": "1001" } });
    expect(await readRequestLimited(request, 1000)).toBeUndefined();
  });

  it("counts a body without a declared length as it streams, and stops past the bound", async () => {
    const within = new Request("http://x/", { method: "POST", body: chunked([bytes(600), bytes(400)]), duplex: "half" } as RequestInit);
    expect(within.headers.get("content-length")).toBeNull();
    expect((await readRequestLimited(within, 1000))?.byteLength).toBe(1000);
    const over = new Request("http://x/", { method: "POST", body: chunked([bytes(600), bytes(401)]), duplex: "half" } as RequestInit);
    expect(await readRequestLimited(over, 1000)).toBeUndefined();
  });

  it("reads a request with no body as empty", async () => {
    expect(await readRequestLimited(new Request("http://x/", { method: "POST" }), 10)).toEqual(new Uint8Array(0));
  });
});

describe("parseJsonBody", () => {
  it("says where JSON stops, with line and column, and never quotes the body", () => {
    const body = `{\n  "model": "m",\n  "secret": "${CANARY}" ${CANARY}\n}`;
    const e = refusal(encode(body));
    expect(e.code).toBe("invalid_json");
    const at = body.indexOf(CANARY, body.indexOf(CANARY) + 1);
    expect(e.message).toBe(
      `Request body is not valid JSON: expected ',' or '}' at position ${at} (line 3, column ${at - body.lastIndexOf("\n", at)})`,
    );
    expect(e.message).not.toContain(CANARY);
  });

  it("names the byte where the body stops being UTF-8", () => {
    for (const bad of INVALID_UTF8) {
      const bytes = new Uint8Array([...encode('{"a":"x'), ...bad, ...encode('"}')]);
      expect(refusal(bytes).message).toBe("Request body is not valid UTF-8 (at byte 7)");
    }
  });

  it("refuses a body nested past the bound with nesting_too_deep, and accepts one at it", () => {
    expect(() => parseJsonBody(encode(nestedText(MAX_JSON_DEPTH - 1, "1", "mixed")))).not.toThrow();
    const e = refusal(encode(nestedText(100_000, "1", "array")));
    expect(e.code).toBe("nesting_too_deep");
    expect(e.status).toBe(400);
    expect(e.message).toContain(String(MAX_JSON_DEPTH));
  });
});
