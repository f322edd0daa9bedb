/**
 * Turns an OpenAI-style request into the prompt text the node "tokenizes", and that text into
 * chained block hashes.
 *
 * This is deliberately independent of the router's canonicalisation (src/core): the node is the
 * ground truth, the router only predicts it. Rendering follows a Llama-3-like chat template, as
 * vLLM would: tools first, then every message in order, then the generation prompt. So a
 * conversation that grows by appending turns keeps its earlier text, and its cached blocks.
 */
import { createHash } from "node:crypto";

/**
 * A client error that becomes a 400 (or other 4xx) in OpenAI's error shape (Anthropic's on
 * /v1/messages). `type` and `code` replace the defaults (`BadRequestError` or `NotFoundError`,
 * and the status) where the API names them otherwise.
 */
export class RequestError extends Error {
  readonly status: number;
  readonly param: string | null;
  readonly type: string | undefined;
  readonly code: string | undefined;
  constructor(message: string, param: string | null = null, status = 400, named: { type?: string; code?: string } = {}) {
    super(message);
    this.status = status;
    this.param = param;
    this.type = named.type;
    this.code = named.code;
  }
}

/** Text of a message's content: a string, or the text parts of a content array. */
export function contentText(content: unknown, param: string): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw new RequestError("content must be a string or an array of parts", param);
  let out = "";
  for (const part of content) {
    if (!part || typeof part !== "object") throw new RequestError("content parts must be objects", param);
    const p = part as Record<string, unknown>;
    if (p.type === "text" && typeof p.text === "string") out += p.text;
    // Images and other media change the prompt; their reference stands in for their tokens.
    else out += "<|media|>" + JSON.stringify(p) + "<|/media|>";
  }
  return out;
}

/** The assistant header that ends a prompt with `add_generation_prompt` (the default). */
const GENERATION_PROMPT = "<|start_header_id|>assistant<|end_header_id|>\n\n";

/**
 * A chat request's tools and messages through the template. `openLast`: the final message is left
 * open (no `<|eot_id|>`, no generation prompt), for `continue_final_message`; `lastAt` is where
 * that message's header ends, i.e. the length of what the prompt was without it.
 */
function render(body: Record<string, unknown>, openLast: boolean): { text: string; lastAt: number } {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new RequestError("messages must be a non-empty array", "messages");
  }
  let text = "<|begin_of_text|>";
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw new RequestError("tools must be an array", "tools");
    text += "<|start_header_id|>tools<|end_header_id|>\n\n" + JSON.stringify(body.tools) + "<|eot_id|>";
  }
  let lastAt = 0;
  messages.forEach((m: unknown, i: number) => {
    if (!m || typeof m !== "object") throw new RequestError("each message must be an object", `messages[${i}]`);
    const msg = m as Record<string, unknown>;
    if (typeof msg.role !== "string") throw new RequestError("message role must be a string", `messages[${i}].role`);
    text += `<|start_header_id|>${msg.role}<|end_header_id|>\n\n`;
    lastAt = text.length;
    text += contentText(msg.content, `messages[${i}].content`);
    if (msg.tool_calls !== undefined && msg.tool_calls !== null) text += JSON.stringify(msg.tool_calls);
    if (typeof msg.tool_call_id === "string") text += `<|tool_call_id|>${msg.tool_call_id}`;
    if (!(openLast && i === messages.length - 1)) text += "<|eot_id|>";
  });
  // add_generation_prompt: the assistant header is part of the prompt.
  return openLast ? { text, lastAt } : { text: text + GENERATION_PROMPT, lastAt };
}

/** Renders a chat completion request's tools and messages through a simple chat template. */
export function renderChat(body: Record<string, unknown>): string {
  return render(body, false).text;
}

/** A chat request's prompt, and what it carries of an answer when it continues its final message. */
export interface ChatPrompt {
  prompt: string;
  /**
   * `continue_final_message`: the prompt the request would have had without its final assistant
   * message (the request that message continues), and that message's text.
   */
  continued?: { before: string; content: string };
}

/**
 * A chat request's prompt, with vLLM's `continue_final_message`: the final message (which must be
 * the assistant's) is left open, so the model continues it instead of starting a new turn. With
 * the Llama-3 template the open message is exactly the generation prompt followed by its text, so
 * the prompt extends the one the request had without it, block for block. `add_generation_prompt`
 * is otherwise not modelled (the generation prompt is always added), as before.
 */
