/**
 * The one-loop list checks (src/edge/api/list-checks.ts) and the fast schemas built on them
 * (schemas.ts fastSchemas) against the zod schemas they stand in for: what a fast schema takes,
 * its schema takes, with the same value; and on generated bodies they agree both ways, so the
 * fast path is the one valid bodies take.
 */
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { chatCompletionSchema, completionSchema, fastSchemas, messagesSchema, responsesSchema } from "../../../src/edge/api/schemas.ts";
import { isJsonObject } from "../../../src/edge/api/list-checks.ts";
import { INFERENCE, inferenceBodyCases } from "../../fuzz/cases.ts";
import { Rng } from "../../fuzz/generator.ts";

const PAIRS: Record<string, { full: z.ZodType; fast: z.ZodType }> = {
  "/v1/chat/completions": { full: chatCompletionSchema, fast: fastSchemas.chat },
  "/v1/completions": { full: completionSchema, fast: fastSchemas.completion },
  "/v1/responses": { full: responsesSchema, fast: fastSchemas.responses },
  "/v1/messages": { full: messagesSchema, fast: fastSchemas.messages },
};

/** Asserts the fast schema takes nothing its schema refuses, and gives the same value; returns both verdicts. */
function compare(path: string, body: unknown): { fast: boolean; full: boolean } {
  const { full, fast } = PAIRS[path]!;
  const a = fast.safeParse(body);
  const b = full.safeParse(body);
  if (a.success) {
    expect(b.success, `${path}: the fast schema took a body its schema refuses: ${JSON.stringify(body).slice(0, 300)}`).toBe(true);
    expect(a.data).toEqual(b.data);
  }
  return { fast: a.success, full: b.success };
}

// Values for a generated body's fields: right and wrong types, bounds and their neighbours.
const TEXTS = ["", "hi", "n".repeat(256), "n".repeat(257), "user", "\ud800", "\u0000"];
const SCALARS: unknown[] = [0, -1, 1.5, 1e30, 2 ** 53, -0, null, true, false];
const pickAny = (rng: Rng, depth = 0): unknown => {
  const k = rng.int(depth > 1 ? 2 : 4);
  if (k === 0) return rng.pick(TEXTS);
  if (k === 1) return rng.pick(SCALARS);
  if (k === 2) return Array.from({ length: rng.int(3) }, () => pickAny(rng, depth + 1));
  return Object.fromEntries(
    Array.from({ length: rng.int(3) }, (_, i) => [rng.pick(["type", "text", "x", String(i)]), pickAny(rng, depth + 1)]),
  );
};
/** Usually right, sometimes anything. */
const mostly = (rng: Rng, good: () => unknown): unknown => (rng.chance(0.9) ? good() : pickAny(rng));
const part = (rng: Rng) =>
  mostly(rng, () => ({
    type: rng.pick(["text", "image_url", "tool_use", "tool_result"]),
    text: "t",
    ...(rng.chance(0.05) ? JSON.parse('{"__proto__":{"x":1}}') : {}),
  }));
const parts = (rng: Rng) => mostly(rng, () => Array.from({ length: rng.int(4) }, () => part(rng)));
const record = (rng: Rng) => mostly(rng, () => ({ id: "c", type: "function", function: { name: "f", arguments: "{}" } }));
const records = (rng: Rng, n = 4) => mostly(rng, () => Array.from({ length: rng.int(n) }, () => record(rng)));
/** Sets `key` to `value`, or leaves it out when the generator says so. */
const maybe = (o: Record<string, unknown>, key: string, value: () => unknown, rng: Rng, p = 0.5) => {
  if (rng.chance(p)) o[key] = value();
};

function chatMessage(rng: Rng): unknown {
  const m: Record<string, unknown> = {
    role: mostly(rng, () => rng.pick(["system", "developer", "user", "assistant", "tool", "function"])),
  };
  maybe(m, "content", () => mostly(rng, () => rng.pick([() => "text", () => null, () => parts(rng)])()), rng, 0.9);
  maybe(m, "name", () => mostly(rng, () => rng.pick([null, "n", "n".repeat(256), "n".repeat(257)])), rng, 0.2);
  maybe(m, "tool_calls", () => mostly(rng, () => rng.pick([null, records(rng)])), rng, 0.2);
  maybe(m, "tool_call_id", () => mostly(rng, () => rng.pick([null, "c1", "t".repeat(257)])), rng, 0.2);
  maybe(m, "extra", () => pickAny(rng), rng, 0.1);
  return m;
}
function anthropicMessage(rng: Rng): unknown {
  return {
    role: mostly(rng, () => rng.pick(["user", "assistant"])),
    content: mostly(rng, () => (rng.chance(0.5) ? "text" : parts(rng))),
  };
}
const list = (rng: Rng, item: (rng: Rng) => unknown, n: number) => mostly(rng, () => Array.from({ length: rng.int(n) }, () => item(rng)));
const tokenIds = (rng: Rng) =>
  Array.from({ length: rng.between(0, 3) }, () => (rng.chance(0.95) ? rng.int(50_000) : rng.pick([-1, 1.5, 2 ** 53, "1"])));

