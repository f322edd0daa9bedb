/**
 * Hostile requests against every warmpath endpoint, built deterministically from a seed
 * (generator.ts). Every case is malformed by construction (a body that is not JSON or not valid,
 * a wrong credential, method, media type, path, or an oversized head), so every answer must be a
 * 4xx in OpenAI's error shape; a case that happened to be valid would route, and fail the suite.
 */
import { DEV_ADMIN_TOKEN, DEV_API_KEY, DEV_NODE_TOKEN } from "../../src/config/dev-credentials.ts";
import { MAX_HEADER_BYTES, MAX_HEADER_VALUE_BYTES, MAX_URL_BYTES } from "../../src/edge/middleware/request-bounds.ts";
import { ACME_KEY, ACME_KEY_2, GLOBEX_KEY, TEST_ADMIN_TOKEN, TEST_NODE_TOKEN } from "../fixtures/config.ts";
import {
  ABSURD_NUMBER_TEXTS,
  breakJson,
  CANARY,
  HOSTILE_STRINGS,
  nestedText,
  pathTricks,
  Rng,
  truncations,
  UNPRINTABLE_JSON,
  withInvalidUtf8,
} from "./generator.ts";

/** A lowercase, dash-only canary: passes node-id syntax, so it reaches code that looks node ids up. */
export const CANARY_ID = "canary-7f3a";

/** Loopback in development mode (the token-free admin API applies) and a public host (it never does). */
export const LOCAL = "http://localhost";
export const REMOTE = "https://router.example.com";

export interface FuzzCase {
  /** Family and index: reproduces the case (the generator is deterministic). */
  name: string;
  method: string;
  /** Absolute URL. */
  url: string;
  /** Sent in order with `Headers.append`, so a name may repeat. */
  headers: Array<[string, string]>;
  body?: string | Uint8Array;
  /** Statuses allowed (any 4xx when absent). */
  expect?: readonly number[];
}

/** Region and node the suite registers before fuzzing; cases try to remove or replace them. */
export const FUZZ_NODES = [
  { id: "fz-eu-1", region: "eu", models: ["m-eu", "m-shared"] },
  { id: "fz-eu-2", region: "eu", models: ["m-eu"] },
  { id: "fz-us-1", region: "us", models: ["m-us"] },
];

const json = (extra: Array<[string, string]> = []): Array<[string, string]> => [["content-type", "application/json"], ...extra];
const bearer = (token: string): [string, string] => ["authorization", `Bearer ${token}`];

/** Replaces `"\u0000RAW<i>\u0000"` placeholders in JSON text with raw JSON texts (numbers JSON.stringify cannot write). */
function withRaw(value: unknown, raws: string[]): string {
  let text = JSON.stringify(value);
  raws.forEach((raw, i) => {
    text = text.replace(JSON.stringify(`\u0000RAW${i}\u0000`), raw);
  });
  return text;
}
const RAW0 = "\u0000RAW0\u0000";

/** An invalid value for a field: a JS value, or raw JSON text (`{ raw }`). */
type Bad = unknown | { raw: string };
const isRaw = (v: unknown): v is { raw: string } => typeof v === "object" && v !== null && "raw" in v && Object.keys(v).length === 1;

/** `body` with `field` (a top-level key, or `key.index.key` path) set to `bad`, as JSON text. */
function substitute(body: Record<string, unknown>, path: string, bad: Bad): string {
  const copy = structuredClone(body) as Record<string, unknown>;
  const keys = path.split(".");
  let at: Record<string, unknown> = copy;
  for (const k of keys.slice(0, -1)) at = at[k] as Record<string, unknown>;
  const last = keys[keys.length - 1]!;
  if (bad === undefined) delete at[last];
  else at[last] = isRaw(bad) ? RAW0 : bad;
  return isRaw(bad) ? withRaw(copy, [bad.raw]) : JSON.stringify(copy);
}

const BAD_STRINGS: Bad[] = [1, -0, { raw: "1e309" }, null, true, [], {}, [CANARY], { [CANARY]: 1 }];
const BAD_MODELS: Bad[] = [...BAD_STRINGS, "", "m".repeat(257), undefined];
const BAD_STREAM: Bad[] = ["yes", 1, [], {}, CANARY];
const BAD_HINT: Bad[] = [1, [], {}, "u".repeat(513) + CANARY];
const BAD_TOOLS: Bad[] = ["x", 1, {}, [1], [[]], [null], [CANARY], true];

interface InferenceSpec {
  path: string;
  valid: Record<string, unknown>;
  /** Field paths and values each making the body invalid. */
  invalid: Array<[string, Bad[]]>;
  /** Field paths where a deep value is put (inside what canonicalisation walks, and outside it). */
  deepAt: string[];
  /** Field path of a free text where hostile strings (and the canary) are planted in otherwise valid parts. */
  textAt: string;
  /** Field paths the schema takes any value at and canonicalisation reads: where values JS cannot print are put. */
  opaqueAt: string[];
  auth: (key: string) => [string, string];
}

const chatMessages = (): unknown[] => [
  { role: "system", content: "You are terse." },
  { role: "user", content: [{ type: "text", text: "hi" }] },
  { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] },
  { role: "tool", tool_call_id: "c1", content: "ok" },
];

