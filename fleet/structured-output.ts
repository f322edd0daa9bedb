/**
 * Structured output, as an engine with grammar-constrained decoding (vLLM's xgrammar) answers it:
 * chat's and completions' `response_format`, the Responses API's `text.format`.
 *
 * - `{"type": "text"}` (or none): the filler answer (continuation.ts).
 * - `{"type": "json_object"}`: a JSON object, `{"answer": "<the filler answer's first words>"}`,
 *   as many words as keep it within the node's `default_max_tokens` (at least one).
 * - `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}` (Responses:
 *   `{"type": "json_schema", "name", "schema", "strict"}`): a value valid against the schema
 *   (schema-value.ts: every declared property, arrays of at least one item), seeded by the prompt.
 *   Chat's `json_schema` without `schema` is any JSON object (the `json_object` answer).
 *
 * The JSON is compact and generated 4 characters a token (the node's tokens), so
 * `completion_tokens` is what was generated; `max_tokens` at or under its length cuts it (the text
 * is then not whole JSON, as an engine's is not) with `finish_reason` "length". With
 * `continue_final_message` the JSON is generated whole after the carried text: an engine's grammar
 * starts at the first generated token, whatever the message held (warmpath never continues a
 * structured answer: src/region/continuation-body.ts).
 *
 * 400s (BadRequestError) as vLLM's request validation gives them: a format that is not an object,
 * an unknown `type`, `json_schema` without its object or its `name`, a `schema` that is not an
 * object, a `strict` that is not a boolean.
 */
import { fillerToken } from "./openai.ts";
import { RequestError } from "./prompt.ts";
import { schemaValue } from "./schema-value.ts";
import type { Output } from "./tools.ts";

export type OutputFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; name: string; schema: Record<string, unknown> | undefined; strict: boolean | undefined };

/** Characters of the JSON per generated token (the node's tokens are 4 characters). */
export const JSON_PIECE_CHARS = 4;

/** Items of an array whose schema does not ask for any: a model answering a list gives one at least. */
const DEFAULT_ITEMS = 1;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);
const TYPES = new Set(["text", "json_object", "json_schema"]);

function formatType(f: Json, param: string): "text" | "json_object" | "json_schema" {
  if (typeof f.type !== "string" || !TYPES.has(f.type)) {
    // The field, never the value sent (the router passes a node's 4xx on: docs/API.md, "Errors").
    throw new RequestError(`${param}.type must be "text", "json_object" or "json_schema"`, `${param}.type`);
  }
  return f.type as "text" | "json_object" | "json_schema";
}

/** The `name`, `schema` and `strict` of a JSON schema format (chat's `json_schema` object, or the Responses format itself). */
function schemaFormat(spec: Json, param: string, schemaRequired: boolean): OutputFormat {
  if (typeof spec.name !== "string") throw new RequestError(`${param}.name is required (a string)`, `${param}.name`);
  const schema = spec.schema;
  if (schema === undefined || schema === null) {
    if (schemaRequired) throw new RequestError(`${param}.schema is required (a JSON schema object)`, `${param}.schema`);
  } else if (!isObject(schema)) throw new RequestError(`${param}.schema must be a JSON schema object`, `${param}.schema`);
  const strict = spec.strict;
  if (strict !== undefined && strict !== null && typeof strict !== "boolean") {
    throw new RequestError(`${param}.strict must be a boolean`, `${param}.strict`);
  }
  return { type: "json_schema", name: spec.name, schema: isObject(schema) ? schema : undefined, strict: strict ?? undefined };
}

/** Chat's and completions' `response_format`. */
export function chatResponseFormat(v: unknown, param = "response_format"): OutputFormat {
  if (v === undefined || v === null) return { type: "text" };
  if (!isObject(v)) throw new RequestError(`${param} must be an object`, param);
  const type = formatType(v, param);
  if (type !== "json_schema") return { type };
  if (!isObject(v.json_schema)) {
    throw new RequestError(`${param}.json_schema is required when ${param}.type is "json_schema"`, `${param}.json_schema`);
  }
  return schemaFormat(v.json_schema, `${param}.json_schema`, false);
}

/** The Responses API's `text` (`{"format": ...}`): the format's fields flat, `schema` required as OpenAI's. */
export function responsesTextFormat(text: unknown): OutputFormat {
  if (text === undefined || text === null) return { type: "text" };
  if (!isObject(text)) throw new RequestError("text must be an object", "text");
  const f = text.format;
  if (f === undefined || f === null) return { type: "text" };
  if (!isObject(f)) throw new RequestError("text.format must be an object", "text.format");
  const type = formatType(f, "text.format");
  return type === "json_schema" ? schemaFormat(f, "text.format", true) : { type };
}

/** The JSON text the simulated model answers in `format` (not "text"), seeded by the prompt's tokens. */
export function structuredText(format: Exclude<OutputFormat, { type: "text" }>, seed: number, defaultMaxTokens: number): string {
  if (format.type === "json_schema" && format.schema) {
    return JSON.stringify(schemaValue(format.schema, seed, { optional: true, defaultItems: DEFAULT_ITEMS }));
  }
  // Any JSON object: the filler answer wrapped, as many of its words as fit the natural length.
  let words = fillerToken(seed, 0);
  for (let i = 1; ; i++) {
    const next = words + fillerToken(seed, i);
    if (Math.ceil(JSON.stringify({ answer: next }).length / JSON_PIECE_CHARS) > defaultMaxTokens) break;
    words = next;
  }
  return JSON.stringify({ answer: words });
}

/**
 * `json` generated 4 characters a token: `min(maxTokens, natural)` tokens; `maxTokens` at or under
 * the natural length leaves no room for the end of sequence: "length" (as planAnswer and
 * toolCallOutput decide), else "stop".
 */
export function jsonOutput(json: string, maxTokens: number | undefined): Output {
  const pieces: string[] = [];
  for (let at = 0; at < json.length; at += JSON_PIECE_CHARS) pieces.push(json.slice(at, at + JSON_PIECE_CHARS));
  const natural = Math.max(1, pieces.length);
  const completionTokens = Math.min(maxTokens ?? natural, natural);
  const text = pieces.slice(0, completionTokens).join("");
  return {
    completionTokens,
    finishReason: maxTokens !== undefined && maxTokens <= natural ? "length" : "stop",
    piece: (i) => pieces[i] ?? "",
    text: () => text,
    call: undefined,
  };
}
