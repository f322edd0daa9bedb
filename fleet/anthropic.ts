/**
 * POST /v1/messages: Anthropic's Messages API, as vLLM's server answers it
 * (vllm/entrypoints/anthropic/serving.py: the request becomes a chat completion request), in
 * Anthropic's shapes.
 *
 * The request becomes chat messages rendered by the chat template, as chat's are (prompt.ts):
 * `system` (a string, or text blocks joined) as a system message; each message's text (and image)
 * blocks as its content, its `tool_use` blocks as its tool calls (arguments: the input as JSON);
 * a user message's `tool_result` blocks as tool messages before it; thinking blocks left out. Tools
 * `{name, description, input_schema}` are rendered in chat's shape.
 *
 * `max_tokens` is required. Usage: `input_tokens` the prompt tokens not read from the cache,
 * `cache_read_input_tokens` those read from it (the node's true cached tokens),
 * `cache_creation_input_tokens` 0 (vLLM caches every block it computes; nothing is billed apart).
 * Streamed with `event:` lines: `message_start` at the end of the prefill (with the usage known
 * then), `content_block_start` (a text block, or a `tool_use` block with its id and name),
 * `content_block_delta`s (`text_delta`, or `input_json_delta` pieces of the call's input),
 * `content_block_stop`, `message_delta` (stop reason, and the whole usage), `message_stop`.
 * Errors in Anthropic's shape: `{"type":"error","error":{"type","message"}}`.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import { RequestError, blockHashes, countTokens, renderChat } from "./prompt.ts";
import { planAnswer } from "./continuation.ts";
import { sendJson } from "./http-io.ts";
import { requestTag } from "./first-bytes.ts";
import { writeNamedEvent } from "./sse.ts";
import { checkContext, run, takeRequest, type Totals, type Writer } from "./generate.ts";
import { chooseTool, textOutput, toolCallOutput, type FunctionTool, type Output, type ToolChoice } from "./tools.ts";
import type { ChatMessage } from "./response-store.ts";
import type { NodeRuntime } from "./node-runtime.ts";

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);
const hex = (bytes: number) => randomBytes(bytes).toString("hex");

/** Anthropic's error type for a status. */
function errorType(status: number): string {
  if (status === 400) return "invalid_request_error";
  if (status === 401) return "authentication_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit_error";
  return "api_error";
}

/** Anthropic's error answer. */
export function sendAnthropicError(res: ServerResponse, status: number, message: string): void {
  sendJson(res, status, { type: "error", error: { type: errorType(status), message } });
}

/** A tool result's content as text: a string, or its text blocks joined by newlines (serving.py). */
function toolResultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((b): b is Json => isObject(b) && b.type === "text" && typeof b.text === "string")
    .map((b) => b.text as string)
    .join("\n");
}

/** The system prompt's text: a string, or its text blocks joined. */
function systemText(system: unknown): string {
  if (system === undefined || system === null) return "";
  if (typeof system === "string") return system;
  if (!Array.isArray(system)) throw new RequestError("system: must be a string or an array of text blocks", "system");
  return system
    .filter((b): b is Json => isObject(b) && b.type === "text" && typeof b.text === "string")
    .map((b) => b.text as string)
    .join("");
}