export const INFERENCE: InferenceSpec[] = [
  {
    path: "/v1/chat/completions",
    valid: {
      model: "m-eu",
      messages: chatMessages(),
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }],
      stream: false,
      user: "u",
    },
    invalid: [
      ["model", BAD_MODELS],
      [
        "messages",
        [
          "hi",
          {},
          [],
          null,
          1,
          [1],
          [null],
          [[]],
          [{}],
          [{ role: CANARY }],
          [{ role: "user", content: 1 }],
          [{ role: "user", content: [1] }],
          undefined,
        ],
      ],
      ["messages.1.content", [1, true, {}, [1], [{ type: "" }], [{ text: "no type" }], [null], { raw: "1e309" }]],
      ["messages.1.role", [CANARY, "", 1, null, "USER", "user\u0000", "\ud800"]],
      ["messages.1.name", [1, [], "n".repeat(257)]],
      ["messages.2.tool_calls", ["x", 1, [1], [[]], [null], {}]],
      ["messages.3.tool_call_id", [1, [], "t".repeat(257)]],
      ["tools", BAD_TOOLS],
      ["stream", BAD_STREAM],
      ["user", BAD_HINT],
      ["prompt_cache_key", BAD_HINT],
      ["cache_salt", [1, [], "s".repeat(257)]],
    ],
    deepAt: [
      "tools.0.function.parameters",
      "messages.1.content.0.image_url",
      "messages.2.tool_calls.0.function",
      "extra",
      "messages.0.extra",
    ],
    textAt: "messages.0.content",
    opaqueAt: ["messages.1.content.0.text", "messages.2.tool_calls.0.id", "tools.0.function.name", "extra"],
    auth: (key) => bearer(key),
  },
  {
    path: "/v1/completions",
    valid: { model: "m-eu", prompt: "hello", max_tokens: 5 },
    invalid: [
      ["model", BAD_MODELS],
      [
        "prompt",
        [
          {},
          null,
          true,
          [],
          [[]],
          [1.5],
          [-1],
          [1e30],
          ["a", 1],
          [[1], ["a"]],
          { raw: "1e309" },
          { raw: "[1e309]" },
          new Array(1025).fill("a"),
          undefined,
        ],
      ],
      ["stream", BAD_STREAM],
      ["user", BAD_HINT],
    ],
    deepAt: ["extra", "prompt"],
    textAt: "prompt",
    opaqueAt: ["extra"],
    auth: (key) => bearer(key),
  },
  {
    path: "/v1/responses",
    valid: {
      model: "m-eu",
      instructions: "be brief",
      input: [
        { role: "user", content: [{ type: "input_text", text: "hi" }] },
        { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "ok" },
      ],
      tools: [{ type: "function", name: "f", parameters: { type: "object" } }],
    },
    invalid: [
      ["model", BAD_MODELS],
      ["input", [5, null, true, {}, [1], [[]], ["x"], { raw: "1e309" }, undefined]],
      ["instructions", [1, [], {}, true]],
      ["previous_response_id", ["", 1, "r".repeat(257), []]],
      ["tools", BAD_TOOLS],
      ["stream", BAD_STREAM],
    ],
    deepAt: ["tools.0.parameters", "input.1.arguments", "input.0.content.0.extra", "input.2.output", "extra"],
    textAt: "instructions",
    opaqueAt: [
      "input.0.type",
      "input.0.role",
      "input.1.type",
      "input.1.call_id",
      "input.1.name",
      "input.2.call_id",
      "input.2.output",
      "tools.0.type",
      "tools.0.name",
    ],
    auth: (key) => bearer(key),
  },
  {
    path: "/v1/messages",
    valid: {
      model: "m-eu",
      max_tokens: 16,
      system: "s",
      messages: [
        { role: "user", content: [{ type: "text", text: "hi" }] },
        { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: { a: 1 } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "ok" }] },
      ],
      tools: [{ name: "f", input_schema: { type: "object" } }],
      metadata: { user_id: "u" },
    },
    invalid: [
      ["model", BAD_MODELS],
      ["max_tokens", [0, -1, -0, 1.5, { raw: "1e309" }, "16", null, 1e30, { raw: "9007199254740993" }, undefined]],
      [
        "messages",
        ["hi", [], null, [{ role: "system", content: "s" }], [{ role: "user", content: null }], [{ role: "user", content: [1] }]],
      ],
      ["system", [1, {}, [1], [{}]]],
      ["metadata", ["x", { user_id: 1 }, { user_id: "u".repeat(513) }, 1]],
      ["tools", BAD_TOOLS],
      ["stream", BAD_STREAM],
    ],
    deepAt: ["messages.1.content.0.input", "tools.0.input_schema", "messages.2.content.0.content", "metadata.extra", "extra"],
    textAt: "system",
    opaqueAt: [
      "messages.1.content.0.id",
      "messages.1.content.0.name",
      "messages.2.content.0.tool_use_id",
      "messages.2.content.0.content",
      "tools.0.name",
    ],
    auth: (key) => ["x-api-key", key],
  },
];

/**
 * Alternates the two tenants evenly (acme by either of its keys), so that neither reaches the
 * edge's per-tenant request ceiling (1,200 a minute, the RATE_LIMITER binding; counted per test file).
 */
function tenantKey(i: number): string {
  return [ACME_KEY, GLOBEX_KEY, ACME_KEY_2, GLOBEX_KEY][i % 4]!;
}

