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

/** A client error that becomes a 400 (or other 4xx) in OpenAI's error shape. */
export class RequestError extends Error {
  readonly status: number;
  readonly param: string | null;
  constructor(message: string, param: string | null = null, status = 400) {
    super(message);
    this.status = status;
    this.param = param;
  }
}

/** Text of a message's content: a string, or the text parts of a content array. */
function contentText(content: unknown, param: string): string {
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

/** Renders a chat completion request's tools and messages through a simple chat template. */
export function renderChat(body: Record<string, unknown>): string {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new RequestError("messages must be a non-empty array", "messages");
  }
  let text = "<|begin_of_text|>";
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw new RequestError("tools must be an array", "tools");
    text += "<|start_header_id|>tools<|end_header_id|>\n\n" + JSON.stringify(body.tools) + "<|eot_id|>";
  }
  messages.forEach((m: unknown, i: number) => {
    if (!m || typeof m !== "object") throw new RequestError("each message must be an object", `messages[${i}]`);
    const msg = m as Record<string, unknown>;
    if (typeof msg.role !== "string") throw new RequestError("message role must be a string", `messages[${i}].role`);
    text += `<|start_header_id|>${msg.role}<|end_header_id|>\n\n`;
    text += contentText(msg.content, `messages[${i}].content`);
    if (msg.tool_calls !== undefined && msg.tool_calls !== null) text += JSON.stringify(msg.tool_calls);
    if (typeof msg.tool_call_id === "string") text += `<|tool_call_id|>${msg.tool_call_id}`;
    text += "<|eot_id|>";
  });
  // add_generation_prompt: the assistant header is part of the prompt.
  return text + "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

/** The prompt of a text completion request: a string, or a one-element array of a string. */
export function renderCompletion(body: Record<string, unknown>): string {
  let prompt = body.prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === "string") prompt = prompt[0];
  if (typeof prompt !== "string" || prompt.length === 0) {
    throw new RequestError("prompt must be a non-empty string (batched or token prompts are not simulated)", "prompt");
  }
  return prompt;
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
