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

/** Offset of the first byte that is not well-formed UTF-8 (-1 if none). */
export function invalidUtf8At(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    // Lead byte: its sequence length, and the range of the byte after it (no overlongs, no surrogates, <= U+10FFFF).
    let length: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) length = 2;
    else if (b >= 0xe0 && b <= 0xef) {
      length = 3;
      if (b === 0xe0) lo = 0xa0;
      if (b === 0xed) hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      length = 4;
      if (b === 0xf0) lo = 0x90;
      if (b === 0xf4) hi = 0x8f;
    } else return i;
    const second = bytes[i + 1];
    if (second === undefined || second < lo || second > hi) return i;
    for (let k = 2; k < length; k++) {
      const next = bytes[i + k];
      if (next === undefined || (next & 0xc0) !== 0x80) return i;
    }
    i += length;
  }
  return -1;
}

interface JsonSyntaxError {
  /** Offset in characters (UTF-16 code units) of the decoded body, from 0. */
  position: number;
  /** 1-based, as an editor counts. */
  line: number;
  column: number;
  /** What was expected there, in fixed words (never the body's text). */
  reason: string;
}

const isWhitespace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isHex = (c: number) => isDigit(c) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);

/**
 * Where `text` first stops being JSON (RFC 8259), or undefined if it is JSON. Only called after
 * `JSON.parse` refused the text, to say *where* without quoting the text as the engine's message
 * does. A single pass with an explicit stack of open containers: no recursion, any depth.
 */
export function jsonSyntaxError(text: string): JsonSyntaxError | undefined {
  const n = text.length;
  // Open containers: true for an object, false for an array.
  const open: boolean[] = [];
  let i = 0;
  const fail = (reason: string): JsonSyntaxError => {
    let line = 1;
    let lineStart = 0;
    for (let k = 0; k < i && k < n; k++) {
      if (text.charCodeAt(k) === 0x0a) {
        line++;
        lineStart = k + 1;
      }
    }
    return { position: i, line, column: i - lineStart + 1, reason };
  };
  const skipWhitespace = () => {
    while (i < n && isWhitespace(text.charCodeAt(i))) i++;
  };
  /** Scans a string starting at its opening quote; returns an error or undefined. */
  const scanString = (): JsonSyntaxError | undefined => {
    i++;
    for (;;) {
      if (i >= n) return fail("unterminated string");
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return undefined;
      }
      if (c < 0x20) return fail("control character in a string (escape it)");
      if (c === 0x5c) {
        const e = text.charCodeAt(i + 1);
        if (e === 0x75) {
          for (let k = 2; k < 6; k++) {
            if (!isHex(text.charCodeAt(i + k))) {
              i += k;
              return fail("invalid \\u escape in a string");
            }
          }
          i += 6;
        } else if ([0x22, 0x5c, 0x2f, 0x62, 0x66, 0x6e, 0x72, 0x74].includes(e)) i += 2;
        else {
          i++;
          return fail("invalid escape in a string");
        }
      } else i++;
    }
  };
  const scanNumber = (): JsonSyntaxError | undefined => {
    if (text.charCodeAt(i) === 0x2d) i++;
    if (text.charCodeAt(i) === 0x30) i++;
    else if (isDigit(text.charCodeAt(i))) while (isDigit(text.charCodeAt(i))) i++;
    else return fail("invalid number");
    if (text.charCodeAt(i) === 0x2e) {
      i++;
      if (!isDigit(text.charCodeAt(i))) return fail("invalid number");
      while (isDigit(text.charCodeAt(i))) i++;
    }
    if (text.charCodeAt(i) === 0x65 || text.charCodeAt(i) === 0x45) {
      i++;
      if (text.charCodeAt(i) === 0x2b || text.charCodeAt(i) === 0x2d) i++;
      if (!isDigit(text.charCodeAt(i))) return fail("invalid number");
      while (isDigit(text.charCodeAt(i))) i++;
    }
    return undefined;
  };

  // States: a value is expected; in an object a key (or `}` right after `{`); after a key `:`;
  // after a value `,` or the container's close; after the top-level value, nothing.
  type State = "value" | "value-or-close" | "key" | "key-or-close" | "colon" | "comma-or-close" | "end";
  let state: State = "value";
  for (;;) {
    skipWhitespace();
    if (state === "end") return i < n ? fail("unexpected data after the JSON value") : undefined;
    if (i >= n) return fail("unexpected end of input");
    const c = text.charCodeAt(i);
    switch (state) {
      case "key-or-close":
      case "key":
        if (c === 0x7d && state === "key-or-close") {
          i++;
          open.pop();
          state = open.length === 0 ? "end" : "comma-or-close";
          continue;
        }
        if (c !== 0x22) return fail("expected a property name in double quotes");
        {
          const error = scanString();
          if (error) return error;
        }
        state = "colon";
        continue;
      case "colon":
        if (c !== 0x3a) return fail("expected ':' after a property name");
        i++;
        state = "value";
        continue;
      case "comma-or-close": {
        const inObject = open[open.length - 1]!;
        if (c === 0x2c) {
          i++;
          state = inObject ? "key" : "value";
        } else if (c === (inObject ? 0x7d : 0x5d)) {
          i++;
          open.pop();
          state = open.length === 0 ? "end" : "comma-or-close";
        } else return fail(inObject ? "expected ',' or '}'" : "expected ',' or ']'");
        continue;
      }
      case "value-or-close":
        if (c === 0x5d) {
          i++;
          open.pop();
          state = open.length === 0 ? "end" : "comma-or-close";
          continue;
        }
        break;
      case "value":
        break;
    }
    // A value.
    if (c === 0x7b) {
      i++;
      open.push(true);
      state = "key-or-close";
      continue;
    }
    if (c === 0x5b) {
      i++;
      open.push(false);
      state = "value-or-close";
      continue;
    }
    let error: JsonSyntaxError | undefined;
    if (c === 0x22) error = scanString();
    else if (c === 0x2d || isDigit(c)) error = scanNumber();
    else {
      const literal = ["true", "false", "null"].find((l) => text.startsWith(l, i));
      if (!literal) return fail("unexpected character where a value should start");
      i += literal.length;
    }
    if (error) return error;
    state = open.length === 0 ? "end" : "comma-or-close";
  }
}
