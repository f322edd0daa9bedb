/**
 * What the simulated model generates: the filler answer (continuation.ts), or a call of one of the
 * request's functions, and when it calls one. Deterministic, so tests and demos know the outcome:
 *
 * - never without function tools, nor with `tool_choice` "none";
 * - a named `tool_choice` (chat `{"type":"function","function":{"name"}}`, Responses
 *   `{"type":"function","name"}`, Messages `{"type":"tool","name"}`): that function;
 * - `tool_choice` "required" (Messages `{"type":"any"}`): the first function whose name the final
 *   user message mentions, else the first function;
 * - "auto" (the default): the first function (in `tools` order) whose name the request's final
 *   message mentions, if that message is the user's own text (a tool result last: the model answers
 *   in text, so an agent loop ends); else a text answer.
 *
 * "Mentions": the name appears with no letter, digit or `_` on either side (`get_weather` in
 * "Call get_weather for Oslo", not `search` in "research"). One call per answer (no parallel calls).
 *
 * The arguments are a small JSON object valid against the function's `parameters` schema: its
 * required properties only, strings a filler word, numbers and integers 1 (or the bound that
 * excludes 1), booleans true, enums and consts their first value, arrays their `minItems` items,
 * objects their own required properties. Streamed as the call's first token (the function's name)
 * then one token per 4 characters of the arguments, as vLLM's tool parsers stream pieces of them.
 */
import type { ToolCall } from "./openai.ts";
import { planToken, type AnswerPlan } from "./continuation.ts";
import { RequestError } from "./prompt.ts";
import { schemaValue } from "./schema-value.ts";

/** A function the request offers, whatever the API's shape for it. */
export interface FunctionTool {
  name: string;
  /** Its JSON schema (`parameters`, or Anthropic's `input_schema`). */
  parameters: unknown;
}

export type ToolChoice = { mode: "none" | "auto" | "required" } | { mode: "named"; name: string };

export type FinishReason = "stop" | "length" | "tool_calls";

/** What one request (one prompt) generates, token by token. */
export interface Output {
  /** Engine steps (tokens) to generate, at least 1. */
  completionTokens: number;
  /** `tool_calls` when a call was made whole (each API names it its own way). */
  finishReason: FinishReason;
  /** The text of generated token `i`: a piece of the answer, or of the call's arguments (`""` for the call's first token, its name). */
  piece(i: number): string;
  /** Everything generated: the answer, or the call's arguments. */
  text(): string;
  /** The function call, if the model calls one. */
  call: ToolCall | undefined;
}

/** The filler answer of `plan` (continuation.ts). */
export function textOutput(plan: AnswerPlan): Output {
  const piece = (i: number) => planToken(plan, i);
  return {
    completionTokens: plan.completionTokens,
    finishReason: plan.finishReason,
    piece,
    text: () => Array.from({ length: plan.completionTokens }, (_, i) => piece(i)).join(""),
    call: undefined,
  };
}

/** Characters of the arguments per streamed token (the node's tokens are 4 characters). */
export const ARGUMENT_PIECE_CHARS = 4;

/**
 * A call of `tool` with arguments seeded by `seed` (the prompt's tokens, as the answer's). Its
 * natural length is one token for the name and one per piece of the arguments; `maxTokens` at or
 * under it cuts the arguments and makes the finish reason `length` (as planAnswer does for text).
 */
export function toolCallOutput(tool: FunctionTool, seed: number, id: string, maxTokens: number | undefined): Output {
  const args = JSON.stringify(exampleArguments(tool.parameters, seed));
  const pieces: string[] = [];
  for (let at = 0; at < args.length; at += ARGUMENT_PIECE_CHARS) pieces.push(args.slice(at, at + ARGUMENT_PIECE_CHARS));
  const natural = 1 + pieces.length;
  const completionTokens = Math.min(maxTokens ?? natural, natural);
  const sent = pieces.slice(0, completionTokens - 1).join("");
  return {
    completionTokens,
    finishReason: maxTokens !== undefined && maxTokens <= natural ? "length" : "tool_calls",
    piece: (i) => (i === 0 ? "" : (pieces[i - 1] ?? "")),
    text: () => sent,
    call: { id, name: tool.name, arguments: sent },
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** Whether `text` names `name` as a word of its own (no letter, digit or `_` on either side). */
export function mentions(text: string, name: string): boolean {
  if (name === "") return false;
  const word = (c: string | undefined) => c !== undefined && /[A-Za-z0-9_]/.test(c);
  for (let at = text.indexOf(name); at >= 0; at = text.indexOf(name, at + 1)) {
    if (!word(text[at - 1]) && !word(text[at + name.length])) return true;
  }
  return false;
}

/**
 * The function the model calls, if any (the rules above). `lastUserText`: the text of the request's
 * final message if it is the user's own (not a tool result), else undefined. 400s as vLLM: a
 * `tool_choice` that requires a call without tools, or names a function not in them.
 */
export function chooseTool(
  tools: readonly FunctionTool[],
  choice: ToolChoice,
  lastUserText: string | undefined,
  param = "tool_choice",
): FunctionTool | undefined {
  if (choice.mode === "none") return undefined;
  if (tools.length === 0) {
    if (choice.mode === "auto") return undefined;
    throw new RequestError("When using `tool_choice`, `tools` must be set.", param);
  }
  if (choice.mode === "named") {
    const named = tools.find((t) => t.name === choice.name);
    if (!named) throw new RequestError("The tool specified in `tool_choice` does not match any of the specified `tools`", param);
    return named;
  }
  const mentioned = lastUserText === undefined ? undefined : tools.find((t) => mentions(lastUserText, t.name));
  return choice.mode === "required" ? (mentioned ?? tools[0]) : mentioned;
}

/**
 * Arguments for a function with this `parameters` schema (schema-value.ts): its required properties
 * only, arrays their `minItems` items; an object (`{}` if the schema says nothing).
 */
export function exampleArguments(schema: unknown, seed: number): unknown {
  const value = schemaValue(schema, seed, { optional: false, defaultItems: 0 });
  return isObject(value) ? value : {};
}

/** Chat's `tools`: the functions (`{"type":"function","function":{"name","parameters"}}`); others are not called. */
export function chatFunctionTools(tools: unknown): FunctionTool[] {
  if (!Array.isArray(tools)) return [];
  const out: FunctionTool[] = [];
  for (const t of tools) {
    if (!isObject(t) || (t.type !== undefined && t.type !== "function") || !isObject(t.function)) continue;
    if (typeof t.function.name === "string") out.push({ name: t.function.name, parameters: t.function.parameters });
  }
  return out;
}

/** Chat's (and the Responses API's) `tool_choice`: "none", "auto" (the default), "required", or a named function. */
export function openaiToolChoice(v: unknown, named: (o: Record<string, unknown>) => unknown): ToolChoice {
  if (v === undefined || v === null || v === "auto") return { mode: "auto" };
  if (v === "none" || v === "required") return { mode: v };
  if (isObject(v) && v.type === "function") {
    const name = named(v);
    if (typeof name === "string") return { mode: "named", name };
  }
  throw new RequestError('tool_choice must be "none", "auto", "required" or a named function', "tool_choice");
}

/** The named function of chat's `tool_choice` object: `{"type":"function","function":{"name"}}`. */
export const chatNamedFunction = (o: Record<string, unknown>): unknown => (isObject(o.function) ? o.function.name : undefined);
