/** A prompt's prefix block hashes (src/contracts/block-hashes.ts), as the route call and the dispatch message check them. */
import { describe, expect, it } from "vitest";
import { BLOCK_HASH_CHARS, MAX_BLOCK_HASHES, blockHashesSchema } from "../../src/contracts/block-hashes.ts";
import { routeRequestSchema } from "../../src/contracts/routing.ts";
import { dispatchRequestSchema } from "../../src/contracts/region-service.ts";

const hash = (i: number) => i.toString(16).padStart(BLOCK_HASH_CHARS, "0");
const hashes = (n: number) => Array.from({ length: n }, (_, i) => hash(i));

describe("blockHashesSchema", () => {
  it("takes none, one, and the most a request carries, as they are", () => {
    for (const n of [0, 1, MAX_BLOCK_HASHES]) {
      const given = hashes(n);
      expect(blockHashesSchema.parse(given)).toEqual(given);
    }
  });

  it("refuses one hash too many, a hash of another length, and anything but strings", () => {
    for (const bad of [
      hashes(MAX_BLOCK_HASHES + 1),
      [hash(1), "0123456789abcde"],
      [hash(1), "0123456789abcdef0"],
      [hash(1), 1234567890123456],
      [null],
      "0123456789abcdef",
      { 0: hash(0), length: 1 },
      undefined,
    ]) {
      const r = blockHashesSchema.safeParse(bad);
      expect(r.success, JSON.stringify(bad)?.slice(0, 60)).toBe(false);
    }
  });

  it("refuses a hole in the array (a structured clone keeps one), which reads as undefined", () => {
    const sparse = hashes(3);
    delete sparse[1];
    expect(blockHashesSchema.safeParse(sparse).success).toBe(false);
  });

  it("names the field and its bounds when a route call or a dispatch carries bad hashes", () => {
    const route = routeRequestSchema.safeParse({ requestId: "r", model: "m", hashes: ["short"], promptTokens: 1 });
    expect(route.success).toBe(false);
    expect(route.error?.issues[0]?.path).toEqual(["hashes"]);
    expect(route.error?.issues[0]?.message).toBe(`hashes: expected at most 4096 block hashes of 16 characters each`);
    const dispatch = dispatchRequestSchema.shape.hashes.safeParse(hashes(MAX_BLOCK_HASHES + 1));
    expect(dispatch.success).toBe(false);
  });
});
