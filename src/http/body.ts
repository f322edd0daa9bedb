/**
 * Reading a JSON request body, defensively: the media type exactly (`application/json`), a hard
 * size limit, strict UTF-8, JSON, and bounds on the parsed value's depth and size
 * (src/core/json-bounds.ts) before anything walks it. Every refusal says where the body is wrong
 * (a byte or character position, the limit) and never quotes it.
 *
 * `Content-Length` is checked first (cheap rejection); a body without one (chunked) is counted as
 * it streams and abandoned as soon as it passes the limit, so an oversized upload never sits in
 * memory whole.
 */
import { checkJsonBounds, JsonBoundsError } from "../core/json-bounds.ts";
import { ApiError } from "./errors.ts";
import { invalidUtf8At, jsonSyntaxError } from "./json-errors.ts";

/**
 * One `OWS ";" OWS [ name=value ]` step of a media type's parameters (RFC 9110 section 8.3.1): a
 * `token` name, a `token` or quoted-string value.
 */
const PARAMETER =
  /^[ \t]*;[ \t]*(?:([!#$%&'*+.^_`|~0-9A-Za-z-]+)=([!#$%&'*+.^_`|~0-9A-Za-z-]+|"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x20-\x7e\x80-\xff])*"))?/;

/**
 * Whether a `Content-Type` value is JSON: the media type `application/json` exactly (type and
 * subtype case-insensitive), with well-formed parameters, a `charset` only if it is UTF-8 (JSON is
 * UTF-8: RFC 8259). `application/jsonx`, `application/json-seq`, `text/plain; application/json`
 * and `application/json, text/plain` are not.
 */
export function isJsonMediaType(value: string): boolean {
  const semi = value.indexOf(";");
  const essence = (semi === -1 ? value : value.slice(0, semi)).replace(/^[ \t]+|[ \t]+$/g, "");
  if (essence.toLowerCase() !== "application/json") return false;
  let rest = semi === -1 ? "" : value.slice(semi);
  while (!/^[ \t]*$/.test(rest)) {
    const m = PARAMETER.exec(rest);
    if (!m) return false;
    const [step, name, raw] = m;
    if (name !== undefined && name.toLowerCase() === "charset") {
      const charset = raw!.startsWith('"') ? raw!.slice(1, -1).replace(/\\(.)/g, "$1") : raw!;
      if (!/^utf-?8$/i.test(charset)) return false;
    }
    rest = rest.slice(step.length);
  }
  return true;
}

/**
 * 415 unless the request's `Content-Type` is JSON ({@link isJsonMediaType}). A request without
 * the header is read as JSON (as curl and many scripts send it); an empty one is refused. The
 * message never repeats the header.
 */
function requireJsonContentType(request: Request): void {
  const contentType = request.headers.get("content-type");
  if (contentType !== null && !isJsonMediaType(contentType)) {
    throw ApiError.unsupportedMediaType("Content-Type must be application/json (optionally with charset=utf-8)");
  }
}

/**
 * The body, at most `maxBytes` of it, of a request whose `Content-Type` is JSON (415 otherwise:
 * every body warmpath reads is JSON, so the media type is checked here, before a byte is read).
 */
export async function readBodyLimited(request: Request, maxBytes: number): Promise<Uint8Array> {
  requireJsonContentType(request);
  const tooLarge = () => ApiError.tooLarge(maxBytes);
  const bytes = await readRequestLimited(request, maxBytes);
  if (bytes === undefined) throw tooLarge();
  return bytes;
}

/**
 * A request's body, at most `maxBytes` of it, or undefined (nothing or the rest left unread) when
 * it is larger. A declared `Content-Length` is checked first; within the bound the body is read in
 * one native call, since the runtime frames it by that length (a sender cannot send more than it
 * declared); without one (chunked) it is counted as it streams ({@link readBytesLimited}). One read
 * instead of a reader's promise per chunk: the edge's body read was 9% of its isolate's CPU
 * profile (bench/wan/RESULTS.md, "Where the CPU goes").
 */
export async function readRequestLimited(request: Request, maxBytes: number): Promise<Uint8Array | undefined> {
  const declared = request.headers.get("content-length");
  if (declared === null || !/^\d{1,16}$/.test(declared)) return readBytesLimited(request.body, maxBytes);
  if (Number(declared) > maxBytes) {
    await request.body?.cancel().catch(() => {});
    return undefined;
  }
  const bytes = new Uint8Array(await request.arrayBuffer());
  // Framing is the runtime's: checked again all the same, so a runtime that did not enforce it could not pass the bound.
  return bytes.byteLength > maxBytes ? undefined : bytes;
}

/** A body's bytes, or undefined (the rest cancelled) as soon as it runs past `maxBytes`. */
async function readBytesLimited(body: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<Uint8Array | undefined> {
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  return concatBytes(chunks);
}

/** The parts as one array (the part itself when there is only one). */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  let total = 0;
  for (const p of parts) total += p.byteLength;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.byteLength;
  }
  return out;
}

/**
 * Parses a JSON body and checks its depth and size (src/core/json-bounds.ts), answering 400:
 * `invalid_json` saying where the body stops being UTF-8 or JSON (never quoting it: the engine's
 * own parse error does), `nesting_too_deep` or `too_many_json_values` naming the limit.
 */
export function parseJsonBody(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw ApiError.invalidJson(`Request body is not valid UTF-8 (at byte ${invalidUtf8At(bytes)})`);
  }
  if (text.trim() === "") throw ApiError.invalidJson("Request body is empty: expected a JSON object");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    const at = jsonSyntaxError(text);
    throw ApiError.invalidJson(
      at
        ? `Request body is not valid JSON: ${at.reason} at position ${at.position} (line ${at.line}, column ${at.column})`
        : "Request body is not valid JSON",
    );
  }
  try {
    checkJsonBounds(value);
  } catch (e) {
    if (e instanceof JsonBoundsError) throw ApiError.invalidRequest(e.message, null, e.code);
    throw e;
  }
  return value;
}
