/**
 * One-loop checks of a request body's long lists: chat messages, Anthropic messages, Responses
 * input items, tools and completions' prompts. Each accepts only values its zod schema in
 * schemas.ts accepts, never more (test/edge/api/list-checks.test.ts runs both on every fuzz case
 * and on generated lists); when one refuses, the zod schema runs and names the issue, so a
 * client's error is zod's. The roles and bounds both check are defined here, once.
 *
 * Why: Workers allow no eval, so zod runs without its JIT there, and walks a list item by item
 * through its object, union and record schemas: a coding agent's session of 400 messages took 705
 * us in workerd, these loops 28 us (`npm run bench:validate`, bench/workerd/VALIDATION.md; 327-341
 * us against 14-28 us for the Messages and Responses APIs' 400 items).
 */

/** A chat message's roles (schemas.ts chatMessageSchema). */
export const CHAT_ROLES = ["system", "developer", "user", "assistant", "tool", "function"] as const;
/** An Anthropic message's roles (schemas.ts messagesSchema). */
export const ANTHROPIC_ROLES = ["user", "assistant"] as const;
/** The longest chat message `name` and `tool_call_id`, in characters. */
export const MAX_MESSAGE_ID_CHARS = 256;

const CHAT_ROLE_SET: ReadonlySet<string> = new Set(CHAT_ROLES);
const ANTHROPIC_ROLE_SET: ReadonlySet<string> = new Set(ANTHROPIC_ROLES);

/**
 * A JSON object: not null, not an array, with no prototype but Object's (JSON.parse makes no
 * other), and no key `__proto__` of its own. JSON.parse makes that key an ordinary property, which
 * zod leaves out of the copy it returns: such an item goes to zod, so the value (and the prompt's
 * hashes, canonical.ts hashes every key) stays zod's.
 */
export function isJsonObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return (proto === Object.prototype || proto === null) && !Object.hasOwn(v, "__proto__");
}

/** Absent, null or a string of at most `max` characters (zod's `z.string().max(max).nullish()`). */
function isShortStringOrNothing(v: unknown, max: number): boolean {
  return v === undefined || v === null || (typeof v === "string" && v.length <= max);
}

/**
 * A list of `min` to `max` items each `item` takes (zod's `z.array(item).min(min).max(max)`).
 * Indexed, so a hole, were there one, is checked as the undefined it reads as.
 */
function isListOf(v: unknown, min: number, max: number, item: (x: unknown) => boolean): boolean {
  if (!Array.isArray(v) || v.length < min || v.length > max) return false;
  for (let i = 0; i < v.length; i++) if (!item(v[i])) return false;
  return true;
}

/** A list of at most `max` JSON objects (zod's `z.array(z.record(z.string(), z.unknown())).max(max)`). */
export function isObjectList(v: unknown, max: number): boolean {
  return isListOf(v, 0, max, isJsonObject);
}

/** A content part: an object with a non-empty string `type` (schemas.ts contentPart). */
function isContentPart(part: unknown): boolean {
  return isJsonObject(part) && typeof part.type === "string" && part.type.length > 0;
}

/** A list of content parts. */
export function isContentParts(v: unknown): boolean {
  return isListOf(v, 0, Infinity, isContentPart);
}

/** One chat message as schemas.ts's chatMessageSchema takes it. */
function isChatMessage(m: unknown): boolean {
  if (!isJsonObject(m)) return false;
  const role = m.role;
  if (typeof role !== "string" || !CHAT_ROLE_SET.has(role)) return false;
  const content = m.content;
  if (content !== undefined && content !== null && typeof content !== "string" && !isContentParts(content)) return false;
  if (!isShortStringOrNothing(m.name, MAX_MESSAGE_ID_CHARS) || !isShortStringOrNothing(m.tool_call_id, MAX_MESSAGE_ID_CHARS)) return false;
  const calls = m.tool_calls;
  return calls === undefined || calls === null || isObjectList(calls, Infinity);
}

/** Chat completions' `messages`: 1 to `max` messages. */
export function isChatMessages(v: unknown, max: number): boolean {
  return isListOf(v, 1, max, isChatMessage);
}

/** One message of the Messages API: a user's or the assistant's, with content. */
function isAnthropicMessage(m: unknown): boolean {
  if (!isJsonObject(m)) return false;
  const role = m.role;
  return typeof role === "string" && ANTHROPIC_ROLE_SET.has(role) && (typeof m.content === "string" || isContentParts(m.content));
}

/** The Messages API's `messages`: 1 to `max` messages. */
export function isAnthropicMessages(v: unknown, max: number): boolean {
  return isListOf(v, 1, max, isAnthropicMessage);
}

/** A token id: a safe integer from 0, as schemas.ts `tokenIds` (zod's `int()` is a safe integer). */
function isTokenId(id: unknown): boolean {
  return Number.isSafeInteger(id) && (id as number) >= 0;
}

/** A list of token ids, at least one. */
function isTokenIds(v: unknown): boolean {
  return isListOf(v, 1, Infinity, isTokenId);
}

/** A completion's `prompt`, as completionSchema's union takes it: a text, 1 to `maxPrompts` texts, token ids, or 1 to `maxPrompts` lists of them. */
export function isCompletionPrompt(v: unknown, maxPrompts: number): boolean {
  if (typeof v === "string") return true;
  if (!Array.isArray(v) || v.length < 1) return false;
  if (typeof v[0] === "string") return isListOf(v, 1, maxPrompts, (p) => typeof p === "string");
  if (Array.isArray(v[0])) return isListOf(v, 1, maxPrompts, isTokenIds);
  return isTokenIds(v);
}
