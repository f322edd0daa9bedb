/**
 * A small deterministic value valid against a JSON schema: what the simulated model generates for
 * a function call's arguments (tools.ts) and for structured output (structured-output.ts), as an
 * engine's grammar-constrained decoding would produce some valid instance.
 *
 * - `const`, then `enum` (the first value); `anyOf` / `oneOf`: the first alternative that is not
 *   `{"type": "null"}` (a nullable field gets its value); `allOf`: the parts merged (properties and
 *   required lists joined); `$ref`: a local JSON pointer (`#/$defs/X`, `#/definitions/X`);
 * - `type` a list: its first type that is not "null"; no `type`: an object if `properties`, an
 *   array if `items`, else a string;
 * - object: its required properties, and (`optional`) its other declared ones too, in declaration
 *   order; never a property the schema does not declare (so `additionalProperties: false` holds);
 * - array: `prefixItems` then `items`, `max(minItems, defaultItems)` of them, at most `maxItems`
 *   and MAX_ITEMS;
 * - string: a filler word (seeded), lengthened to `minLength`, cut to `maxLength`; a few common
 *   `format`s get a fixed valid example;
 * - number / integer: 1, moved into `minimum` / `maximum` / the exclusive bounds, rounded up to a
 *   `multipleOf`; boolean: true; null: null.
 *
 * Bounded: past MAX_VALUES values in all, or MAX_DEPTH levels, only what validity needs (required
 * properties, `minItems` items), and nothing past twice MAX_DEPTH, so a recursive or wide schema
 * still gives a small answer. Not honoured: `pattern`, `uniqueItems`, `not`, `if`/`then`, `minProperties`,
 * `dependentRequired`, remote `$ref`s.
 */
import { fillerWord } from "./openai.ts";

/**
 * Values generated for one answer before the generator stops adding optional parts: 256 keeps the
 * widest answer (16 items of 16) a few KB, ~1,000 tokens at the node's 4 characters a token.
 */
export const MAX_VALUES = 256;
/** Nesting levels filled freely; deeper, only what validity needs (8: deeper than realistic response schemas). */
export const MAX_DEPTH = 8;
/** Items of one array at most (16, as the function-call arguments always had). */
export const MAX_ITEMS = 16;

export interface ValueOptions {
  /** Fill optional properties too (structured output), or only the required ones (function arguments). */
  optional: boolean;
  /** Items of an array whose schema asks for none (`minItems` absent or 0). */
  defaultItems: number;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);

/** Fixed examples of the string formats structured-output schemas use most. */
const FORMATS: Record<string, string> = {
  "date-time": "2025-01-01T00:00:00Z",
  date: "2025-01-01",
  time: "00:00:00",
  email: "user@example.com",
  uri: "https://example.com/",
  uuid: "00000000-0000-4000-8000-000000000000",
  ipv4: "127.0.0.1",
  hostname: "example.com",
};

interface State {
  root: unknown;
  opts: ValueOptions;
  /** The next filler word's index: seeded by the prompt, so another prompt gets other words. */
  word: number;
  values: number;
}

/** A value valid against `schema`, seeded by `seed` (the prompt's tokens). */
export function schemaValue(schema: unknown, seed: number, opts: ValueOptions): unknown {
  return value(schema, { root: schema, opts, word: seed, values: 0 }, 0);
}

/** A local `$ref` (`#/a/b`, with `~1` / `~0` escapes) in the root schema; undefined if it names nothing. */
function resolveRef(root: unknown, ref: string): unknown {
  if (ref === "#") return root;
  if (!ref.startsWith("#/")) return undefined;
  let at: unknown = root;
  for (const raw of ref.slice(2).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (!isObject(at)) return undefined;
    at = at[key];
  }
  return at;
}

/** `allOf`'s parts as one schema: the first part's keywords, properties and required lists joined. */
function mergeAll(parts: unknown[]): Json {
  const out: Json = {};
  const properties: Json = {};
  const required: unknown[] = [];
  for (const p of parts) {
    if (!isObject(p)) continue;
    for (const [k, v] of Object.entries(p)) if (!(k in out)) out[k] = v;
    if (isObject(p.properties)) Object.assign(properties, p.properties);
    if (Array.isArray(p.required)) required.push(...p.required);
  }
  if (Object.keys(properties).length > 0) out.properties = properties;
  if (required.length > 0) out.required = required;
  return out;
}

