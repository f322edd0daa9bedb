/**
 * The Responses API (`POST /v1/responses`) and Anthropic's Messages API (`POST /v1/messages`) as
 * chat prompts, so that all three APIs canonicalise the same way (canonical.ts).
 *
 * Engines serve both by converting them to chat messages and rendering those through the model's
 * chat template (vLLM's and SGLang's Responses and Anthropic endpoints do exactly that), so the
 * prefix structure that matters is the chat one: tool definitions, then the system text, then
 * each turn in order, each item's rendering depending on that item alone. A conversation that
 * grows by appending items keeps its earlier canonical text byte for byte, whichever API carries it.
 *
 * - Responses: `instructions` is the system message; `input` is a string (one user message) or a
 *   list of items: messages (`input_text` / `output_text` parts are text), `function_call` (an
 *   assistant tool call), `function_call_output` (a tool result); any other item is kept whole.
 *   Function tools `{type, name, description, parameters}` take the chat shape
 *   `{type, function: {name, description, parameters}}`.
 * - Messages: `system` (text or text blocks) is the system message; a message's `tool_use` blocks
 *   are its tool calls, its `tool_result` blocks follow it as tool messages; tools
 *   `{name, description, input_schema}` take the chat shape.
 */
import { stableJson, type CanonicalMessage, type CanonicalPrompt } from "./canonical.ts";

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);

/** A content part as chat renders it: text parts of every API are `{type: "text", text}`. */
function chatPart(part: unknown): unknown {
  if (!isObject(part)) return part;
  if ((part.type === "input_text" || part.type === "output_text" || part.type === "text") && typeof part.text === "string") {
    return { type: "text", text: part.text };
  }
  return part;
}

function chatContent(content: unknown): unknown {
  return Array.isArray(content) ? content.map(chatPart) : content;
}

/** A Responses or Messages function tool in chat's shape; other tools (web search, ...) as they are. */
function chatTool(tool: unknown): unknown {
  if (!isObject(tool)) return tool;
  if (tool.type === "function" && typeof tool.name === "string") {
    return { type: "function", function: { name: tool.name, description: tool.description, parameters: tool.parameters } };
  }
  if (tool.type === undefined && typeof tool.name === "string" && "input_schema" in tool) {
    return { type: "function", function: { name: tool.name, description: tool.description, parameters: tool.input_schema } };
  }
  return tool;
}

function chatTools(tools: unknown): unknown {
  return Array.isArray(tools) && tools.length > 0 ? tools.map(chatTool) : undefined;
}

/** One Responses input item as a chat message. */
function responsesItem(item: unknown): CanonicalMessage {
  if (!isObject(item)) return { role: "user", content: stableJson(item) };
  if (item.type === "function_call") {
    return {
      role: "assistant",
      tool_calls: [{ id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } }],
    };
  }
  if (item.type === "function_call_output") {
    return { role: "tool", tool_call_id: typeof item.call_id === "string" ? item.call_id : undefined, content: chatContent(item.output) };
  }
  if ((item.type === undefined || item.type === "message") && typeof item.role === "string") {
    return { role: item.role, content: chatContent(item.content) };
  }
  // Reasoning and other items: kept whole, in order.
  return { role: itemRole(item.type), content: stableJson(item) };
}

/**
 * The role an item kept whole is filed under: its `type` when that is text (or a number or boolean,
 * written as before), else `item`. Never `String()` of an object or array: the client chooses its
 * keys, and `{"toString": 1}` makes that conversion throw (a 500 before the model was checked).
 */
function itemRole(type: unknown): string {
  if (typeof type === "string") return type;
  if (typeof type === "number" || typeof type === "boolean") return String(type);
  return "item";
}

/** A Responses API request body (already validated as an object) as a chat prompt. */
export function responsesPrompt(body: Json): CanonicalPrompt {
  const messages: CanonicalMessage[] = [];
  if (typeof body.instructions === "string" && body.instructions !== "") messages.push({ role: "system", content: body.instructions });
  if (typeof body.input === "string") messages.push({ role: "user", content: body.input });
  else if (Array.isArray(body.input)) for (const item of body.input) messages.push(responsesItem(item));
  return { kind: "chat", messages, tools: chatTools(body.tools) };
}

/** One Messages API message as chat messages: its text and tool calls, then one tool message per tool result. */
function anthropicMessage(m: Json): CanonicalMessage[] {
  const role = typeof m.role === "string" ? m.role : "user";
  if (!Array.isArray(m.content)) return [{ role, content: m.content }];
  const parts: unknown[] = [];
  const toolCalls: unknown[] = [];
  const results: CanonicalMessage[] = [];
  for (const block of m.content) {
    if (isObject(block) && block.type === "tool_use") {
      toolCalls.push({ id: block.id, type: "function", function: { name: block.name, arguments: stableJson(block.input ?? {}) } });
    } else if (isObject(block) && block.type === "tool_result") {
      results.push({
        role: "tool",
        tool_call_id: typeof block.tool_use_id === "string" ? block.tool_use_id : undefined,
        content: chatContent(block.content),
      });
    } else parts.push(chatPart(block));
  }
  const out: CanonicalMessage[] = [];
  if (parts.length > 0 || toolCalls.length > 0) {
    out.push({ role, content: parts.length > 0 ? parts : null, tool_calls: toolCalls.length > 0 ? toolCalls : undefined });
  }
  return [...out, ...results];
}

/** An Anthropic Messages API request body (already validated as an object) as a chat prompt. */
export function anthropicPrompt(body: Json): CanonicalPrompt {
  const messages: CanonicalMessage[] = [];
  if (typeof body.system === "string" && body.system !== "") messages.push({ role: "system", content: body.system });
  else if (Array.isArray(body.system) && body.system.length > 0) messages.push({ role: "system", content: chatContent(body.system) });
  if (Array.isArray(body.messages)) for (const m of body.messages) if (isObject(m)) messages.push(...anthropicMessage(m));
  return { kind: "chat", messages, tools: chatTools(body.tools) };
}
