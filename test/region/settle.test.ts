/**
 * Settling a placement (src/region/settle.ts): a session completed with the outcome, called at once
 * (a retry's next route follows it) and awaited by the request; a stateless placement's count taken
 * back; a failed completion said so, for the caller to bill another way; and an error of the
 * worker's own settling the placement before it goes on.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { CompletionOutcome, RouteSessionApi } from "../../src/contracts/region-object.ts";
import type { RegionContext } from "../../src/region/context.ts";
import type { Placed } from "../../src/region/call-node.ts";
import { settledIfThrown, settlePlacement } from "../../src/region/settle.ts";
import { chooseStateless, countStateless, forgetNodes, rememberNode } from "../../src/region/stateless.ts";

/** What settling reads of a request's context: its region's name and its `waitUntil`. */
function context(): { rc: RegionContext; waits: Promise<unknown>[] } {
  const waits: Promise<unknown>[] = [];
  const rc = {
    region: { config: { name: "r" } },
    ctx: { waitUntil: (p: Promise<unknown>) => void waits.push(p) },
  } as unknown as RegionContext;
  return { rc, waits };
}

/** A session recording its completions, or failing them as a restarted object's does. */
function session(fail?: "reject" | "throw"): RouteSessionApi & { outcomes: CompletionOutcome[] } {
  const outcomes: CompletionOutcome[] = [];
  return {
    outcomes,
    firstByte: () => {},
    complete: (outcome) => {
      outcomes.push(outcome);
      if (fail === "throw") throw new Error("object restarted");
      if (fail === "reject") return Promise.reject(new Error("object restarted")) as never;
      return true;
    },
  };
}

const placed = { nodeId: "a" } as Placed;
const KEY = "0123456789abcdef";

beforeEach(() => forgetNodes());
afterEach(() => vi.restoreAllMocks());

describe("settlePlacement", () => {
  it("completes the session at once with the outcome, kept alive by the request, and says the object took it", async () => {
    const { rc, waits } = context();
    const s = session();
    const settled = settlePlacement(rc, placed, s, { status: "failed", reason: "timeout" });
    // Before any await: a retry's route, made next, reaches the object after this completion.
    expect(s.outcomes).toEqual([{ status: "failed", reason: "timeout" }]);
    expect(waits).toHaveLength(1);
    expect(await settled).toBe(true);
  });

  it("says a completion the object did not take (a restarted object's session), logging it, whether it rejects or throws", async () => {
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    for (const fail of ["reject", "throw"] as const) {
      const { rc, waits } = context();
      expect(await settlePlacement(rc, placed, session(fail), { status: "cancelled" })).toBe(false);
      await Promise.all(waits);
    }
    expect(log.mock.calls.map(([line]) => JSON.parse(String(line)).event)).toEqual([
      "region_bookkeeping_error",
      "region_bookkeeping_error",
    ]);
  });

  it("takes a stateless placement's count back (no session): the node is within its load bound again", async () => {
    const { rc } = context();
    for (const id of ["a", "b", "c"]) rememberNode("r", id, `http://${id}`, "m", 0);
    const first = chooseStateless("r", "m", KEY, [], 1)!.nodeId;
    for (let i = 0; i < 3; i++) countStateless("r", first, 1);
    expect(chooseStateless("r", "m", KEY, [], 1)!.nodeId).not.toBe(first);
    for (let i = 0; i < 3; i++) expect(await settlePlacement(rc, { nodeId: first }, undefined, { status: "ok" })).toBe(false);
    expect(chooseStateless("r", "m", KEY, [], 1)!.nodeId).toBe(first);
  });
});

describe("settledIfThrown", () => {
  it("passes a step's result through and settles nothing", async () => {
    const { rc, waits } = context();
    const s = session();
    expect(await settledIfThrown(rc, placed, s, () => 7)).toBe(7);
    expect(s.outcomes).toEqual([]);
    expect(waits).toEqual([]);
  });

  it("settles a step's own error as cancelled, lets the node's body go, and throws the error on", async () => {
    const { rc, waits } = context();
    const s = session();
    let cancelled: unknown;
    const reader = new ReadableStream<Uint8Array>({ cancel: (why) => void (cancelled = why) }).getReader();
    const boom = new Error("could not build the node's body");
    await expect(settledIfThrown(rc, placed, s, () => Promise.reject(boom), reader)).rejects.toBe(boom);
    await Promise.all(waits);
    expect(s.outcomes).toEqual([{ status: "cancelled" }]);
    expect(cancelled).toBe(boom);
  });
});