/** Object keys that trip naive code: prototype names, empty, NUL, lone surrogates, very long, the canary. */
const HOSTILE_KEYS = [
  "__proto__",
  "constructor",
  "prototype",
  "",
  "\u0000",
  "\ud800",
  "k".repeat(1_000),
  CANARY,
  "toString",
  "hasOwnProperty",
];

/** `text` (a JSON object) with `"<key>": <value>` inserted first, at the text level (no JS object semantics). */
function withKeyFirst(text: string, key: string, value: string): string {
  return "{" + JSON.stringify(key) + ":" + value + (text === "{}" ? "" : ",") + text.slice(1);
}

/** Sets a path inside a JSON-able value, creating nothing: the path must exist (or be a new last key). */
function setAt(body: Record<string, unknown>, path: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(body) as Record<string, unknown>;
  const keys = path.split(".");
  let at: Record<string, unknown> = copy;
  for (const k of keys.slice(0, -1)) at = at[k] as Record<string, unknown>;
  at[keys[keys.length - 1]!] = value;
  return copy;
}

/** Malformed bodies for one endpoint, with a valid key and media type: not JSON, not UTF-8, invalid, too deep, too large. */
export function inferenceBodyCases(seed: number, maxBodyBytes: number, path: string): FuzzCase[] {
  const rng = new Rng(seed);
  const out: FuzzCase[] = [];
  for (const spec of INFERENCE.filter((s) => s.path === path)) {
    const url = LOCAL + spec.path;
    const add = (name: string, body: string | Uint8Array, expect?: number[]) =>
      out.push({
        name: `${spec.path} body ${name} #${out.length}`,
        method: "POST",
        url,
        headers: json([spec.auth(tenantKey(out.length))]),
        body,
        expect,
      });
    // The valid body carrying hostile strings (and the canary) in a free text field: each then made invalid.
    const hostile = () => setAt(spec.valid, spec.textAt, rng.pick(HOSTILE_STRINGS) + CANARY);
    const validText = JSON.stringify(hostile());

    for (const [field, bads] of spec.invalid) for (const bad of bads) add(`invalid ${field}`, substitute(hostile(), field, bad), [400]);
    // Random combinations: one invalid field, hostile text, a hostile key holding nesting within the
    // bound (body 1 + 63 levels), leading whitespace or a BOM: invalid by the field alone.
    const pairs = spec.invalid.flatMap(([field, bads]) => bads.map((bad) => [field, bad] as const));
    for (let i = 0; i < 100; i++) {
      const [field, bad] = rng.pick(pairs);
      let text = substitute(hostile(), field, bad);
      if (rng.chance(0.6)) {
        text = withKeyFirst(
          text,
          rng.pick(HOSTILE_KEYS),
          nestedText(rng.between(1, 63), JSON.stringify(CANARY), rng.pick(["array", "object", "mixed"] as const)),
        );
      }
      if (rng.chance(0.3)) text = rng.pick([" ", "\n", "\t", "\r\n", "\ufeff"]) + text;
      add(`random invalid ${field}`, text, [400]);
    }
    for (const text of truncations(rng, validText, 40)) add("truncated", text, [400]);
    for (let i = 0; i < 120; i++) {
      const broken = breakJson(rng, rng.chance(0.5) ? validText : JSON.stringify(hostile()));
      if (broken !== undefined) add("broken JSON", broken, [400]);
    }
    for (let i = 0; i < 30; i++) add("invalid UTF-8", withInvalidUtf8(rng, validText), [400]);
    for (const top of ["[]", "1", '"s"', "null", "true", "1e309", "[" + validText + "]", '""', "{}", " ", "\ufeff"])
      add("not an object", top, [400]);
    for (const raw of ABSURD_NUMBER_TEXTS) add(`model ${raw}`, substitute(hostile(), "model", { raw }), [400]);
    // Duplicate keys (the last wins, and is invalid); keys that pollute prototypes in naive code.
    add("duplicate model", validText.slice(0, -1) + ',"model":1}', [400]);
    add("__proto__", '{"__proto__":' + validText + ',"constructor":{"prototype":{"model":"m-eu"}}}', [400]);
    // Deep nesting anywhere, within the body limit: 65 levels up to as deep as the limit allows.
    for (const at of spec.deepAt) {
      for (const levels of [65, 100, 2_800, rng.between(66, 5_000), Math.floor(maxBodyBytes / 12)]) {
        const kind = rng.pick(["array", "object", "mixed"] as const);
        const text = withRaw(setAt(hostile(), at, RAW0), [nestedText(levels, JSON.stringify(CANARY), kind)]);
        add(`${levels} levels at ${at}`, text, text.length > maxBodyBytes ? [413] : [400]);
      }
    }
    // Values String() throws on where canonicalisation reads them, with a model no region serves
    // (the canary): the prompt is canonicalised before the model is checked, so anything but 404 is a bug there.
    for (const at of spec.opaqueAt) {
      for (const raw of UNPRINTABLE_JSON)
        add(`unprintable value at ${at}`, withRaw(setAt(setAt(hostile(), "model", CANARY), at, RAW0), [raw]), [404]);
    }
    // Huge: a long text made invalid elsewhere; a body over the limit.
    add(
      "huge text, bad model",
      substitute(setAt(spec.valid, spec.textAt, CANARY.repeat(Math.floor(maxBodyBytes / 24))), "model", 1),
      [400],
    );
    add("over the body limit", JSON.stringify(setAt(spec.valid, spec.textAt, CANARY.repeat(Math.ceil(maxBodyBytes / 10)))), [413]);
    add(
      "many values, bad model",
      substitute(setAt(spec.valid, "extra", new Array(Math.floor(maxBodyBytes / 4)).fill(0)), "model", 1),
      [400],
    );
  }
  return out;
}

