/**
 * OpenAI-compatible response shapes, as vLLM's server writes them: chat.completion(.chunk),
 * text_completion, usage with prompt_tokens_details.cached_tokens, and the error envelope.
 */
import { randomBytes } from "node:crypto";

export type Kind = "chat" | "completion";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function usage(promptTokens: number, completionTokens: number, cachedTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

export function newId(kind: Kind): string {
  return (kind === "chat" ? "chatcmpl-" : "cmpl-") + randomBytes(12).toString("hex");
}

/** OpenAI's error body. */
export function errorBody(message: string, type: string, param: string | null = null, code: string | number | null = null) {
  return { error: { message, type, param, code } };
}

const WORDS = (
  "the model streams deterministic filler words so that every answer has a real length and shape " +
  "while the timing follows prefill and decode costs of a simulated inference node in a fleet"
).split(" ");

/** The `i`-th filler word (lowercase), e.g. a tool call's string argument. */
export function fillerWord(i: number): string {
  return WORDS[i % WORDS.length]!;
}

/** Token `i` of a deterministic filler answer; `seed` varies the start between prompts. */
export function fillerToken(seed: number, i: number): string {
  const w = WORDS[(seed + i) % WORDS.length]!;
  return i === 0 ? w.charAt(0).toUpperCase() + w.slice(1) : " " + w;
}

export interface StreamIds {
  kind: Kind;
  id: string;
  created: number;
  model: string;
}

/**
 * One streamed chunk carrying text (and, on the last token, the finish reason). `index`: the
 * choice, i.e. the prompt's place in a batched completions request.
 */
export function chunk(ids: StreamIds, text: string, finishReason: string | null, first = false, index = 0) {
  const base = {
    id: ids.id,
    object: ids.kind === "chat" ? "chat.completion.chunk" : "text_completion",
    created: ids.created,
    model: ids.model,
  };
  if (ids.kind === "chat") {
    const delta = first ? { role: "assistant", content: text } : { content: text };
    return { ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] };
  }
  return { ...base, choices: [{ index, text, logprobs: null, finish_reason: finishReason, stop_reason: null }] };
}

/** A function call the simulated model makes (tools.ts). */
export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as JSON text (cut short if `max_tokens` stopped the call). */
  arguments: string;
}

/**
 * A streamed chat chunk of a tool call, as vLLM's tool parsers stream one: the first names the
 * call (id, type, function name, empty arguments, with the assistant role), each later one carries
 * a piece of the arguments; the finish reason on the last.
 */
export function toolCallChunk(ids: StreamIds, call: ToolCall, piece: string, finishReason: string | null, first: boolean) {
  const toolCall = first
    ? { index: 0, id: call.id, type: "function", function: { name: call.name, arguments: piece } }
    : { index: 0, function: { arguments: piece } };
  const delta = first ? { role: "assistant", content: null, tool_calls: [toolCall] } : { tool_calls: [toolCall] };
  return {
    id: ids.id,
    object: "chat.completion.chunk",
    created: ids.created,
    model: ids.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
  };
}

/** A complete non-streamed chat answer that calls a function: no content, one tool call. */
export function fullToolCallResponse(ids: StreamIds, call: ToolCall, finishReason: string, u: Usage) {
  const message = {
    role: "assistant",
    content: null,
    tool_calls: [{ id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } }],
  };
  return {
    id: ids.id,
    created: ids.created,
    model: ids.model,
    object: "chat.completion",
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
    usage: u,
  };
}

/** A complete non-streamed answer to a batched completions request: one choice per prompt, in order. */
export function fullCompletions(ids: StreamIds, choices: { text: string; finishReason: string }[], u: Usage) {
  return {
    id: ids.id,
    created: ids.created,
    model: ids.model,
    object: "text_completion",
    choices: choices.map((c, index) => ({ index, text: c.text, logprobs: null, finish_reason: c.finishReason, stop_reason: null })),
    usage: u,
  };
}

/** The trailing usage chunk (`stream_options.include_usage`): no choices, only usage. */
export function usageChunk(ids: StreamIds, u: Usage) {
  const object = ids.kind === "chat" ? "chat.completion.chunk" : "text_completion";
  return { id: ids.id, object, created: ids.created, model: ids.model, choices: [], usage: u };
}

/** A complete non-streamed answer. */
export function fullResponse(ids: StreamIds, text: string, finishReason: string, u: Usage) {
  const base = { id: ids.id, created: ids.created, model: ids.model };
  if (ids.kind === "chat") {
    return {
      ...base,
      object: "chat.completion",
      choices: [{ index: 0, message: { role: "assistant", content: text, tool_calls: [] }, logprobs: null, finish_reason: finishReason }],
      usage: u,
    };
  }
  return {
    ...base,
    object: "text_completion",
    choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason, stop_reason: null }],
    usage: u,
  };
}
