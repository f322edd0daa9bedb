/**
 * POST /v1/responses: OpenAI's Responses API as vLLM's server answers it
 * (vllm/entrypoints/openai/responses/: serving.py, utils.py), with its response store enabled.
 *
 * The request becomes chat messages, rendered by the chat template as chat's are (prompt.ts), so
 * its prefix is the chat conversation's: `instructions` as a system message; then, with
 * `previous_response_id`, the stored conversation of that response (its messages without their
 * system message, as instructions do not carry over, then its output as the assistant's); then
 * `input`: a string (a user message) or items — messages (`input_text` / `output_text` parts are
 * text), `function_call` (the assistant's tool call, merged into an assistant message just before
 * it), `function_call_output` (a tool message); reasoning items are left out. Function tools
 * (`{"type":"function","name","parameters"}`) are rendered in chat's shape; other tools are not.
 * `text.format` asks for JSON as chat's `response_format` does (structured-output.ts), and is
 * echoed in the response's `text`.
 *
 * A response is stored (`store`, default true) in the node's process memory (response-store.ts)
 * when it completes; a `previous_response_id` the node does not hold is a 404 (`response_not_found`).
 *
 * Streamed as vLLM does: `response.created` and `response.in_progress` at once (before the prefill),
 * then at the first token `response.output_item.added` (and `response.content_part.added` for
 * text), a delta per token (`response.output_text.delta`, or `response.function_call_arguments.delta`
 * after a call's first token), the `.done` events, `response.completed` with the whole response;
 * `event:` lines, a `sequence_number` on each, no `[DONE]`.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import type { ToolCall } from "./openai.ts";
import { RequestError, blockHashes, contentText, countTokens, renderChat } from "./prompt.ts";
import { planAnswer } from "./continuation.ts";
import { sendError } from "./http-io.ts";
import { requestTag } from "./first-bytes.ts";
import { writeNamedEvent } from "./sse.ts";
import { checkContext, optionalPositiveInt, run, takeRequest, type Totals, type Writer } from "./generate.ts";
import { chooseTool, openaiToolChoice, textOutput, toolCallOutput, type FunctionTool, type Output } from "./tools.ts";
import type { ChatMessage } from "./response-store.ts";
import type { NodeRuntime } from "./node-runtime.ts";
import { jsonOutput, responsesTextFormat, structuredText } from "./structured-output.ts";

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);
const hex = (bytes: number) => randomBytes(bytes).toString("hex");

const MESSAGE_ROLES = new Set(["user", "assistant", "system", "developer"]);

/** A message item's content as chat content: `input_text` / `output_text` parts become text parts. */
function chatContent(content: unknown, param: string): unknown {
  if (content === undefined || content === null || typeof content === "string") return content ?? "";
  if (!Array.isArray(content)) throw new RequestError("content must be a string or an array of parts", param);
  return content.map((part: unknown) => {
    if (isObject(part) && (part.type === "input_text" || part.type === "output_text") && typeof part.text === "string") {
      return { type: "text", text: part.text };
    }
    return part;
  });
}

/** The `input` items as chat messages (utils.py, construct_chat_messages_with_tool_call). */
export function inputMessages(input: unknown): ChatMessage[] {
  if (typeof input === "string") return [{ role: "user", content: input }];
  if (!Array.isArray(input)) throw new RequestError("input must be a string or an array of items", "input");
  const out: ChatMessage[] = [];
  input.forEach((item: unknown, i: number) => {
    const param = `input[${i}]`;
    if (!isObject(item)) throw new RequestError("each input item must be an object", param);
    const type = item.type ?? "message";
    if (type === "message") {
      if (typeof item.role !== "string" || !MESSAGE_ROLES.has(item.role)) {
        throw new RequestError("a message's role must be user, assistant, system or developer", `${param}.role`);
      }
      out.push({ role: item.role, content: chatContent(item.content, `${param}.content`) });
    } else if (type === "function_call") {
      if (typeof item.name !== "string" || typeof item.call_id !== "string" || typeof item.arguments !== "string") {
        throw new RequestError("a function_call item needs call_id, name and arguments (strings)", param);
      }
      const call = { id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } };
      const prev = out[out.length - 1];
      if (prev?.role === "assistant") (prev.tool_calls ??= []).push(call);
      else out.push({ role: "assistant", content: null, tool_calls: [call] });
    } else if (type === "function_call_output") {
      if (typeof item.call_id !== "string") throw new RequestError("a function_call_output item needs a call_id", param);
      out.push({ role: "tool", content: chatContent(item.output, `${param}.output`), tool_call_id: item.call_id });
    } else if (type !== "reasoning") {
      throw new RequestError(`input items of type ${JSON.stringify(type)} are not simulated`, `${param}.type`);
    }
  });
  return out;
}