/** Valid bodies sent wrongly: credentials, media types, headers, methods and paths. */
export function inferenceHeadCases(seed: number): FuzzCase[] {
  const rng = new Rng(seed);
  const out: FuzzCase[] = [];
  for (const spec of INFERENCE) {
    const body = JSON.stringify(setAt(spec.valid, spec.textAt, CANARY));
    const add = (name: string, c: Omit<FuzzCase, "name">) => out.push({ name: `${spec.path} ${name} #${out.length}`, ...c });
    const post = (name: string, headers: Array<[string, string]>, expect?: number[], url = LOCAL + spec.path) =>
      add(name, { method: "POST", url, headers, body, expect });
    const key = () => tenantKey(out.length);

    // Credentials: none, malformed, wrong, development keys off loopback or through a proxy.
    const badAuth: Array<Array<[string, string]>> = [
      [],
      [["authorization", "Bearer"]],
      [["authorization", "Bearer "]],
      [["authorization", `Bearer ${CANARY} ${CANARY}`]],
      [["authorization", `Basic ${btoa(`${CANARY}:${ACME_KEY}`)}`]],
      [["authorization", `Token ${ACME_KEY}`]],
      [["authorization", ACME_KEY]],
      [["authorization", `Bearer ${ACME_KEY}x`]],
      [["authorization", `Bearer ${CANARY}`]],
      [bearer(ACME_KEY), bearer(CANARY)],
      [bearer(CANARY), bearer(ACME_KEY)],
      [["x-api-key", CANARY]],
      [["x-api-key", " "]],
      [bearer(TEST_NODE_TOKEN)],
      [bearer(TEST_ADMIN_TOKEN)],
      [bearer(DEV_API_KEY)],
      [bearer(DEV_API_KEY), ["cf-connecting-ip", "203.0.113.7"]],
      [bearer(DEV_API_KEY), ["x-forwarded-for", `127.0.0.1, ${CANARY}`]],
      [bearer(DEV_API_KEY), ["sec-fetch-site", "cross-site"]],
      [bearer("x".repeat(MAX_HEADER_VALUE_BYTES + 1))],
    ];
    for (const headers of badAuth) post("bad credentials", json(headers), [401, 431]);
    for (const headers of badAuth.slice(0, 8)) post("bad credentials, remote host", json(headers), [401], REMOTE + spec.path);
    post("development key, remote host", json([bearer(DEV_API_KEY)]), [401], REMOTE + spec.path);

    // Media types that are not exactly JSON.
    for (const type of [
      "application/jsonx",
      "text/plain; application/json",
      "application/json-seq",
      "application/json, text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "text/plain",
      "application/json; charset=utf-16",
      `application/json; charset=${CANARY}`,
      "application/json;;x",
      "application/json; charset",
      'application/json; charset="utf-8',
      "application/*",
      "*/*",
      "json",
      `application/${CANARY}`,
      "application/problem+json",
      "application/vnd.api+json",
    ]) {
      post(`content-type ${type}`, [["content-type", type], spec.auth(key())], [415]);
    }
    // Oversized heads, and header values the router reads, made invalid.
    post("one header over the bound", json([spec.auth(key()), ["x-session-id", CANARY.repeat(MAX_HEADER_VALUE_BYTES / 8)]]), [431]);
    post(
      "unknown header over the bound",
      json([spec.auth(key()), [`x-${CANARY.toLowerCase()}`, "v".repeat(MAX_HEADER_VALUE_BYTES + 1)]]),
      [431],
    );
    const many: Array<[string, string]> = [];
    for (let i = 0; i < 40; i++) many.push([`x-filler-${i}`, CANARY.repeat(Math.ceil(MAX_HEADER_BYTES / 40 / CANARY.length))]);
    post("many headers over the bound", json([spec.auth(key()), ...many]), [431]);
    const dup: Array<[string, string]> = [];
    for (let i = 0; i < 20; i++) dup.push(["x-session-id", CANARY.repeat(50)]);
    post("duplicate headers over the bound", json([spec.auth(key()), ...dup]), [431]);
    post("URL over the bound", json([spec.auth(key())]), [414], LOCAL + spec.path + "?" + CANARY.repeat(MAX_URL_BYTES / 8));
    post("unknown pinned region", json([spec.auth(key()), ["x-warmpath-region", CANARY]]), [400]);
    post("pinned region not serving the model", json([spec.auth(key()), ["x-warmpath-region", "ap"]]), [400]);
    post("namespace not allowed", json([spec.auth(key()), ["x-warmpath-namespace", CANARY]]), [403]);
    post("bad request id and media type", [["content-type", "text/plain"], spec.auth(key()), ["x-request-id", `${CANARY} <x>`]], [415]);
    post("long request id and media type", [["content-type", "text/plain"], spec.auth(key()), ["x-request-id", CANARY.repeat(20)]], [415]);

    // Methods that are not POST.
    for (const method of ["GET", "PUT", "PATCH", "DELETE"]) {
      add(`method ${method}`, { method, url: LOCAL + spec.path, headers: json([spec.auth(key())]), expect: [404, 405] });
    }
    // Path tricks: without a key they never pass the guard; with one, the body is invalid.
    for (const path of pathTricks(spec.path)) {
      post(`path ${path} without a key`, json(), undefined, LOCAL + path);
      add(`path ${path} with an invalid body`, {
        method: "POST",
        url: LOCAL + path,
        headers: json([spec.auth(key())]),
        body: '{"model":1}',
      });
    }
    // One more of each at random, so a seed change explores new combinations.
    for (let i = 0; i < 4; i++) post("random bad credential", json([...rng.pick(badAuth), ...rng.pick(badAuth)]), [401, 431]);
  }
  return out;
}

