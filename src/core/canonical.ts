/**
 * Prompt canonicalisation: turns an OpenAI-style request into one string whose prefixes line up
 * with the prefixes an inference server caches.
 *
 * An engine such as vLLM or SGLang renders tool definitions and then every message, in order,
 * through the model's chat template, and caches KV blocks of the resulting token sequence. We
 * cannot tokenise at the edge, but we can build a text with the same *prefix structure*: every
 * field that reaches the template is written in template order, each message's serialisation
 * depends only on that message, and so a conversation that grows by appending turns keeps the
 * canonical text of its earlier turns byte for byte. Fields that never reach the prompt
 * (`temperature`, `max_tokens`, `stream`, ...) are left out, so they do not split caches.
 *
 * What must *partition* caches, rather than be part of the prompt, goes into the namespace seed:
 * the model (a LoRA adapter is a model name in vLLM's API, and caches are per adapter), the tenant
 * namespace and the request's `cache_salt` (vLLM's per-request cache isolation).
 */

import { JsonBoundsError, MAX_JSON_DEPTH } from "./json-bounds.ts";

/** Separators that cannot be confused with ordinary prompt text. */
const FIELD = "\u001f";
const RECORD = "\u001e";

/** A chat message as far as canonicalisation cares; other fields are ignored. */
export interface CanonicalMessage {
  role: string;
  name?: string | null | undefined;
  content?: unknown;
  tool_calls?: unknown;
  tool_call_id?: string | null | undefined;
}

/** The routing-relevant view of a chat or completion request. */
export type CanonicalPrompt =
  { kind: "chat"; messages: readonly CanonicalMessage[]; tools?: unknown } | { kind: "completion"; prompt: unknown };

/** The partition a prompt's cache lives in. */
export interface CacheNamespace {
  /** Model name (or LoRA adapter name): different weights never share KV. */
  model: string;
  /** Tenant id, or a shared namespace the tenant is allowed to use. */
  namespace: string;
  /** The request's `cache_salt`, if any. */
  cacheSalt?: string | undefined;
}

/** Seed string for a namespace: hashed into the first block's chaining state. */
export function namespaceSeed(ns: CacheNamespace): string {
  return ["warmpath/v1", ns.model, ns.namespace, ns.cacheSalt ?? ""].join(FIELD);
}

/**
 * Stable JSON: object keys sorted, so `{"a":1,"b":2}` and `{"b":2,"a":1}` canonicalise alike.
 * Used for tool definitions and tool calls, whose key order is not meaningful.
 *
 * The walk recurses once per level, so it carries the depth bound itself: a value nested deeper
 * than {@link MAX_JSON_DEPTH} levels throws a {@link JsonBoundsError} (a 400 through the app's error
 * handler) instead of overflowing the stack. Request bodies are measured before they get here
 * (src/http/body.ts); this keeps any other caller just as safe.
 */
export function stableJson(value: unknown): string {
  return stableJsonAt(value, 1);
}

function stableJsonAt(value: unknown, depth: number): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (depth > MAX_JSON_DEPTH) throw new JsonBoundsError("nesting_too_deep", MAX_JSON_DEPTH);
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ",";
      out += stableJsonAt(value[i], depth + 1);
    }
    return out + "]";
  }
  const keys = Object.keys(value as Record<string, unknown>).sort();
  let out = "{";
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    if (i > 0) out += ",";
    out += JSON.stringify(k) + ":" + stableJsonAt((value as Record<string, unknown>)[k], depth + 1);
  }
  return out + "}";
}

/** Text of a message's `content`: a string, or the parts of a multi-part content array. */
function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return content == null ? "" : stableJson(content);
  let out = "";
  for (const part of content) {
    if (part && typeof part === "object") {
      const p = part as Record<string, unknown>;
      if (p.type === "text" && typeof p.text === "string") {
        out += p.text;
        continue;
      }
      // Images, audio and files change the prompt; their URL or data identifies them.
      out += FIELD + stableJson(part) + FIELD;
    } else if (typeof part === "string") {
      out += part;
    }
  }
  return out;
}

/** Canonical text of one message, independent of every other message. */
function canonicalMessage(m: CanonicalMessage): string {
  let out = RECORD + m.role + FIELD + (m.name ?? "") + FIELD + contentText(m.content);
  if (m.tool_calls != null) out += FIELD + stableJson(m.tool_calls);
  if (m.tool_call_id != null) out += FIELD + m.tool_call_id;
  return out;
}

/** Canonical text of a completion `prompt` (string, string array, or token ids). */
function canonicalCompletionPrompt(prompt: unknown): string {
  if (typeof prompt === "string") return prompt;
  if (Array.isArray(prompt)) {
    // A batch of prompts, or a token-id array: either way, a fixed rendering of the array.
    if (prompt.every((p) => typeof p === "string")) return prompt.join(RECORD);
    return stableJson(prompt);
  }
  return stableJson(prompt);
}

/**
 * The canonical prompt text. Tool definitions come first (chat templates render them into the
 * system section), then each message in order.
 *
 * @example
 * canonicalText({ kind: "chat", messages: [{ role: "system", content: "You are terse." }] })
 */
export function canonicalText(prompt: CanonicalPrompt): string {
  if (prompt.kind === "completion") return canonicalCompletionPrompt(prompt.prompt);
  const parts: string[] = [];
  if (prompt.tools != null) parts.push(RECORD + "tools" + FIELD + stableJson(prompt.tools));
  for (const m of prompt.messages) parts.push(canonicalMessage(m));
  return parts.join("");
}