/** The request's function tools: for the tool decision, and in chat's shape for the template. */
function functionTools(tools: unknown): { functions: FunctionTool[]; rendered: unknown[] | undefined } {
  if (tools === undefined || tools === null) return { functions: [], rendered: undefined };
  if (!Array.isArray(tools)) throw new RequestError("tools must be an array", "tools");
  const functions: FunctionTool[] = [];
  const rendered: unknown[] = [];
  for (const t of tools) {
    if (!isObject(t) || t.type !== "function" || typeof t.name !== "string") continue;
    functions.push({ name: t.name, parameters: t.parameters });
    rendered.push({ type: "function", function: { name: t.name, description: t.description, parameters: t.parameters } });
  }
  return { functions, rendered: rendered.length > 0 ? rendered : undefined };
}

/** The assistant's turn a response's output becomes in a follow-up's conversation. */
function outputMessage(output: Output): ChatMessage {
  const call = output.call;
  if (!call) return { role: "assistant", content: output.text() };
  return {
    role: "assistant",
    content: null,
    tool_calls: [{ id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } }],
  };
}

function optionalBoolean(body: Json, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw new RequestError(`${key} must be a boolean`, key);
  return v;
}

export async function responses(node: NodeRuntime, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const taken = await takeRequest(node, req, res, (r, message) => sendError(r, 500, message, "InternalServerError"));
  if (!taken) return;
  const { body, model, faults } = taken;
  const stream = optionalBoolean(body, "stream") === true;
  const store = optionalBoolean(body, "store") ?? true;
  const instructions = body.instructions ?? null;
  if (instructions !== null && typeof instructions !== "string") throw new RequestError("instructions must be a string", "instructions");
  const previousId = body.previous_response_id ?? null;
  if (previousId !== null && typeof previousId !== "string")
    throw new RequestError("previous_response_id must be a string", "previous_response_id");
  const previous = previousId === null ? undefined : node.responses.get(previousId);
  if (previousId !== null && !previous) {
    throw new RequestError(`Response with id '${previousId}' not found.`, "response_id", 404, {
      type: "invalid_request_error",
      code: "response_not_found",
    });
  }
  const input = inputMessages(body.input);
  const messages: ChatMessage[] = [];
  if (instructions) messages.push({ role: "system", content: instructions });
  if (previous) messages.push(...previous.messages.filter((m) => m.role !== "system"), ...previous.output);
  messages.push(...input);
  if (messages.length === 0) throw new RequestError("input must not be empty", "input");

  const tools = functionTools(body.tools);
  const choice = openaiToolChoice(body.tool_choice, (o) => o.name);
  const maxTokens = optionalPositiveInt(body, "max_output_tokens");
  const prompt = renderChat({ messages, tools: tools.rendered });
  const promptTokens = countTokens(prompt);
  const last = input[input.length - 1];
  const lastUserText = last?.role === "user" ? contentText(last.content, "input") : undefined;
  const tool = chooseTool(tools.functions, choice, lastUserText);
  const format = responsesTextFormat(body.text);
  const output = tool
    ? toolCallOutput(tool, promptTokens, "call_" + hex(12), maxTokens)
    : format.type !== "text"
      ? jsonOutput(structuredText(format, promptTokens, node.defaultMaxTokens), maxTokens)
      : textOutput(planAnswer({ seed: promptTokens, start: 0 }, maxTokens, node.defaultMaxTokens));
  checkContext(node, promptTokens, output.completionTokens, "input");
  const cacheSalt = typeof body.cache_salt === "string" ? body.cache_salt : undefined;
  const sequence = { hashes: blockHashes(prompt, model, cacheSalt), promptTokens, output };

  const id = "resp_" + hex(16);
  const itemId = (output.call ? "fc_" : "msg_") + hex(16);
  const createdAt = Math.floor(Date.now() / 1000);
  const incomplete = output.finishReason === "length";
  /** The response object, as vLLM's ResponsesResponse.from_request fills it. */
  const responseObject = (status: string, items: unknown[], usage: unknown) => ({
    id,
    object: "response",
    created_at: createdAt,
    status,
    background: false,
    error: null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions,
    max_output_tokens: maxTokens ?? node.maxModelLen - promptTokens,
    max_tool_calls: null,
    metadata: isObject(body.metadata) ? body.metadata : {},
    model,
    output: items,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: previousId,
    reasoning: null,
    service_tier: "auto",
    store,
    temperature: body.temperature ?? 1.0,
    text: isObject(body.text) && body.text.format ? body.text : { format: { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: Array.isArray(body.tools) ? body.tools : [],
    top_p: body.top_p ?? 1.0,
    truncation: "disabled",
    usage,
    user: body.user ?? null,
  });
  const textPart = (text: string) => ({ type: "output_text", text, annotations: [], logprobs: [] });
  const item = (done: boolean) => {
    const status = done ? (incomplete ? "incomplete" : "completed") : "in_progress";
    const call: ToolCall | undefined = output.call;
    if (call)
      return { id: itemId, type: "function_call", status, arguments: done ? call.arguments : "", call_id: call.id, name: call.name };
    return { id: itemId, type: "message", status, role: "assistant", content: done ? [textPart(output.text())] : [] };
  };

  const writer = (_states: unknown, totals: () => Totals): Writer => {
    let final: unknown;
    /** The completed response, stored (once) before the client can have it. */
    const complete = () => {
      if (final) return final;
      const t = totals();
      const usage = {
        input_tokens: t.promptTokens,
        input_tokens_details: { cached_tokens: t.cachedTokens },
        output_tokens: t.completionTokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: t.promptTokens + t.completionTokens,
      };
      final = responseObject(incomplete ? "incomplete" : "completed", [item(true)], usage);
      if (store) node.responses.set(id, { messages, output: [outputMessage(output)] });
      return final;
    };
    let sequenceNumber = 0;
    const data = (type: string, fields: Json) => ({ type, sequence_number: sequenceNumber, ...fields });
    const send = (type: string, fields: Json) => {
      writeNamedEvent(res, type, data(type, fields));
      sequenceNumber++;
    };
    const at = { item_id: itemId, output_index: 0 };
    /** The delta event of token `i` (a call's first token has none: it is the item's name). */
    const delta = (i: number): [string, Json] | undefined => {
      if (output.call) return i === 0 ? undefined : ["response.function_call_arguments.delta", { ...at, delta: output.piece(i) }];
      return ["response.output_text.delta", { ...at, content_index: 0, delta: output.piece(i), logprobs: [] }];
    };
    return {
      open() {
        const snapshot = responseObject("in_progress", [], null);
        send("response.created", { response: snapshot });
        send("response.in_progress", { response: snapshot });
        return true;
      },
      token(_s, i) {
        if (i === 0) {
          send("response.output_item.added", { output_index: 0, item: item(false) });
          if (!output.call) send("response.content_part.added", { ...at, content_index: 0, part: textPart("") });
        }
        const d = delta(i);
        if (d) send(...d);
      },
      end() {
        const response = complete();
        if (output.call) {
          send("response.function_call_arguments.done", { ...at, name: output.call.name, arguments: output.call.arguments });
        } else {
          const text = output.text();
          send("response.output_text.done", { ...at, content_index: 0, text, logprobs: [] });
          send("response.content_part.done", { ...at, content_index: 0, part: textPart(text) });
        }
        send("response.output_item.done", { output_index: 0, item: item(true) });
        send("response.completed", { response });
        res.end();
      },
      whole: complete,
      errorEvent() {
        send("error", { code: "server_error", message: "Internal server error", param: null });
        res.end();
      },
      eventOf(_s, i) {
        const [type, fields] = delta(i) ?? ["response.output_item.added", { output_index: 0, item: item(false) }];
        return { event: type, data: JSON.stringify(data(type, fields)) };
      },
    };
  };
  run(node, res, {
    stream,
    requestId: id,
    sequences: [sequence],
    writer,
    tag: requestTag(prompt),
    continued: false,
    faults,
  });
}