/** GET /v1/models and /v1/models/{id}: credentials, methods, ids that are paths in disguise. */
export function modelsCases(seed: number): FuzzCase[] {
  const rng = new Rng(seed);
  const out: FuzzCase[] = [];
  const add = (name: string, c: Omit<FuzzCase, "name">) => out.push({ name: `models ${name} #${out.length}`, ...c });
  for (const path of ["/v1/models", "/v1/models/m-eu", "/v1/models/org/base-7b"]) {
    for (const headers of [
      [],
      [bearer(CANARY)],
      [["authorization", "Basic " + btoa(CANARY)]],
      [bearer(DEV_API_KEY), ["cf-connecting-ip", "198.51.100.1"]],
    ] as Array<Array<[string, string]>>) {
      add(`${path} bad credentials`, { method: "GET", url: LOCAL + path, headers, expect: [401] });
      add(`${path} bad credentials, remote`, { method: "GET", url: REMOTE + path, headers, expect: [401] });
    }
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      add(`${path} method ${method}`, { method, url: LOCAL + path, headers: [bearer(ACME_KEY)], expect: [404, 405] });
    }
    add(`${path} oversized header`, {
      method: "GET",
      url: LOCAL + path,
      headers: [bearer(ACME_KEY), ["cookie", "c".repeat(MAX_HEADER_VALUE_BYTES + 1)]],
      expect: [431],
    });
    for (const trick of pathTricks(path)) add(`${trick} without a key`, { method: "GET", url: LOCAL + trick, headers: [] });
  }
  // Unknown ids, with a key: hostile text, encoded, path-like, long.
  const ids = [
    CANARY,
    `${CANARY}/${CANARY}`,
    `..%2f..%2fadmin%2fstate%2f${CANARY}`,
    `%2e%2e/%2e%2e/${CANARY}`,
    `${CANARY}%00`,
    `%ED%A0%80${CANARY}`,
    `%C0%AE%C0%AE/${CANARY}`,
    `%${CANARY}`,
    `${CANARY}%zz`,
    `m-eu%2f${CANARY}`,
    `m-eu/${CANARY}`,
    `M-EU${CANARY}`,
    encodeURIComponent(`${CANARY}\u202e\ufeff\u0000`),
    encodeURIComponent(`<script>${CANARY}</script>`),
    CANARY.repeat(40),
    ...HOSTILE_STRINGS.filter((s) => s.includes(CANARY)).map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, "") || CANARY)),
  ];
  for (const id of ids) {
    add(`unknown id ${id.slice(0, 40)}`, {
      method: "GET",
      url: `${LOCAL}/v1/models/${id}`,
      headers: [bearer(tenantKey(out.length))],
      expect: [404],
    });
  }
  add("id over the URL bound", {
    method: "GET",
    url: `${LOCAL}/v1/models/${CANARY.repeat(MAX_URL_BYTES / 8)}`,
    headers: [bearer(ACME_KEY)],
    expect: [414],
  });
  for (let i = 0; i < 120; i++) {
    const id = Array.from(
      { length: rng.between(1, 6) },
      () => encodeURIComponent(rng.pick(HOSTILE_STRINGS).replace(/[\ud800-\udfff]/g, "")) + CANARY,
    ).join(rng.pick(["/", "%2f", "//", "/../", "/./"]));
    add(`random id`, { method: "GET", url: `${LOCAL}/v1/models/${id}`, headers: [bearer(tenantKey(out.length))] });
  }
  return out;
}

const validReport = {
  node_id: "fz-eu-1",
  region: "eu",
  url: "http://fz-eu-1.ok.node.test",
  models: ["m-eu", "m-shared"],
  kv_capacity_tokens: 200_000,
  running: 0,
  waiting: 0,
  kv_usage: 0,
};

