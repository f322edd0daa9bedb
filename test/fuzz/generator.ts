/**
 * A small deterministic generator of hostile input: a seeded PRNG and mutators for JSON texts,
 * values, strings, headers and paths. No dependencies; the same seed gives the same cases, so a
 * failure reproduces from its case name alone.
 */

/** Planted in bodies, headers and paths; no response may ever contain it. */
export const CANARY = "CANARY_7f3a";

/** mulberry32: a 32-bit seeded PRNG, plenty for test-case generation. */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** Integer in [lo, hi]. */
  between(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  chance(p: number): boolean {
    return this.next() < p;
  }
}

/**
 * Strings that break naive code: lone and reversed surrogates, NUL and other controls, BOMs,
 * non-characters, right-to-left overrides, combining marks, emoji, and the canary.
 */
export const HOSTILE_STRINGS: readonly string[] = [
  "\ud800",
  "\udfff",
  "\udc00\ud800",
  "a\ud83d",
  "\u0000",
  `${CANARY}\u0000${CANARY}`,
  "\u0001\u001f\u007f",
  "\ufeff",
  "\uffff\ufffe",
  "\u202e" + CANARY,
  "e\u0301\u0301\u0301",
  "\ud83d\ude00\ud83d\udc69\u200d\ud83d\udc69\u200d\ud83d\udc67",
  "\\",
  '"',
  "</script><script>" + CANARY,
  "${" + CANARY + "}",
  "%s%n%x",
  "\r\n" + CANARY + ": injected",
  CANARY,
  "",
  " ",
];

/**
 * JSON texts of values JS cannot turn into a primitive: `String(v)`, `${v}`, `+v` and `v + ""` each
 * throw a TypeError, since JSON.parse makes `toString` and `valueOf` own keys, and here neither is a
 * function. Planted where the router reads a value without checking its type, one must never be a 500.
 */
export const UNPRINTABLE_JSON: readonly string[] = [
  '{"toString":1}',
  `{"toString":"${CANARY}","valueOf":[]}`,
  '[{"toString":1}]',
  `[["${CANARY}",{"valueOf":1,"toString":null}]]`,
  `{"toString":{},"valueOf":{},"toJSON":"${CANARY}"}`,
];

/** JSON number texts that are absurd but valid JSON, or not JSON at all (NaN, Infinity, 0x1f, +1, .5, 1.). */
export const ABSURD_NUMBER_TEXTS: readonly string[] = [
  "1e309",
  "-1e309",
  "-0",
  "1e-400",
  "123456789012345678901234567890",
  "9007199254740993",
  "-9007199254740993",
  "0.1e-999999",
  "1E+999999",
  "NaN",
  "Infinity",
  "-Infinity",
  "0x1f",
  "+1",
  ".5",
  "1.",
  "01",
  "--1",
];

/** `levels` nested containers around `inner`, as JSON text (no recursion, any depth). */
export function nestedText(levels: number, inner = "1", kind: "array" | "object" | "mixed" = "array"): string {
  let open = "";
  let close = "";
  for (let i = 0; i < levels; i++) {
    const asObject = kind === "object" || (kind === "mixed" && i % 2 === 1);
    open += asObject ? '{"k":' : "[";
    close = (asObject ? "}" : "]") + close;
  }
  return open + inner + close;
}

/** Every proper prefix length of `text` worth trying: a few small, a few at random, one before the end. */
export function truncations(rng: Rng, text: string, count: number): string[] {
  const out = new Set<string>([text.slice(0, 0), text.slice(0, 1), text.slice(0, text.length - 1)]);
  while (out.size < count && out.size < text.length) out.add(text.slice(0, rng.int(text.length)));
  return [...out];
}

/**
 * A random byte-level edit of `text` that is NOT valid JSON any more (checked with JSON.parse):
 * deletes, duplicates, inserts structural or control characters, swaps quotes. Undefined after a
 * few attempts that stayed valid.
 */
export function breakJson(rng: Rng, text: string): string | undefined {
  const inserts = ["{", "}", "[", "]", ",", ":", '"', "\\", "\u0000", "\n", "'", "\u0007", "/*", "//", "undefined", "NaN", CANARY];
  for (let attempt = 0; attempt < 8; attempt++) {
    const at = rng.int(text.length + 1);
    let out: string;
    switch (rng.int(5)) {
      case 0:
        out = text.slice(0, at) + text.slice(at + rng.between(1, 4));
        break;
      case 1:
        out = text.slice(0, at) + rng.pick(inserts) + text.slice(at);
        break;
      case 2:
        out = text.slice(0, at) + text.slice(at, at + rng.between(1, 8)).repeat(2) + text.slice(at);
        break;
      case 3:
        out = text.replace(/"/g, () => (rng.chance(0.1) ? "'" : '"'));
        break;
      default:
        out = text + rng.pick([",", "}", "]", " x", "\u0000", "{}", CANARY]);
    }
    try {
      JSON.parse(out);
    } catch {
      return out;
    }
  }
  return undefined;
}

/** Bytes that are not UTF-8: stray continuations, overlongs, encoded surrogates, > U+10FFFF, truncated sequences. */
export const INVALID_UTF8: readonly number[][] = [
  [0xff],
  [0x80],
  [0xc0, 0x80],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80, 0x80, 0x80],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x98],
];

/** `text` with invalid UTF-8 spliced in somewhere (inside a string, usually). */
export function withInvalidUtf8(rng: Rng, text: string): Uint8Array {
  const bytes = new TextEncoder().encode(text);
  const at = rng.int(bytes.length + 1);
  const bad = rng.pick(INVALID_UTF8);
  const out = new Uint8Array(bytes.length + bad.length);
  out.set(bytes.subarray(0, at), 0);
  out.set(bad, at);
  out.set(bytes.subarray(at), at + bad.length);
  return out;
}

/**
 * Path variants of `path` that must not reach its route: encoded and doubled slashes, dot
 * segments that survive URL normalisation, case changes, NUL and control characters, bad percent
 * escapes, overlong UTF-8 dots, a trailing slash, the canary. Callers drop any variant whose
 * normalised path is a real route.
 */
export function pathTricks(path: string): string[] {
  const segments = path.split("/").filter(Boolean);
  const last = segments.length - 1;
  const join = (parts: string[]) => "/" + parts.join("/");
  return [
    path + "/",
    path + "//",
    "/" + path,
    path.replace(/\//g, "//"),
    join(segments.slice(0, last)) + "%2f" + segments[last],
    join(segments.slice(0, last)) + "%2F" + segments[last],
    path + "/..%2f..%2fadmin%2fstate",
    path + "/%2e%2e%2f%2e%2e%2fadmin%2fstate",
    path + "%2e%2e",
    path + "/%2e",
    path + ".",
    path.toUpperCase(),
    path + "%00",
    path + "%0d%0aX-Injected:%20" + CANARY,
    path + "/%c0%ae%c0%ae/",
    path + "/%ed%a0%80",
    path + "/%",
    path + "/%zz",
    path + "/%%32%65",
    path + "\\..\\admin\\state",
    path + ";" + CANARY,
    path + "/" + CANARY,
    path.replace(/\//g, "/./").replace("/./", "/"),
    "/" +
      segments
        .map((s) =>
          s
            .split("")
            .map((c) => "%" + c.charCodeAt(0).toString(16).padStart(2, "0"))
            .join(""),
        )
        .join("/"),
  ];
}
