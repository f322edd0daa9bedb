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

/** One streamed chunk carrying text (and, on the last token, the finish reason). */
export function chunk(ids: StreamIds, text: string, finishReason: string | null, first = false) {
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
  return { ...base, choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason, stop_reason: null }] };
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
