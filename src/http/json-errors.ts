/**
 * Where a request body stops being UTF-8 or JSON, for the 400 that says so (body.ts
 * parseJsonBody): a byte offset, or a character position with its line and column and what was
 * expected there in fixed words. Never the body's text: the engines' own messages quote it, and a
 * body may hold a secret. Only called after the runtime's decoder or JSON.parse refused the body,
 * so the common path pays nothing for them.
 */

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
