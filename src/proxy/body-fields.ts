/**
 * A few top-level fields of a JSON object body, read in one pass over its bytes without parsing
 * the rest: a region worker whose edge did not say them (an older edge: the dispatch's
 * `bodyFields`) needs a request's `max_tokens` (to bound the usage a node may claim,
 * src/proxy/usage-check.ts) and whether it has `stream_options` (to ask for usage,
 * stream-usage.ts), whose value it reads to rewrite it; and a body may be `max_body_bytes` (4 MiB)
 * of prompt. The scan keeps only its depth, and jumps over each string to its closing quote;
 * nested keys of the same name (a tool's schema with a `max_tokens` property) are not top-level
 * and are skipped. A key given twice is read as JSON.parse reads it: the last one.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** A value longer than this is reported present but not parsed (the fields read here are numbers and small objects). */
export const MAX_FIELD_VALUE_BYTES = 4096;

/**
 * What a body says of one key: absent, or present with its value (`undefined` when too long to
 * parse here) and where the value's bytes are (`start` to `end`, exclusive; whitespace after it included).
 */
export type Field = { present: false } | { present: true; value: unknown; start: number; end: number };

const decoder = new TextDecoder();

/** The top-level `keys` of `body` (a JSON object), each absent or with its value; not an object: every key absent. */
export function topLevelFields(body: Uint8Array, keys: readonly string[]): Map<string, Field> {
  const wanted = new Set(keys);
  const found = new Map<string, Field>(keys.map((k) => [k, { present: false }]));
  let depth = 0;
  let expectKey = false;
  let currentKey: string | undefined;
  let valueStart = -1;
  const settle = (end: number) => {
    if (currentKey === undefined || valueStart < 0) return;
    if (wanted.has(currentKey)) {
      let value: unknown;
      if (end - valueStart <= MAX_FIELD_VALUE_BYTES) {
        try {
          value = JSON.parse(decoder.decode(body.subarray(valueStart, end)));
        } catch {
          value = undefined;
        }
      }
      found.set(currentKey, { present: true, value, start: valueStart, end });
    }
    currentKey = undefined;
    valueStart = -1;
  };
  for (let i = 0; i < body.length; i++) {
    const b = body[i];
    if (b === QUOTE) {
      const close = stringEnd(body, i);
      if (depth === 1 && expectKey) {
        try {
          currentKey = JSON.parse(decoder.decode(body.subarray(i, close + 1))) as string;
        } catch {
          currentKey = undefined;
        }
        expectKey = false;
      } else if (depth === 1 && currentKey !== undefined && valueStart < 0) valueStart = i;
      i = close;
      continue;
    }
    if (depth === 1) {
      if (b === COLON) continue;
      if (b === COMMA) {
        settle(i);
        expectKey = true;
        continue;
      }
      if (b === CLOSE_BRACE) {
        settle(i);
        depth = 0;
        break;
      }
      if (currentKey !== undefined && valueStart < 0 && b !== 0x20 && b !== 0x0a && b !== 0x0d && b !== 0x09) valueStart = i;
    }
    if (b === OPEN_BRACE || b === OPEN_BRACKET) {
      if (depth === 0 && b === OPEN_BRACE) expectKey = true;
      depth++;
    } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) depth--;
  }
  return found;
}

/**
 * Where the string opened at `open` closes: its closing quote, or the body's end when it never
 * does. The quotes are found by the runtime's own search (`indexOf`), not a look at each byte in
 * JavaScript: a chat body is nearly all string (its messages), and the byte loop was 1.4% of
 * workerd's CPU for a 2,000-token request (~60 µs; a V8 profile of the path as bench/wan/stages.ts
 * takes it). A quote is escaped when an odd number of backslashes runs up to it.
 */
function stringEnd(body: Uint8Array, open: number): number {
  let at = open;
  for (;;) {
    at = body.indexOf(QUOTE, at + 1);
    if (at < 0) return body.length;
    let slashes = 0;
    for (let k = at - 1; k > open && body[k] === BACKSLASH; k--) slashes++;
    if (slashes % 2 === 0) return at;
  }
}

/** A top-level field's value as read (undefined when absent, or too long to parse here). */
export function fieldValue(fields: Map<string, Field>, key: string): unknown {
  const f = fields.get(key);
  return f?.present ? f.value : undefined;
}
