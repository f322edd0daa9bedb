import { describe, expect, it } from "vitest";
import {
  MAX_TRACESTATE_CHARS,
  MAX_TRACESTATE_MEMBERS,
  formatTraceparent,
  incomingTrace,
  isSampled,
  newSpanId,
  newTraceId,
  parseTraceparent,
  parseTracestate,
  type RandomBytes,
} from "../../src/core/trace-context.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
/** The specification's own example. */
const EXAMPLE = `00-${TRACE}-${PARENT}-01`;

/** Deterministic bytes: 1, 2, 3, ... */
function counting(): RandomBytes {
  let n = 0;
  return (b) => {
    for (let i = 0; i < b.length; i++) b[i] = ++n & 0xff;
  };
}
const zeros: RandomBytes = (b) => b.fill(0);

describe("traceparent", () => {
  it("reads the specification's example", () => {
    expect(parseTraceparent(EXAMPLE)).toEqual({ traceId: TRACE, spanId: PARENT, flags: 1 });
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-00`)?.flags).toBe(0);
    // Surrounding optional whitespace is not part of the value.
    expect(parseTraceparent(` ${EXAMPLE}\t`)?.traceId).toBe(TRACE);
  });

  it.each([
    ["missing", undefined],
    ["empty", ""],
    ["uppercase hex", `00-${TRACE.toUpperCase()}-${PARENT}-01`],
    ["all-zero trace id", `00-${"0".repeat(32)}-${PARENT}-01`],
    ["all-zero parent id", `00-${TRACE}-${"0".repeat(16)}-01`],
    ["short trace id", `00-${TRACE.slice(1)}-${PARENT}-01`],
    ["long parent id", `00-${TRACE}-${PARENT}0-01`],
    ["version ff", `ff-${TRACE}-${PARENT}-01`],
    ["version not hex", `0g-${TRACE}-${PARENT}-01`],
    ["flags not hex", `00-${TRACE}-${PARENT}-0x`],
    ["one-digit flags", `00-${TRACE}-${PARENT}-1`],
    ["version 00 with more fields", `${EXAMPLE}-extra`],
    ["wrong separators", `00_${TRACE}_${PARENT}_01`],
    ["non-hex in the id", `00-${TRACE.slice(0, 31)}z-${PARENT}-01`],
  ])("refuses %s", (_what, header) => {
    expect(parseTraceparent(header)).toBeUndefined();
  });

  it("reads a future version by its first four fields, and only if what follows starts a field", () => {
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-01`)).toEqual({ traceId: TRACE, spanId: PARENT, flags: 1 });
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-01-what-the-future-adds`)?.spanId).toBe(PARENT);
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-01x`)).toBeUndefined();
  });

  it("formats version 00 with two-digit flags, and round-trips", () => {
    expect(formatTraceparent(TRACE, PARENT, 1)).toBe(EXAMPLE);
    expect(formatTraceparent(TRACE, PARENT, 0x0f)).toBe(`00-${TRACE}-${PARENT}-0f`);
    expect(parseTraceparent(formatTraceparent(TRACE, PARENT, 3))).toEqual({ traceId: TRACE, spanId: PARENT, flags: 3 });
  });
});

describe("tracestate", () => {
  it("keeps a valid list verbatim, multi-tenant keys and empty members included", () => {
    expect(parseTracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")).toBe("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    expect(parseTracestate("tenant@vendor=v, other=x y")).toBe("tenant@vendor=v, other=x y");
    expect(parseTracestate("a=1,,b=2")).toBe("a=1,,b=2");
  });

  it.each([
    ["missing", undefined],
    ["empty", ""],
    ["only commas", ", ,"],
    ["a member without =", "rojo"],
    ["an empty key", "=v"],
    ["an uppercase key", "Rojo=1"],
    ["a value with a comma-free =", "a=b=c"],
    ["a repeated key", "a=1,a=2"],
    ["a non-ASCII value", "a=é"],
  ])("drops %s", (_what, header) => {
    expect(parseTracestate(header)).toBeUndefined();
  });

  it("is bounded: 32 members, 512 characters", () => {
    const members = (n: number) => Array.from({ length: n }, (_, i) => `k${i}=v`).join(",");
    expect(parseTracestate(members(MAX_TRACESTATE_MEMBERS))).toBe(members(32));
    expect(parseTracestate(members(MAX_TRACESTATE_MEMBERS + 1))).toBeUndefined();
    const long = `a=${"x".repeat(MAX_TRACESTATE_CHARS - 2)}`;
    expect(long.length).toBe(512);
    expect(parseTracestate(`a=${"x".repeat(250)},b=${"y".repeat(250)}`)).toBeDefined();
    expect(parseTracestate(`a=${"x".repeat(255)},b=${"y".repeat(255)}`)).toBeUndefined(); // 515 characters
  });
});

describe("ids and the incoming trace", () => {
  it("makes lowercase hex ids of the right length, never all zero", () => {
    const random = counting();
    expect(newTraceId(random)).toMatch(/^[0-9a-f]{32}$/);
    expect(newSpanId(random)).toMatch(/^[0-9a-f]{16}$/);
    expect(newSpanId(random)).not.toBe(newSpanId(random));
    // A source that only gives zeros still yields a valid id.
    expect(newSpanId(zeros)).toBe("0000000000000001");
    expect(parseTraceparent(formatTraceparent(newTraceId(zeros), newSpanId(zeros), 1))).toBeDefined();
  });

  it("continues a valid traceparent with its tracestate, keeping only the sampled flag", () => {
    const t = incomingTrace(`00-${TRACE}-${PARENT}-03`, "rojo=1", counting());
    expect(t).toMatchObject({ traceId: TRACE, spanId: PARENT, flags: 1, state: "rojo=1", continued: true, invalid: false });
    expect(incomingTrace(`00-${TRACE}-${PARENT}-00`, null, counting()).flags).toBe(0);
  });

  it("starts a new sampled trace without one, and replaces an invalid one (dropping its tracestate)", () => {
    const fresh = incomingTrace(null, "rojo=1", counting());
    expect(fresh).toMatchObject({ spanId: "", flags: 1, state: undefined, continued: false, invalid: false });
    expect(fresh.traceId).toMatch(/^[0-9a-f]{32}$/);
    const bad = incomingTrace(`00-${"0".repeat(32)}-${PARENT}-01`, "rojo=1", counting());
    expect(bad.traceId).not.toBe("0".repeat(32));
    expect(bad).toMatchObject({ continued: false, invalid: true, state: undefined });
    expect(isSampled(incomingTrace(undefined, undefined, counting(), false).flags)).toBe(false);
  });
});
