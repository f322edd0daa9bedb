/**
 * W3C Trace Context, level 1 (https://www.w3.org/TR/trace-context/): reading a client's
 * `traceparent` and `tracestate`, and making the child ids warmpath sends on. Pure: no I/O, the
 * randomness is passed in (crypto.getRandomValues in the workers, a seeded source in tests).
 *
 * What the router does with them (src/edge/middleware/trace.ts, src/region/trace.ts): a valid
 * `traceparent` is continued (same trace id, the client's span as warmpath's parent, its sampled
 * flag honoured); a missing or invalid one starts a new trace, never a 400 (the specification:
 * a vendor that cannot parse it restarts the trace). `tracestate` is kept verbatim when valid and
 * within its bounds, else dropped, and only ever with a valid `traceparent`.
 */
import { byteHex, bytesToHex } from "./hex.ts";

/** The version this code writes; a higher version is read by its first four fields (spec, 4.3). */
const TRACE_VERSION = "00";
/** The `sampled` bit of trace-flags. */
const SAMPLED_FLAG = 0x01;
/** Most list members a `tracestate` may carry (spec, 3.3.1.1). */
export const MAX_TRACESTATE_MEMBERS = 32;
/** Longest `tracestate` passed on: the spec asks vendors to propagate at least 512 characters. */
export const MAX_TRACESTATE_CHARS = 512;

/** A span's context as W3C Trace Context carries it: lowercase hex ids, flags 0-255. */
interface TraceContext {
  /** 32 lowercase hex characters, not all zero. */
  traceId: string;
  /** The parent span's id: 16 lowercase hex characters, not all zero. */
  spanId: string;
  /** trace-flags; bit 0 is `sampled`. */
  flags: number;
  /** The `tracestate` to pass on, verbatim, when the client sent a valid one. */
  state?: string | undefined;
}

/** Fills a byte array with random bytes (crypto.getRandomValues, or a seeded source in tests). */
export type RandomBytes = (bytes: Uint8Array) => void;

const HEX = /^[0-9a-f]+$/;
const ZERO = /^0+$/;
const VERSION = /^[0-9a-f]{2}$/;

function validId(id: string, length: number): boolean {
  return id.length === length && HEX.test(id) && !ZERO.test(id);
}

/**
 * Reads a `traceparent` header: its trace id, parent id and flags, or undefined when invalid.
 *
 * Version `00`: exactly `00-<32 hex>-<16 hex>-<2 hex>` (55 characters), lowercase. Version `ff` is
 * forbidden. A higher version is read by its first four fields, which must be followed by nothing
 * or by `-` and more (the spec lets later versions add fields there).
 */
export function parseTraceparent(header: string | null | undefined): Omit<TraceContext, "state"> | undefined {
  if (header === null || header === undefined) return undefined;
  // Headers are trimmed of optional whitespace by the runtime; tabs and spaces inside are invalid.
  const value = header.trim();
  if (value.length < 55) return undefined;
  const version = value.slice(0, 2);
  if (!VERSION.test(version) || version === "ff") return undefined;
  if (version === TRACE_VERSION ? value.length !== 55 : value.length > 55 && value[55] !== "-") return undefined;
  const [, traceId, spanId, flags] = value.slice(0, 55).split("-");
  if (value[2] !== "-" || value[35] !== "-" || value[52] !== "-") return undefined;
  if (traceId === undefined || spanId === undefined || flags === undefined) return undefined;
  if (!validId(traceId, 32) || !validId(spanId, 16) || flags.length !== 2 || !HEX.test(flags)) return undefined;
  return { traceId, spanId, flags: parseInt(flags, 16) };
}

