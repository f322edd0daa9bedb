/**
 * Bounds on every JSON value the router walks: nesting depth and number of values.
 *
 * `JSON.parse` itself is iterative and accepts any depth, but everything that walks the parsed
 * value afterwards (canonicalisation's `stableJson`, `JSON.stringify`, structured clone into the
 * region object) recurses once per level: ~2,800 levels of `[` (a 5.7 KB body) overflowed
 * workerd's stack in `stableJson`, a 500 with a stack trace in the log. So every parsed body is
 * measured here first, by an iterative walk that needs no stack of its own, and refused with a 400
 * naming the bound before any recursive code sees it; and `stableJson` carries the same depth bound
 * in its own walk (canonical.ts), so no caller can overflow it either.
 */

/**
 * Deepest nesting accepted, counting the body itself as level 1 (`{"a":[1]}` is 2 levels).
 *
 * Why 64: a chat request's own structure takes 4-6 levels (body, messages, message, content part
 * or tool call, function, arguments); what nests further is a tool's JSON schema, where each
 * nested property takes 2 levels (`properties`, the property). OpenAI's structured outputs allow
 * 5 (now 10) levels of schema nesting, i.e. ~25 levels of JSON in a request; 64 is far past any
 * real chat request, and a recursion 64 frames deep is a sliver of any runtime's stack.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Most values (objects, arrays, strings, numbers, booleans, nulls) in one body.
 *
 * Why 2^21 (2,097,152): the densest JSON (`[0,0,...]`) holds one value per 2 bytes, so a body
 * within the default 4 MiB limit never reaches it; a 1M-token prompt sent as token ids is ~1M
 * values. It caps the walk's work when an operator raises `limits.max_body_bytes` far beyond that.
 */
export const MAX_JSON_VALUES = 2 ** 21;

/** A body over one of the bounds: `code` names which (`nesting_too_deep`, `too_many_json_values`). */
export class JsonBoundsError extends Error {
  readonly code: "nesting_too_deep" | "too_many_json_values";
  readonly limit: number;

  constructor(code: JsonBoundsError["code"], limit: number) {
    super(
      code === "nesting_too_deep"
        ? `Request body is nested more than ${limit} levels deep (the limit)`
        : `Request body holds more than ${limit} JSON values (the limit)`,
    );
    this.name = "JsonBoundsError";
    this.code = code;
    this.limit = limit;
  }
}

interface JsonBounds {
  maxDepth: number;
  maxValues: number;
}

const DEFAULT_BOUNDS: JsonBounds = { maxDepth: MAX_JSON_DEPTH, maxValues: MAX_JSON_VALUES };

/**
 * Throws a {@link JsonBoundsError} if `value` nests deeper than `maxDepth` levels or holds more
 * than `maxValues` values. Iterative (an explicit array of pending containers, never recursion),
 * so it cannot overflow the stack whatever the input; it stops at the first bound passed.
 */
export function checkJsonBounds(value: unknown, bounds: JsonBounds = DEFAULT_BOUNDS): void {
  if (value === null || typeof value !== "object") return;
  // Pending containers and their depth, as two parallel arrays (no allocation per entry).
  const pending: object[] = [value];
  const depths: number[] = [1];
  let values = 1;
  if (bounds.maxDepth < 1) throw new JsonBoundsError("nesting_too_deep", bounds.maxDepth);
  while (pending.length > 0) {
    const container = pending.pop()!;
    const depth = depths.pop()!;
    const children: unknown[] = Array.isArray(container) ? container : Object.values(container);
    values += children.length;
    if (values > bounds.maxValues) throw new JsonBoundsError("too_many_json_values", bounds.maxValues);
    for (const child of children) {
      if (child === null || typeof child !== "object") continue;
      if (depth + 1 > bounds.maxDepth) throw new JsonBoundsError("nesting_too_deep", bounds.maxDepth);
      pending.push(child);
      depths.push(depth + 1);
    }
  }
}