export function renderChatPrompt(body: Record<string, unknown>): ChatPrompt {
  const cfm = body.continue_final_message;
  if (cfm !== undefined && cfm !== null && typeof cfm !== "boolean") {
    throw new RequestError("continue_final_message must be a boolean", "continue_final_message");
  }
  if (cfm !== true) return { prompt: renderChat(body) };
  // vLLM's ChatCompletionRequest.check_generation_prompt: only an explicit true conflicts (its default is true).
  if (body.add_generation_prompt === true) {
    throw new RequestError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
  }
  const { text, lastAt } = render(body, true);
  const messages = body.messages as Record<string, unknown>[];
  const last = messages[messages.length - 1]!;
  if (last.role !== "assistant") {
    throw new RequestError(
      "continue_final_message is set but the final message is not from the assistant: there is no message to continue.",
      `messages[${messages.length - 1}].role`,
    );
  }
  return {
    prompt: text,
    continued: { before: text.slice(0, lastAt), content: contentText(last.content, `messages[${messages.length - 1}].content`) },
  };
}

/**
 * Token ids the simulated tokenizer knows: 2^18, more than Llama 3's (128,256) or Qwen 2.5's
 * (152,064) vocabulary. vLLM refuses a larger id (`Token id ... is out of vocabulary`).
 */
export const VOCAB_SIZE = 262_144;

/**
 * The text a token-id prompt stands for: each id as exactly one token of the prompt (4 characters,
 * its base-36 digits), so a prompt of `n` ids counts `n` tokens, and prompts that share their first
 * ids share their first blocks. Lowercase letters and digits only: never taken for a continuation
 * (an answer starts with a capital, continuation.ts).
 */
export function tokenIdsText(ids: readonly number[]): string {
  let text = "";
  for (const id of ids) text += id.toString(36).padStart(4, "0");
  return text;
}

/** One prompt of a completions request. */
export interface CompletionPrompt {
  text: string;
  /** Given as token ids (rendered by tokenIdsText). */
  tokenIds: boolean;
}

function tokenIdPrompt(v: unknown[], param: string): CompletionPrompt {
  if (v.length === 0) throw new RequestError("a token prompt must hold at least one token id", param);
  for (const id of v) {
    if (typeof id !== "number" || !Number.isInteger(id) || id < 0) throw new RequestError("token ids must be integers >= 0", param);
    if (id >= VOCAB_SIZE) throw new RequestError(`Token id ${id} is out of vocabulary`, param);
  }
  return { text: tokenIdsText(v as number[]), tokenIds: true };
}

/**
 * The prompts of a text completion request, as vLLM takes them: a string; an array of strings (one
 * prompt each, answered as one choice each, `index` = the prompt's place); an array of token ids
 * (one prompt); or an array of arrays of token ids (one prompt each).
 */
export function renderCompletions(body: Record<string, unknown>): CompletionPrompt[] {
  const prompt = body.prompt;
  if (typeof prompt === "string") {
    if (prompt.length === 0) throw new RequestError("prompt must be a non-empty string", "prompt");
    return [{ text: prompt, tokenIds: false }];
  }
  if (!Array.isArray(prompt) || prompt.length === 0) {
    throw new RequestError("prompt must be a string, an array of strings, token ids or arrays of token ids", "prompt");
  }
  if (prompt.every((p) => typeof p === "string")) {
    return prompt.map((p: string, i) => {
      if (p.length === 0) throw new RequestError("prompt must not hold an empty string", `prompt[${i}]`);
      return { text: p, tokenIds: false };
    });
  }
  if (prompt.every((p) => typeof p === "number")) return [tokenIdPrompt(prompt, "prompt")];
  if (prompt.every((p) => Array.isArray(p))) return prompt.map((p: unknown[], i) => tokenIdPrompt(p, `prompt[${i}]`));
  throw new RequestError("prompt must be a string, an array of strings, token ids or arrays of token ids", "prompt");
}

/** Prompt tokens of a text, without a tokenizer: `charsPerToken` characters a token. */
export function countTokens(text: string, charsPerToken = 4): number {
  return Math.max(1, Math.ceil(text.length / charsPerToken));
}

/**
 * Chained hashes of the text's full blocks (`blockChars` characters = one KV block). Only full
 * blocks are cacheable, as in vLLM. The chain starts from the model (a LoRA adapter is a model
 * name and has its own KV) and the request's cache_salt, so those partition the cache.
 */
export function blockHashes(text: string, model: string, cacheSalt: string | undefined, blockChars = 64): string[] {
  let prev = createHash("sha256")
    .update("warmpath-fleet/v1\0" + model + "\0" + (cacheSalt ?? ""))
    .digest("hex");
  const out: string[] = [];
  const full = Math.floor(text.length / blockChars);
  for (let b = 0; b < full; b++) {
    prev = createHash("sha256")
      .update(prev)
      .update(text.slice(b * blockChars, (b + 1) * blockChars))
      .digest("hex")
      .slice(0, 32);
    out.push(prev);
  }
  return out;
}