/** The messages as chat messages, and the text of the final one if it is the user's own (no tool results). */
export function chatMessages(body: Json): { messages: ChatMessage[]; lastUserText: string | undefined } {
  const out: ChatMessage[] = [];
  const system = systemText(body.system);
  if (system !== "") out.push({ role: "system", content: system });
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) throw new RequestError("messages: at least one message is required", "messages");
  let lastUserText: string | undefined;
  messages.forEach((m: unknown, i: number) => {
    const param = `messages.${i}`;
    if (!isObject(m) || (m.role !== "user" && m.role !== "assistant")) {
      throw new RequestError(`${param}.role: Input should be 'user' or 'assistant'`, `${param}.role`);
    }
    const role = m.role;
    lastUserText = undefined;
    if (typeof m.content === "string") {
      out.push({ role, content: m.content });
      if (role === "user") lastUserText = m.content;
      return;
    }
    if (!Array.isArray(m.content)) throw new RequestError(`${param}.content: must be a string or an array of blocks`, `${param}.content`);
    const parts: unknown[] = [];
    const toolCalls: unknown[] = [];
    let toolResults = 0;
    m.content.forEach((block: unknown, j: number) => {
      if (!isObject(block) || typeof block.type !== "string") {
        throw new RequestError(`${param}.content.${j}: a block needs a type`, `${param}.content.${j}`);
      }
      if (block.type === "text") parts.push({ type: "text", text: typeof block.text === "string" ? block.text : "" });
      else if (block.type === "tool_use") {
        toolCalls.push({ id: block.id, type: "function", function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
      } else if (block.type === "tool_result") {
        toolResults++;
        out.push({
          role: "tool",
          content: toolResultText(block.content),
          tool_call_id: typeof block.tool_use_id === "string" ? block.tool_use_id : "",
        });
      } else if (block.type !== "thinking" && block.type !== "redacted_thinking") parts.push(block); // images, documents: their reference stands in
    });
    if (parts.length > 0 || toolCalls.length > 0) {
      const msg: ChatMessage = { role, content: parts.length > 0 ? parts : null };
      if (toolCalls.length > 0) msg.tool_calls = toolCalls;
      out.push(msg);
    }
    if (role === "user" && toolResults === 0) {
      lastUserText = parts.map((p) => (isObject(p) && p.type === "text" ? String(p.text) : "")).join("");
    }
  });
  return { messages: out, lastUserText };
}

/** The request's custom tools: for the tool decision, and in chat's shape for the template. */
function functionTools(tools: unknown): { functions: FunctionTool[]; rendered: unknown[] | undefined } {
  if (tools === undefined || tools === null) return { functions: [], rendered: undefined };
  if (!Array.isArray(tools)) throw new RequestError("tools: must be an array", "tools");
  const functions: FunctionTool[] = [];
  const rendered: unknown[] = [];
  for (const t of tools) {
    if (!isObject(t) || typeof t.name !== "string" || (t.type !== undefined && t.type !== "custom")) continue;
    functions.push({ name: t.name, parameters: t.input_schema });
    rendered.push({ type: "function", function: { name: t.name, description: t.description, parameters: t.input_schema } });
  }
  return { functions, rendered: rendered.length > 0 ? rendered : undefined };
}

/** Anthropic's `tool_choice`: `{"type": "auto" | "any" | "none"}` or `{"type":"tool","name"}`. */
function toolChoice(v: unknown): ToolChoice {
  if (v === undefined || v === null) return { mode: "auto" };
  if (isObject(v)) {
    if (v.type === "auto") return { mode: "auto" };
    if (v.type === "any") return { mode: "required" };
    if (v.type === "none") return { mode: "none" };
    if (v.type === "tool" && typeof v.name === "string") return { mode: "named", name: v.name };
  }
  throw new RequestError('tool_choice: must be {"type": "auto" | "any" | "none"} or {"type": "tool", "name": ...}', "tool_choice");
}

const STOP_REASONS: Record<string, string> = { stop: "end_turn", length: "max_tokens", tool_calls: "tool_use" };

/** The answer's content block, whole. */
function contentBlock(output: Output): Json {
  const call = output.call;
  if (!call) return { type: "text", text: output.text() };
  let input: unknown = {};
  try {
    input = JSON.parse(call.arguments);
  } catch {
    input = {}; // a call cut short by max_tokens: its input never became JSON
  }
  return { type: "tool_use", id: call.id, name: call.name, input };
}

async function answer(node: NodeRuntime, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const taken = await takeRequest(node, req, res, (r, message) => sendAnthropicError(r, 500, message));
  if (!taken) return;
  const { body, model, faults } = taken;
  const mt = body.max_tokens;
  if (mt === undefined || mt === null) throw new RequestError("max_tokens: Field required", "max_tokens");
  if (typeof mt !== "number" || !Number.isInteger(mt) || mt < 1)
    throw new RequestError("max_tokens: must be a positive integer", "max_tokens");
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== "boolean") {
    throw new RequestError("stream: must be a boolean", "stream");
  }
  const stream = body.stream === true;
  const { messages, lastUserText } = chatMessages(body);
  const tools = functionTools(body.tools);
  const tool = chooseTool(tools.functions, toolChoice(body.tool_choice), lastUserText);
  const prompt = renderChat({ messages, tools: tools.rendered });
  const promptTokens = countTokens(prompt);
  const output = tool
    ? toolCallOutput(tool, promptTokens, "toolu_" + hex(12), mt)
    : textOutput(planAnswer({ seed: promptTokens, start: 0 }, mt, node.defaultMaxTokens));
  checkContext(node, promptTokens, output.completionTokens, "messages");
  const cacheSalt = typeof body.cache_salt === "string" ? body.cache_salt : undefined;
  const sequence = { hashes: blockHashes(prompt, model, cacheSalt), promptTokens, output };
  const id = "msg_" + hex(12);
  const stopReason = STOP_REASONS[output.finishReason]!;

  const writer = (_states: unknown, totals: () => Totals): Writer => {
    /** Anthropic's usage: `input_tokens` are the uncached ones. */
    const usage = (outputTokens: number) => {
      const t = totals();
      return {
        input_tokens: t.promptTokens - t.cachedTokens,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: t.cachedTokens,
        output_tokens: outputTokens,
      };
    };
    const send = (type: string, fields: Json) => writeNamedEvent(res, type, { type, ...fields });
    /** The delta of token `i` (a call's first token has none: it is the block's name). */
    const delta = (i: number): Json | undefined => {
      if (!output.call) return { type: "text_delta", text: output.piece(i) };
      return i === 0 ? undefined : { type: "input_json_delta", partial_json: output.piece(i) };
    };
    return {
      token(_s, i) {
        if (i === 0) {
          const message = {
            id,
            type: "message",
            role: "assistant",
            model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: usage(0),
          };
          send("message_start", { message });
          const call = output.call;
          send("content_block_start", {
            index: 0,
            content_block: call ? { type: "tool_use", id: call.id, name: call.name, input: {} } : { type: "text", text: "" },
          });
        }
        const d = delta(i);
        if (d) send("content_block_delta", { index: 0, delta: d });
      },
      end() {
        send("content_block_stop", { index: 0 });
        send("message_delta", { delta: { stop_reason: stopReason, stop_sequence: null }, usage: usage(totals().completionTokens) });
        send("message_stop", {});
        res.end();
      },
      whole() {
        return {
          id,
          type: "message",
          role: "assistant",
          model,
          content: [contentBlock(output)],
          stop_reason: stopReason,
          stop_sequence: null,
          usage: usage(totals().completionTokens),
        };
      },
      errorEvent() {
        send("error", { error: { type: "api_error", message: "Internal server error" } });
        res.end();
      },
      eventOf(_s, i) {
        const d = delta(i) ?? { type: "input_json_delta", partial_json: "" };
        return { event: "content_block_delta", data: JSON.stringify({ type: "content_block_delta", index: 0, delta: d }) };
      },
    };
  };
  run(node, res, { stream, requestId: id, sequences: [sequence], writer, tag: requestTag(prompt), continued: false, faults });
}

/** The endpoint: every error it answers before its first byte is in Anthropic's shape. */
export async function messages(node: NodeRuntime, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    await answer(node, req, res);
  } catch (err) {
    if (res.headersSent) return void res.destroy();
    if (err instanceof RequestError) sendAnthropicError(res, err.status, err.message);
    else sendAnthropicError(res, 500, String((err as Error)?.message ?? err));
  }
}