/** The node API: malformed and absurd reports, forbidden URLs, forged removals. */
export function nodeCases(seed: number): FuzzCase[] {
  const rng = new Rng(seed);
  const out: FuzzCase[] = [];
  const add = (name: string, c: Omit<FuzzCase, "name">) => out.push({ name: `nodes ${name} #${out.length}`, ...c });
  const report = (name: string, body: string | Uint8Array, expect?: number[]) =>
    add(`report ${name}`, {
      method: "POST",
      url: `${LOCAL}/v1/nodes/report`,
      headers: json([bearer(TEST_NODE_TOKEN)]),
      body,
      expect,
    });
  const reportText = JSON.stringify(validReport);

  const invalid: Array<[string, Bad[]]> = [
    ["node_id", ["Bad Id!", "", "a".repeat(64), "-a", "a_b", CANARY, "..", "a/b", "\ud800", "a\u0000", 1, null, undefined]],
    ["region", ["", "r".repeat(65), 1, null, [], undefined]],
    [
      "url",
      [
        "ftp://x.test",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "data:text/plain,x",
        "gopher://x.test",
        "ws://x.test",
        "http://",
        "//x.test",
        "http:x.test",
        "x.test",
        "",
        "http://a b.test",
        `http://x.test\u0000${CANARY}`,
        `http://${CANARY}<>.test`,
        `blob:http://x.test/${CANARY}`,
        1,
        null,
        [],
        undefined,
      ],
    ],
    ["models", [[], [""], [1], "m", new Array(65).fill("m"), ["m".repeat(257)], null, undefined]],
    ["kv_capacity_tokens", [0, -5, 1.5, -0, { raw: "1e309" }, "100", { raw: "9007199254740993" }, 1e30, null, undefined]],
    ["running", [-1, 1.5, "3", { raw: "1e309" }, { raw: "-1e309" }, 1e30, null, undefined]],
    ["waiting", [-1, 0.5, [], { raw: "1e309" }, 1e30, true, undefined]],
    ["kv_usage", [-0.1, 1.0001, { raw: "1e309" }, "0.5", 2, null, undefined]],
    ["boot_id", ["", "b".repeat(129), 1, [], null]],
  ];
  // (A URL that parses may be refused by the region's origin checks instead: 403.)
  for (const [field, bads] of invalid)
    for (const bad of bads) report(`invalid ${field}`, substitute(validReport, field, bad), field === "url" ? [400, 403] : [400]);
  report("unknown region", substitute(validReport, "region", CANARY), [400]);
  // kv_capacity_tokens must be a positive safe integer: every absurd number text fails it (-0 and
  // 1e-400 are zero; `running` would take those).
  for (const raw of ABSURD_NUMBER_TEXTS) report(`kv_capacity_tokens ${raw}`, substitute(validReport, "kv_capacity_tokens", { raw }), [400]);
  for (const text of truncations(rng, reportText, 30)) report("truncated", text, [400]);
  for (let i = 0; i < 150; i++) {
    const broken = breakJson(rng, reportText);
    if (broken !== undefined) report("broken JSON", broken, [400]);
  }
  for (let i = 0; i < 30; i++) report("invalid UTF-8", withInvalidUtf8(rng, reportText), [400]);
  // Random combinations: one invalid field (never url, which the origin checks may refuse with 403), a hostile key.
  const reportPairs = invalid.filter(([field]) => field !== "url").flatMap(([field, bads]) => bads.map((bad) => [field, bad] as const));
  for (let i = 0; i < 150; i++) {
    const [field, bad] = rng.pick(reportPairs);
    let text = substitute({ ...validReport, boot_id: rng.pick(HOSTILE_STRINGS) + CANARY }, field, bad);
    if (rng.chance(0.5)) text = withKeyFirst(text, rng.pick(HOSTILE_KEYS), nestedText(rng.between(1, 63), "null", "mixed"));
    report(`random invalid ${field}`, text, [400]);
  }
  for (const top of ["[]", "1", "null", '"x"', "{}"]) report("not an object", top, [400]);
  for (const levels of [65, 2_800, 1_200]) {
    report(
      `${levels} levels in an extra field`,
      withRaw({ ...validReport, extra: RAW0 }, [nestedText(levels, '"' + CANARY + '"', "mixed")]),
      [400],
    );
  }
  // Past the report's bound (128 KiB, src/edge/api/nodes.ts: the largest report the contract allows).
  report("over 128 KiB", JSON.stringify({ ...validReport, boot_id: "b", extra: "x".repeat(129 * 1024) + CANARY }), [413]);
  for (const type of ["text/plain", "application/jsonx", "text/plain; application/json", `application/json; charset=${CANARY}`]) {
    add(`report content-type ${type}`, {
      method: "POST",
      url: `${LOCAL}/v1/nodes/report`,
      headers: [["content-type", type], bearer(TEST_NODE_TOKEN)],
      body: reportText,
      expect: [415],
    });
  }

  // Credentials valid for nothing, on a report that would take over a registered node and on its removal.
  const badTokens: Array<Array<[string, string]>> = [
    [],
    [bearer(CANARY)],
    [bearer(ACME_KEY)],
    [["x-api-key", TEST_NODE_TOKEN]],
    [["authorization", `Basic ${btoa(TEST_NODE_TOKEN)}`]],
    [bearer(TEST_NODE_TOKEN), bearer(CANARY)],
    [bearer(DEV_NODE_TOKEN)],
    [bearer(DEV_NODE_TOKEN), ["cf-connecting-ip", "203.0.113.50"]],
    // Not `Bearer <token> `: the Headers API trims the trailing space, and that is the token.
    [bearer(TEST_NODE_TOKEN + "x")],
  ];
  // Shaped like a node secret (43 base64url characters): only the region object can refuse it
  // (401 for a secret it does not know, or 403 for a node registered with another one).
  const secretShaped: Array<Array<[string, string]>> = [[bearer("A".repeat(43))], [bearer((CANARY + "-").repeat(4).slice(0, 43))]];
  const hijack = JSON.stringify({ ...validReport, url: `http://${CANARY_ID}.ok.node.test`, boot_id: CANARY });
  for (const headers of [...badTokens, ...secretShaped]) {
    const expect = secretShaped.includes(headers) ? [401, 403] : [401];
    add("report with a bad token", { method: "POST", url: `${LOCAL}/v1/nodes/report`, headers: json(headers), body: hijack, expect });
    add("report with a bad token, remote", {
      method: "POST",
      url: `${REMOTE}/v1/nodes/report`,
      headers: json(headers),
      body: hijack,
      expect,
    });
    add("removal with a bad token", { method: "DELETE", url: `${LOCAL}/v1/nodes/eu/fz-eu-1`, headers, expect });
    add("removal with a bad token, remote", { method: "DELETE", url: `${REMOTE}/v1/nodes/eu/fz-eu-1`, headers, expect });
  }
  // Credentials valid for something else: the region token registers new ids only (it neither
  // reports for nor removes a node that has its own secret); the admin token removes, never reports.
  add("takeover with the region token", {
    method: "POST",
    url: `${LOCAL}/v1/nodes/report`,
    headers: json([bearer(TEST_NODE_TOKEN)]),
    body: hijack,
  });
  add("report with the admin token", {
    method: "POST",
    url: `${LOCAL}/v1/nodes/report`,
    headers: json([bearer(TEST_ADMIN_TOKEN)]),
    body: hijack,
  });
  add("removal with the region token", { method: "DELETE", url: `${LOCAL}/v1/nodes/eu/fz-eu-1`, headers: [bearer(TEST_NODE_TOKEN)] });
  // Forbidden URLs for a new node, with the region token (src/core/origins.ts): outside the
  // region's allowed origins, metadata and link-local addresses however written, userinfo, fragments,
  // too long. (Not loopback: the suite's configuration is in development mode, which admits it.)
  for (const url of [
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:169.254.169.254]/",
    "http://[fd00:ec2::254]/",
    "http://100.100.100.200/",
    "http://metadata.google.internal/",
    "http://0.0.0.0:8000/",
    "http://0/",
    "http://[::]/",
    "http://169.254.1.1/",
    "http://[fe80::1]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://0xa9.0xfe.0xa9.0xfe/",
    "http://2852039166/",
    "http://224.0.0.1/",
    "http://10.0.0.5:8000/",
    "http://fz-new.node.test.evil.example/",
    "http://node.test/",
    "http://user:pass@fz-new.ok.node.test/",
    `http://${CANARY}@fz-new.ok.node.test/`,
    "http://fz-new.ok.node.test/#frag",
    "http://fz-new.ok.node.test:99999/",
    "http://fz-new.ok.node.test/" + "a".repeat(2_100),
  ]) {
    report(`new node at ${url.slice(0, 60)}`, JSON.stringify({ ...validReport, node_id: "fz-new", url }), [400, 403]);
  }
  report(
    "new node outside the allowed origins",
    JSON.stringify({ ...validReport, node_id: "fz-new", url: `http://${CANARY_ID}.evil.example/` }),
    [403],
  );
  add("development node token, remote", {
    method: "DELETE",
    url: `${REMOTE}/v1/nodes/us/fz-us-1`,
    headers: [bearer(DEV_NODE_TOKEN)],
    expect: [401],
  });

  // Removals with the token but a bad target.
  const del = (path: string, expect: number[]) =>
    add(`removal ${path.slice(0, 60)}`, { method: "DELETE", url: LOCAL + path, headers: [bearer(TEST_NODE_TOKEN)], expect });
  del(`/v1/nodes/${CANARY}/fz-eu-1`, [404]);
  del(`/v1/nodes/eu/${CANARY_ID}`, [404]);
  for (const id of [
    CANARY,
    "FZ-EU-1",
    "fz_eu_1",
    "%2e%2e",
    "..%2ffz-eu-1",
    "fz-eu-1%00",
    "fz-eu-1%20",
    `fz-eu-1;${CANARY}`,
    "a".repeat(64),
    "-x",
    "%ED%A0%80",
  ]) {
    del(`/v1/nodes/eu/${id}`, [400, 404]);
  }
  for (const path of [
    `/v1/nodes/eu/fz-eu-1/${CANARY}`,
    "/v1/nodes/eu",
    "/v1/nodes/eu/",
    "/v1/nodes//fz-eu-1",
    "/v1/nodes/eu//fz-eu-1",
    `/v1/nodes/eu%2ffz-eu-1`,
  ]) {
    del(path, [400, 404]);
  }
  for (const method of ["GET", "PUT", "PATCH"]) {
    add(`method ${method} on a node`, {
      method,
      url: `${LOCAL}/v1/nodes/eu/fz-eu-1`,
      headers: [bearer(TEST_NODE_TOKEN)],
      expect: [404, 405],
    });
    add(`method ${method} on report`, { method, url: `${LOCAL}/v1/nodes/report`, headers: [bearer(TEST_NODE_TOKEN)], expect: [404, 405] });
  }
  add("method DELETE on report", { method: "DELETE", url: `${LOCAL}/v1/nodes/report`, headers: [bearer(TEST_NODE_TOKEN)], expect: [405] });
  for (const trick of [...pathTricks("/v1/nodes/eu/fz-eu-1"), ...pathTricks("/v1/nodes/report")]) {
    add(`${trick} without a token`, { method: "DELETE", url: LOCAL + trick, headers: [] });
    add(`${trick} POST without a token`, { method: "POST", url: LOCAL + trick, headers: json(), body: reportText });
  }
  add("oversized header", {
    method: "DELETE",
    url: `${LOCAL}/v1/nodes/eu/fz-eu-1`,
    headers: [bearer(TEST_NODE_TOKEN), ["x-pad", "p".repeat(MAX_HEADER_VALUE_BYTES + 1)]],
    expect: [431],
  });
  add("oversized token", {
    method: "DELETE",
    url: `${LOCAL}/v1/nodes/eu/fz-eu-1`,
    headers: [bearer(TEST_NODE_TOKEN.repeat(1_000))],
    expect: [431],
  });
  return out;
}

