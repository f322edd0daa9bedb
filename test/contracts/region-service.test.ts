/** The edge -> region worker dispatch message's framing (src/contracts/region-service.ts). */
import { describe, expect, it } from "vitest";
import { MAX_DISPATCH_META_BYTES, decodeDispatch, encodeDispatch, type DispatchRequest } from "../../src/contracts/region-service.ts";

const meta = { requestId: "r", hashes: ["0123456789abcdef"] } as unknown as DispatchRequest;

describe("a dispatch message", () => {
  it("carries the meta and the body byte for byte", () => {
    const body = new Uint8Array([0, 1, 2, 255, 0x7b]);
    const decoded = decodeDispatch(encodeDispatch(meta, body));
    expect(decoded.ok).toBe(true);
    if (!decoded.ok) return;
    expect(decoded.meta).toEqual(meta);
    expect([...decoded.body]).toEqual([...body]);
  });

  it("is refused when its length prefix is short, out of bounds or its meta is not JSON", () => {
    expect(decodeDispatch(new Uint8Array(3)).ok).toBe(false);
    const over = new Uint8Array(8);
    new DataView(over.buffer).setUint32(0, MAX_DISPATCH_META_BYTES + 1);
    expect(decodeDispatch(over).ok).toBe(false);
    const past = new Uint8Array(8);
    new DataView(past.buffer).setUint32(0, 5);
    expect(decodeDispatch(past).ok).toBe(false);
    const notJson = new Uint8Array([0, 0, 0, 2, 0x7b, 0x7b]);
    expect(decodeDispatch(notJson)).toEqual({ ok: false, message: "dispatch meta is not JSON" });
  });
});