/** The first of `types` that is not "null" (JSON schema allows a list); inferred when absent. */
function typeOf(schema: Json): string | undefined {
  const t = schema.type;
  if (typeof t === "string") return t;
  if (Array.isArray(t))
    return t.find((x): x is string => typeof x === "string" && x !== "null") ?? (t.includes("null") ? "null" : undefined);
  if (isObject(schema.properties)) return "object";
  if (schema.items !== undefined || schema.prefixItems !== undefined) return "array";
  return undefined;
}

const isNullSchema = (s: unknown) => isObject(s) && s.type === "null";

function value(schema: unknown, st: State, depth: number): unknown {
  st.values++;
  if (!isObject(schema)) return fillerWord(st.word++); // `true`, `{}` or not a schema: any value is valid
  if (typeof schema.$ref === "string" && depth <= MAX_DEPTH * 2) {
    const target = resolveRef(st.root, schema.$ref);
    if (target !== undefined) return value(target, st, depth + 1);
  }
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  for (const key of ["anyOf", "oneOf"]) {
    const alternatives = schema[key];
    if (Array.isArray(alternatives) && alternatives.length > 0) {
      return value(alternatives.find((a) => !isNullSchema(a)) ?? alternatives[0], st, depth + 1);
    }
  }
  if (Array.isArray(schema.allOf) && schema.allOf.length > 0) {
    const { allOf: _parts, ...rest } = schema;
    return value(mergeAll([rest, ...schema.allOf]), st, depth + 1);
  }
  const spare = depth < MAX_DEPTH && st.values < MAX_VALUES;
  switch (typeOf(schema)) {
    case "object":
      return objectValue(schema, st, depth, spare);
    case "array":
      return arrayValue(schema, st, depth, spare);
    case "integer":
    case "number":
      return numberValue(schema, typeOf(schema) === "integer");
    case "boolean":
      return true;
    case "null":
      return null;
    default:
      return stringValue(schema, st);
  }
}

function objectValue(schema: Json, st: State, depth: number, spare: boolean): Json {
  const out: Json = {};
  const properties = isObject(schema.properties) ? schema.properties : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === "string") : []);
  // Past the depth bound only what validity needs, and nothing at all past twice it (a schema that
  // requires itself has no finite instance: the answer is cut short there, as a length limit would).
  if (depth > MAX_DEPTH * 2) return out;
  for (const name of Object.keys(properties)) {
    if (required.has(name) || (st.opts.optional && spare && st.values < MAX_VALUES)) {
      out[name] = value(properties[name], st, depth + 1);
    }
  }
  // Required names the schema does not describe: any value is valid for them.
  for (const name of required) if (!(name in out)) out[name] = value(undefined, st, depth + 1);
  return out;
}

function arrayValue(schema: Json, st: State, depth: number, spare: boolean): unknown[] {
  const min = typeof schema.minItems === "number" && schema.minItems > 0 ? Math.ceil(schema.minItems) : 0;
  const max = typeof schema.maxItems === "number" && schema.maxItems >= 0 ? Math.floor(schema.maxItems) : MAX_ITEMS;
  const wanted = spare ? Math.max(min, st.opts.defaultItems) : min;
  const n = Math.min(wanted, max, MAX_ITEMS);
  const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
  if (depth > MAX_DEPTH * 2) return [];
  return Array.from({ length: n }, (_, i) => value(i < prefix.length ? prefix[i] : schema.items, st, depth + 1));
}

function numberValue(schema: Json, integer: boolean): number {
  let v = 1;
  const num = (k: string) => (typeof schema[k] === "number" ? (schema[k] as number) : undefined);
  const min = num("minimum");
  const max = num("maximum");
  const exMin = num("exclusiveMinimum");
  const exMax = num("exclusiveMaximum");
  if (min !== undefined && v < min) v = min;
  if (max !== undefined && v > max) v = max;
  if (exMin !== undefined && v <= exMin) v = exMin + 1;
  if (exMax !== undefined && v >= exMax) v = exMax - 1;
  const step = num("multipleOf");
  if (step !== undefined && step > 0) v = Math.ceil(v / step) * step;
  return integer ? Math.ceil(v) : v;
}

function stringValue(schema: Json, st: State): string {
  const format = typeof schema.format === "string" ? FORMATS[schema.format] : undefined;
  let s = format ?? fillerWord(st.word++);
  const minLength = typeof schema.minLength === "number" ? schema.minLength : 0;
  while (s.length < minLength) s += " " + fillerWord(st.word++);
  if (typeof schema.maxLength === "number" && s.length > schema.maxLength) s = s.slice(0, Math.max(0, schema.maxLength));
  return s;
}
