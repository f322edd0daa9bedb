/**
 * Where a JSON text stops being JSON, as a line and column, for errors about text that may hold a
 * secret (a secrets file, ./secrets.ts; a WARMPATH_CONFIG string, ./generate.ts). JSON.parse's own
 * message cannot be shown: for an unexpected token V8 quotes the text around it ("Unexpected token
 * ',', "{"A": nul, "B": "s"... is not valid JSON") and gives no position at all. So the position is
 * found again here, by a scanner of JSON's grammar (RFC 8259) that reads no value, only its shape.
 */

/** A 1-based line and column. */
export interface TextPosition {
  line: number;
  column: number;
}

/** The line and column of the `offset`th character (a `\r\n` ends a line as `\n` does). */
export function positionAt(text: string, offset: number): TextPosition {
  const before = text.slice(0, offset);
  const lineStart = before.lastIndexOf("\n") + 1;
  return { line: before.split("\n").length, column: offset - lineStart + 1 };
}

/** A number's longest valid prefix at `lastIndex` (sticky). */
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const ESCAPES = '"\\/bfnrt';
const HEX4 = /^[0-9a-fA-F]{4}$/;

/** Thrown by the scanner at the first character that is not JSON. */
class ScanStop {
  readonly offset: number;
  constructor(offset: number) {
    this.offset = offset;
  }
}

/**
 * The position of the first character that is not JSON (the end of the text, if it ends early), or
 * undefined if the text is JSON (or nests too deep to scan: no position then, not a wrong one).
 */
export function jsonErrorPosition(text: string): TextPosition | undefined {
  let i = 0;
  const fail = (): never => {
    throw new ScanStop(i);
  };
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i]!)) i++;
  };
  const expect = (c: string) => (text[i] === c ? i++ : fail());
  const string = () => {
    expect('"');
    for (;;) {
      if (i >= text.length) fail();
      const c = text[i]!;
      if (c === '"') return void i++;
      if (c < " ") fail();
      if (c !== "\\") {
        i++;
        continue;
      }
      i++;
      if (text[i] === "u") {
        if (!HEX4.test(text.slice(i + 1, i + 5))) fail();
        i += 5;
      } else if (i < text.length && ESCAPES.includes(text[i]!)) i++;
      else fail();
    }
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === "{" || c === "[") {
      const close = c === "{" ? "}" : "]";
      i++;
      ws();
      if (text[i] === close) return void i++;
      for (;;) {
        if (close === "}") {
          ws();
          string();
          ws();
          expect(":");
        }
        value();
        ws();
        if (text[i] === ",") i++;
        else return void expect(close);
      }
    }
    if (c === '"') return string();
    for (const literal of ["true", "false", "null"]) if (text.startsWith(literal, i)) return void (i += literal.length);
    NUMBER.lastIndex = i;
    if (!NUMBER.test(text)) fail();
    i = NUMBER.lastIndex;
  };
  try {
    value();
    ws();
    if (i < text.length) fail();
    return undefined;
  } catch (e) {
    if (e instanceof ScanStop) return positionAt(text, e.offset);
    if (e instanceof RangeError) return undefined;
    throw e;
  }
}

/** " at line L, column C" for a text JSON.parse refused, or "" when no position was found. */
export function atJsonError(text: string): string {
  const at = jsonErrorPosition(text);
  return at ? ` at line ${at.line}, column ${at.column}` : "";
}