function body(path: string, rng: Rng): Record<string, unknown> {
  const b: Record<string, unknown> = { model: mostly(rng, () => "m") };
  maybe(b, "stream", () => mostly(rng, () => rng.chance(0.5)), rng);
  if (path === "/v1/chat/completions") {
    b.messages = list(rng, chatMessage, 6);
    maybe(b, "tools", () => mostly(rng, () => rng.pick([null, records(rng)])), rng, 0.3);
  } else if (path === "/v1/completions") {
    b.prompt = mostly(rng, () =>
      rng.pick([
        () => "text",
        () => Array.from({ length: rng.int(3) }, () => mostly(rng, () => "p")),
        () => tokenIds(rng),
        () => Array.from({ length: rng.int(3) }, () => tokenIds(rng)),
      ])(),
    );
  } else if (path === "/v1/responses") {
    b.input = mostly(rng, () => (rng.chance(0.3) ? "text" : records(rng, 6)));
    maybe(b, "tools", () => mostly(rng, () => rng.pick([null, records(rng)])), rng, 0.3);
  } else {
    b.max_tokens = mostly(rng, () => 16);
    b.messages = list(rng, anthropicMessage, 6);
    maybe(b, "system", () => mostly(rng, () => rng.pick([() => null, () => "s", () => parts(rng)])()), rng, 0.5);
    maybe(b, "tools", () => mostly(rng, () => rng.pick([null, records(rng)])), rng, 0.3);
  }
  return b;
}

/** Whether a value holds an object with a `__proto__` key of its own: the fast checks leave it to zod (isJsonObject). */
const holdsProtoKey = (v: unknown): boolean =>
  typeof v === "object" && v !== null && (Object.hasOwn(v, "__proto__") || Object.values(v).some(holdsProtoKey));

describe("isJsonObject", () => {
  it("takes what JSON.parse makes of an object, and nothing else", () => {
    expect(isJsonObject(JSON.parse('{"constructor":{"prototype":1},"a":null}'))).toBe(true);
    expect(isJsonObject(Object.create(null))).toBe(true);
    // Its own `__proto__` (JSON.parse makes one) is left to zod, which leaves it out of its copy.
    expect(isJsonObject(JSON.parse('{"__proto__":{"a":1},"b":2}'))).toBe(false);
    for (const v of [null, [], "x", 1, new Date(0), new Map(), Object.create({ a: 1 })]) expect(isJsonObject(v)).toBe(false);
  });
});

describe("the fast schemas against their schemas", () => {
  for (const path of Object.keys(PAIRS)) {
    it(`${path}: takes the valid body, and no fuzz body its schema refuses`, () => {
      const valid = INFERENCE.find((s) => s.path === path)!.valid;
      expect(compare(path, valid)).toEqual({ fast: true, full: true });
      let parsed = 0;
      for (const seed of [1, 2, 3]) {
        for (const c of inferenceBodyCases(seed, 16_384, path)) {
          let json: unknown;
          try {
            json = JSON.parse(typeof c.body === "string" ? c.body : new TextDecoder().decode(c.body));
          } catch {
            continue;
          }
          compare(path, json);
          parsed++;
        }
      }
      expect(parsed).toBeGreaterThan(300);
    });

    it(`${path}: agrees with its schema on 3,000 generated bodies, about half of them valid`, () => {
      const rng = new Rng(path.length * 7919);
      const verdicts = { valid: 0, invalid: 0 };
      for (let i = 0; i < 3_000; i++) {
        const b = body(path, rng);
        const { fast, full } = compare(path, b);
        if (!holdsProtoKey(b)) expect(fast, JSON.stringify(b).slice(0, 300)).toBe(full);
        verdicts[full ? "valid" : "invalid"]++;
      }
      expect(verdicts.valid).toBeGreaterThan(300);
      expect(verdicts.invalid).toBeGreaterThan(300);
    });
  }
});
