/** Lowercase hex (src/core/hex.ts): bytes, one byte, and a string's SHA-256. */
import { describe, expect, it } from "vitest";
import { byteHex, bytesToHex, sha256Hex } from "../../src/core/hex.ts";

describe("hex", () => {
  it("formats every byte value as two lowercase digits, in order", () => {
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    const text = bytesToHex(all);
    expect(text).toHaveLength(512);
    expect(text.slice(0, 8)).toBe("00010203");
    expect(text.slice(-4)).toBe("feff");
    expect(bytesToHex(all.buffer)).toBe(text);
    expect(bytesToHex(new Uint8Array(0))).toBe("");
    // A view into a larger buffer is its own bytes, not the buffer's.
    expect(bytesToHex(all.subarray(10, 12))).toBe("0a0b");
  });

  it("formats one byte, keeping its low 8 bits", () => {
    expect(byteHex(0)).toBe("00");
    expect(byteHex(0xab)).toBe("ab");
    expect(byteHex(0x1ff)).toBe("ff");
  });

  it("hashes a string's UTF-8 bytes with SHA-256 (FIPS 180-2's test vector)", async () => {
    expect(await sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(await sha256Hex("é")).toBe(bytesToHex(await crypto.subtle.digest("SHA-256", new Uint8Array([0xc3, 0xa9]))));
  });
});
