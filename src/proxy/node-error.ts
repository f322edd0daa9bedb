/**
 * A node's own error, in OpenAI's shape. vLLM answers `{"error":{"message","type":"BadRequestError",
 * "param","code":400}}` (older versions `{"object":"error","message",...,"code":400}` without the
 * wrapper), SGLang and llama.cpp's server similar shapes with a numeric `code` and their own type
 * names: an OpenAI SDK then shows a number where it expects a string code, and a type it does not
 * know. The router answers every OpenAI-API error as OpenAI does (`{"error":{"message","type",
 * "code","param"}}`, src/http/errors.ts), a node's included: its message is kept, its type mapped
 * from the status, its code kept when it is a string, else `context_length_exceeded` for the
 * context-length refusal every engine words as OpenAI does ("maximum context length"), else
 * `node_error`.
 */
import type { ErrorType } from "../http/errors.ts";

const MAX_ERROR_BYTES = 64 * 1024;

function typeOf(status: number): ErrorType {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 429) return "rate_limit_error";
  return status >= 500 ? "server_error" : "invalid_request_error";
}

/** The body in OpenAI's error shape, or undefined when it already is one (or is not an error object at all). */
export function openaiErrorBody(status: number, body: Uint8Array): Uint8Array | undefined {
  if (body.byteLength > MAX_ERROR_BYTES) return undefined;
  let json: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(new TextDecoder().decode(body));
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return undefined;
    json = parsed as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const inner =
    json.error && typeof json.error === "object" ? (json.error as Record<string, unknown>) : json.object === "error" ? json : undefined;
  if (!inner || typeof inner.message !== "string") return undefined;
  const known = new Set<string>([
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "rate_limit_error",
    "server_error",
  ]);
  const alreadyOpenai =
    json.error === inner &&
    typeof inner.type === "string" &&
    known.has(inner.type) &&
    (typeof inner.code === "string" || inner.code === null);
  if (alreadyOpenai) return undefined;
  const code =
    typeof inner.code === "string" ? inner.code : /maximum context length/i.test(inner.message) ? "context_length_exceeded" : "node_error";
  const param = typeof inner.param === "string" ? inner.param : null;
  return new TextEncoder().encode(JSON.stringify({ error: { message: inner.message, type: typeOf(status), code, param } }));
}
