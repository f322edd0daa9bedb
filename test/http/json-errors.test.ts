/** Where a body stops being UTF-8 or JSON (src/http/json-errors.ts), checked against the runtime's own decoder and parser. */
import { describe, expect, it } from "vitest";
import { invalidUtf8At, jsonSyntaxError } from "../../src/http/json-errors.ts";
import { breakJson, nestedText, Rng, truncations } from "../fuzz/generator.ts";

describe("jsonSyntaxError agrees with JSON.parse", () => {
  it("on thousands of broken, truncated and random texts: an error exactly when JSON.parse throws", () => {
    const rng = new Rng(42);
    const seeds = [
      '{"model":"m","messages":[{"role":"user","content":"hi \\u00e9 \\n"}],"n":-1.5e+3,"ok":true,"no":null}',
      '[1,2,{"a":[],"b":{}},"\\"",0,-0,0.5e-2]',
      '"\\ud800"',
      "  {}  ",
      nestedText(200, "null", "mixed"),
    ];
    const texts: string[] = [];
    for (const seed of seeds) {
      texts.push(seed, ...truncations(rng, seed, 30));
      for (let i = 0; i < 300; i++) texts.push(breakJson(rng, seed) ?? seed);
    }
    const alphabet = [
      '"',
      "\\",
      "{",
      "}",
      "[",
      "]",
      ",",
      ":",
      "0",
      "1",
      "-",
      "+",
      ".",
      "e",
      "E",
      "t",
      "n",
      "f",
      "u",
      " ",
      "\n",
      "\u0000",
      "a",
      "x",
    ];
    for (let i = 0; i < 3_000; i++) texts.push(Array.from({ length: rng.between(1, 12) }, () => rng.pick(alphabet)).join(""));
    for (const text of texts) {
      let parses = true;
      try {
        JSON.parse(text);
      } catch {
        parses = false;
      }
      const error = jsonSyntaxError(text);
      expect(error === undefined, JSON.stringify(text)).toBe(parses);
      if (error) expect(error.position).toBeLessThanOrEqual(text.length);
    }
    expect(texts.length).toBeGreaterThan(4_000);
  });

  it("needs no stack: an unclosed million levels", () => {
    expect(jsonSyntaxError("[".repeat(1_000_000))?.reason).toBe("unexpected end of input");
  });
});

describe("invalidUtf8At agrees with a fatal TextDecoder", () => {
  it("on random bytes biased to UTF-8's edges: -1 exactly when it decodes, and the prefix before the offset decodes", () => {
    const rng = new Rng(7);
    const edges = [0x00, 0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff, 0x9f, 0xa0, 0x8f, 0x90];
    for (let i = 0; i < 5_000; i++) {
      const bytes = new Uint8Array(Array.from({ length: rng.between(0, 8) }, () => (rng.chance(0.7) ? rng.pick(edges) : rng.int(256))));
      const at = invalidUtf8At(bytes);
      let decodes = true;
      try {
        new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
      } catch {
        decodes = false;
      }
      expect(at === -1, [...bytes].join(",")).toBe(decodes);
      if (at !== -1) expect(() => new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes.subarray(0, at))).not.toThrow();
    }
  });
});