/** A list member's key: `simple-key` or `tenant@system` (spec, 3.3.1.3.1). */
const KEY = /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$/;
/** A value: printable ASCII but `,` and `=`, not ending in a space (spec, 3.3.1.3.2). */
const VALUE = /^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/**
 * A `tracestate` to pass on, or undefined: kept verbatim (the spec lets a vendor that does not
 * add its own entry forward it unchanged) when every list member is `key=value`, keys are not
 * repeated, there are at most {@link MAX_TRACESTATE_MEMBERS} and it is at most
 * {@link MAX_TRACESTATE_CHARS} characters long; dropped whole otherwise (a partial one could
 * misstate another vendor's entry). Several headers arrive joined by `,` (Headers.get), which is
 * the same list.
 */
export function parseTracestate(header: string | null | undefined): string | undefined {
  if (header === null || header === undefined) return undefined;
  const value = header.trim();
  if (value === "" || value.length > MAX_TRACESTATE_CHARS) return undefined;
  const keys = new Set<string>();
  for (const raw of value.split(",")) {
    const member = raw.trim();
    // Empty members (`a=1,,b=2`) are allowed and do not count.
    if (member === "") continue;
    const eq = member.indexOf("=");
    if (eq <= 0) return undefined;
    const key = member.slice(0, eq);
    if (!KEY.test(key) || !VALUE.test(member.slice(eq + 1)) || keys.has(key)) return undefined;
    keys.add(key);
    if (keys.size > MAX_TRACESTATE_MEMBERS) return undefined;
  }
  return keys.size > 0 ? value : undefined;
}

/** `bytes` random bytes as lowercase hex, never all zero (an all-zero id is invalid). */
function randomId(bytes: number, random: RandomBytes): string {
  const buf = new Uint8Array(bytes);
  // All zero has a 2^-64 chance at worst; a source that keeps giving it (a broken one) gets a 1 in its last byte.
  for (let i = 0; i < 4; i++) {
    random(buf);
    if (buf.some((b) => b !== 0)) return bytesToHex(buf);
  }
  buf[bytes - 1] = 1;
  return bytesToHex(buf);
}

/** A new span id: 16 lowercase hex characters, not all zero. */
export function newSpanId(random: RandomBytes): string {
  return randomId(8, random);
}

/** A new trace id: 32 lowercase hex characters, not all zero. */
export function newTraceId(random: RandomBytes): string {
  return randomId(16, random);
}

/** Where a request's trace comes from: the client's (continued) or warmpath's (new). */
export interface IncomingTrace extends TraceContext {
  /** The client sent a valid `traceparent`: `spanId` is its parent span's. */
  continued: boolean;
  /** The client sent a `traceparent` that was not valid (replaced by a new trace). */
  invalid: boolean;
}

/**
 * The trace a request belongs to: the client's when its `traceparent` is valid (its `tracestate`
 * with it, if valid), else a new one (sampled: `sampledByDefault`, default true; no parent span,
 * `spanId` empty; any `tracestate` dropped, as the spec asks when the parent is not used).
 */
export function incomingTrace(
  traceparent: string | null | undefined,
  tracestate: string | null | undefined,
  random: RandomBytes,
  sampledByDefault = true,
): IncomingTrace {
  const parent = parseTraceparent(traceparent);
  if (parent) {
    // Only the sampled bit is defined at level 1; the rest are passed on as zero (spec, 3.2.2.5).
    return { ...parent, flags: parent.flags & SAMPLED_FLAG, state: parseTracestate(tracestate), continued: true, invalid: false };
  }
  return {
    traceId: newTraceId(random),
    spanId: "",
    flags: sampledByDefault ? SAMPLED_FLAG : 0,
    state: undefined,
    continued: false,
    invalid: traceparent !== null && traceparent !== undefined,
  };
}

/** A `traceparent` header (version 00) naming `spanId` as the receiver's parent. */
export function formatTraceparent(traceId: string, spanId: string, flags: number): string {
  return `${TRACE_VERSION}-${traceId}-${spanId}-${byteHex(flags)}`;
}

/** Whether trace-flags say the trace is sampled. */
export function isSampled(flags: number): boolean {
  return (flags & SAMPLED_FLAG) !== 0;
}
