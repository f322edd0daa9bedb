/**
 * The simulated model's answer, and how a request continues one another node began.
 *
 * The answer to a prompt of `s` tokens is `fillerToken(s, 0) + fillerToken(s, 1) + ...`, and its
 * natural length is the node's `default_max_tokens`: the model "stops" there. A router that lost a
 * node mid-stream re-sends the request with the text produced so far, and must get the rest of the
 * same answer, as a real model continuing its own text would (greedily) produce it:
 *
 * - chat with `continue_final_message`: the final assistant message holds the text so far; the
 *   seed is the one the request without that message had (its prompt is what precedes the
 *   message's text, prompt.ts), and the answer goes on after the whole filler tokens the message
 *   starts with;
 * - completions: the prompt ends with the text so far; the seed is the one the prompt without that
 *   text had. Found by trying every place in the prompt's tail where an answer could have begun.
 *
 * A continuation from token `k` generates tokens `k..`, at most `default_max_tokens - k` of them,
 * so that the first `k` tokens plus the continuation (its `max_tokens` reduced by `k`) are the
 * uninterrupted answer, byte for byte, with the same finish reason.
 */
import { fillerToken } from "./openai.ts";
import { countTokens } from "./prompt.ts";

/** Where the answer starts: its seed and the index of the first token to generate. */
export interface AnswerStart {
  seed: number;
  /** Tokens of the answer the request already carries (0: an ordinary request). */
  start: number;
}

/**
 * How many whole tokens of the answer with `seed`, at most `max`, `text` holds from `from` on,
 * and where they end.
 */
export function matchAnswer(text: string, from: number, seed: number, max: number): { tokens: number; end: number } {
  let tokens = 0;
  let end = from;
  while (tokens < max) {
    const t = fillerToken(seed, tokens);
    if (!text.startsWith(t, end)) break;
    end += t.length;
    tokens++;
  }
  return { tokens, end };
}

/**
 * A chat continuation (`continue_final_message`): the seed of the prompt before the final
 * assistant message, and the whole answer tokens that message's text starts with. Text that
 * differs from the answer (or a token cut in the middle) ends the match: the answer goes on from
 * the last whole matching token, whatever follows it in the message.
 */
export function chatContinuation(before: string, content: string, naturalTokens: number): AnswerStart {
  const seed = countTokens(before);
  return { seed, start: matchAnswer(content, 0, seed, naturalTokens).tokens };
}

/** Characters of a completion prompt's tail searched for carried answer text, per token of the natural answer. */
export const CARRIED_CHARS_PER_TOKEN = 32;

/**
 * A completions prompt that may end with the start of an answer: the largest `k >= 1` such that the
 * prompt ends with the answer's first `k` tokens for the seed of the prompt before them; else
 * `start` 0 and the prompt's own seed (an ordinary request). Only the last
 * `naturalTokens * CARRIED_CHARS_PER_TOKEN` characters are searched (a filler token is at most
 * 14). A prompt that ends with such text by chance is taken for a continuation.
 */
export function completionContinuation(prompt: string, naturalTokens: number): AnswerStart {
  let best: AnswerStart = { seed: countTokens(prompt), start: 0 };
  const from = Math.max(1, prompt.length - naturalTokens * CARRIED_CHARS_PER_TOKEN);
  for (let j = from; j < prompt.length; j++) {
    const c = prompt.charCodeAt(j);
    if (c < 65 || c > 90) continue; // an answer starts with a capitalised word
    const seed = countTokens(prompt.slice(0, j));
    const m = matchAnswer(prompt, j, seed, naturalTokens);
    if (m.end === prompt.length && m.tokens > best.start) best = { seed, start: m.tokens };
  }
  return best;
}

/** What one request generates. */
export interface AnswerPlan extends AnswerStart {
  /** Engine steps (tokens) to generate, at least 1. */
  completionTokens: number;
  finishReason: "stop" | "length";
  /**
   * The carried text already holds the whole natural answer: the one step generates the end of
   * sequence, which has no text (`finish_reason` "stop").
   */
  endOfSequence: boolean;
}

/**
 * Tokens `start..` of the answer: `min(maxTokens ?? rest, rest)` of them, `rest` being what the
 * natural answer has left; "length" when `maxTokens` cut it, "stop" when the answer ended.
 */
export function planAnswer(at: AnswerStart, maxTokens: number | undefined, naturalTokens: number): AnswerPlan {
  const rest = naturalTokens - at.start;
  if (rest <= 0) return { ...at, completionTokens: 1, finishReason: "stop", endOfSequence: true };
  return {
    ...at,
    completionTokens: Math.min(maxTokens ?? rest, rest),
    finishReason: maxTokens !== undefined && maxTokens <= rest ? "length" : "stop",
    endOfSequence: false,
  };
}

/** The text of the plan's `i`-th generated token. */
export function planToken(plan: AnswerPlan, i: number): string {
  return plan.endOfSequence ? "" : fillerToken(plan.seed, plan.start + i);
}
