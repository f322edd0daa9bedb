/**
 * One-loop checks of a request body's long lists: chat messages, Anthropic messages, Responses
 * input items, tools and completions' prompts. Each accepts only values its zod schema in schemas.ts accepts, never
 * more (test/edge/api/list-checks.test.ts runs both on every fuzz case and on generated lists);
 * when one refuses, the zod schema runs and names the issue, so a client's error is zod's.
 *
 * Why: Workers allow no eval, so zod runs without its JIT there, and walks a list item by item
 * through its object, union and record schemas: a coding agent's session of 400 messages took 591
 * us in workerd, these loops 25 us (`npm run bench:validate`, bench/workerd/VALIDATION.md; 447-627
 * us against 22-34 us for the Responses and Messages APIs' 400 items).
 */

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

/** A list of at most `max` JSON objects (zod's `z.array(z.record(z.string(), z.unknown())).max(max)`). */
export function isObjectList(v: unknown, max: number): boolean {
  if (!Array.isArray(v) || v.length > max) return false;
  for (let i = 0; i < v.length; i++) if (!isJsonObject(v[i])) return false;
  return true;
}

/** A list of content parts: objects each with a non-empty string `type` (schemas.ts contentPart). */
export function isContentParts(v: unknown): boolean {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) {
    const part: unknown = v[i];
    if (!isJsonObject(part)) return false;
    const type = part.type;
    if (typeof type !== "string" || type.length === 0) return false;
  }
  return true;
}

const CHAT_ROLES = new Set(["system", "developer", "user", "assistant", "tool", "function"]);
const ANTHROPIC_ROLES = new Set(["user", "assistant"]);

/** One chat message as schemas.ts's chatMessageSchema takes it. */
function isChatMessage(m: unknown): boolean {
  if (!isJsonObject(m)) return false;
  const role = m.role;
  if (typeof role !== "string" || !CHAT_ROLES.has(role)) return false;
  const content = m.content;
  if (content !== undefined && content !== null && typeof content !== "string" && !isContentParts(content)) return false;
  if (!isShortStringOrNothing(m.name, 256) || !isShortStringOrNothing(m.tool_call_id, 256)) return false;
  const calls = m.tool_calls;
  return calls === undefined || calls === null || isObjectList(calls, Infinity);
}

/** Chat completions' `messages`: 1 to `max` messages. */
export function isChatMessages(v: unknown, max: number): boolean {
  if (!Array.isArray(v) || v.length < 1 || v.length > max) return false;
  for (let i = 0; i < v.length; i++) if (!isChatMessage(v[i])) return false;
  return true;
}

/** The Messages API's `messages`: 1 to `max` messages, each a user's or the assistant's, with content. */
export function isAnthropicMessages(v: unknown, max: number): boolean {
  if (!Array.isArray(v) || v.length < 1 || v.length > max) return false;
  for (let i = 0; i < v.length; i++) {
    const m: unknown = v[i];
    if (!isJsonObject(m)) return false;
    const role = m.role;
    if (typeof role !== "string" || !ANTHROPIC_ROLES.has(role)) return false;
    if (typeof m.content !== "string" && !isContentParts(m.content)) return false;
  }
  return true;
}

/** A list of token ids: safe integers from 0, as schemas.ts `tokenIds` (zod's `int()` is a safe integer). */
function isTokenIds(v: unknown): boolean {
  if (!Array.isArray(v) || v.length < 1) return false;
  for (let i = 0; i < v.length; i++) if (!Number.isSafeInteger(v[i]) || (v[i] as number) < 0) return false;
  return true;
}

/** A completion's `prompt`, as completionSchema's union takes it: a text, 1 to `maxPrompts` texts, token ids, or 1 to `maxPrompts` lists of them. */
export function isCompletionPrompt(v: unknown, maxPrompts: number): boolean {
  if (typeof v === "string") return true;
  if (!Array.isArray(v) || v.length < 1) return false;
  if (typeof v[0] === "string") return v.length <= maxPrompts && v.every((p) => typeof p === "string");
  if (Array.isArray(v[0])) return v.length <= maxPrompts && v.every(isTokenIds);
  return isTokenIds(v);
}