/** The admin API: what must never be admitted without the admin token, locally or not. */
export function adminCases(seed: number): FuzzCase[] {
  const rng = new Rng(seed);
  const out: FuzzCase[] = [];
  const add = (name: string, c: Omit<FuzzCase, "name">) => out.push({ name: `admin ${name} #${out.length}`, ...c });
  const routes: Array<[string, string]> = [
    ["GET", "/admin/state"],
    ["GET", "/admin/state/eu"],
    ["GET", "/admin/history"],
    ["GET", "/metrics"],
    ["POST", "/admin/regions/eu/restart"],
  ];
  // On loopback in development mode the admin API needs no token, but never admits a credential it
  // cannot read, a wrong one, or a request a header says came from elsewhere.
  const refusedLocally: Array<Array<[string, string]>> = [
    [["authorization", "Basic YWRtaW46YWRtaW4="]],
    [["authorization", "Bearer"]],
    [["authorization", `Bearer ${CANARY} x`]],
    [bearer(CANARY)],
    [bearer(DEV_ADMIN_TOKEN)],
    [bearer(ACME_KEY)],
    [bearer(TEST_NODE_TOKEN)],
    [bearer(TEST_ADMIN_TOKEN), bearer(TEST_ADMIN_TOKEN)],
    [["cf-connecting-ip", "203.0.113.1"]],
    [["cf-connecting-ip", CANARY]],
    [
      ["cf-connecting-ip", "127.0.0.1"],
      ["x-forwarded-for", "203.0.113.1"],
    ],
    [["x-forwarded-for", "127.0.0.1, 198.51.100.7"]],
    [["x-real-ip", "10.0.0.1"]],
    [["true-client-ip", "::ffff:10.0.0.1"]],
    [["forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"]],
    [["forwarded", 'for="_hidden"']],
    [["forwarded", "proto=https"]],
    [["sec-fetch-site", "cross-site"]],
    [["sec-fetch-site", "same-site"]],
  ];
  for (const [method, path] of routes) {
    for (const headers of refusedLocally) add(`${method} ${path} locally`, { method, url: LOCAL + path, headers, expect: [401] });
    for (const headers of [[], ...refusedLocally.slice(0, 8)] as Array<Array<[string, string]>>) {
      add(`${method} ${path} remote`, { method, url: REMOTE + path, headers, expect: [401] });
    }
    add(`${method} ${path} 127.0.0.2 forged`, {
      method,
      url: "http://127.0.0.2" + path,
      headers: [["x-forwarded-for", "8.8.8.8"]],
      expect: [401],
    });
    add(`${method} ${path} oversized header`, {
      method,
      url: LOCAL + path,
      headers: [["x-pad", "p".repeat(MAX_HEADER_VALUE_BYTES + 1)]],
      expect: [431],
    });
    for (const wrong of ["GET", "POST", "PUT", "PATCH", "DELETE"].filter((m) => m !== method)) {
      add(`${wrong} ${path}`, { method: wrong, url: LOCAL + path, headers: [bearer(TEST_ADMIN_TOKEN)], expect: [404, 405] });
    }
    for (const trick of pathTricks(path)) add(`${method} ${trick} remote`, { method, url: REMOTE + trick, headers: [] });
  }
  for (const region of [CANARY, `${CANARY}%00`, `%2e%2e%2f${CANARY}`, encodeURIComponent(`\u202e${CANARY}`)]) {
    add(`state of unknown region`, {
      method: "GET",
      url: `${LOCAL}/admin/state/${region}`,
      headers: [bearer(TEST_ADMIN_TOKEN)],
      expect: [404],
    });
    add(`restart of unknown region`, {
      method: "POST",
      url: `${LOCAL}/admin/regions/${region}/restart`,
      headers: [bearer(TEST_ADMIN_TOKEN)],
      expect: [404],
    });
  }
  for (let i = 0; i < 300; i++) {
    const [method, path] = rng.pick(routes);
    const headers = [...rng.pick(refusedLocally), ...(rng.chance(0.5) ? rng.pick(refusedLocally) : [])];
    add(`random ${method} ${path}`, { method, url: (rng.chance(0.5) ? LOCAL : REMOTE) + path, headers, expect: [401] });
  }
  return out;
}
