/** A shed request's refusal (src/core/region/refusals.ts): what it says and carries, whatever the prediction. */
import { describe, expect, it } from "vitest";
import { shedRefusal } from "../../src/core/region/refusals.ts";
import type { RouteRequest } from "../../src/contracts/routing.ts";

const req: RouteRequest = { requestId: "r1", model: "m", hashes: ["0123456789abcdef"], promptTokens: 1_000, spentMs: 200 };
const at = { priority: "standard" as const, objectiveMs: 1_000, queuedMs: 0, retryAfterSeconds: 3 };

describe("shedRefusal", () => {
  it("says and carries a finite prediction, and the objective left for the next region", () => {
    const r = shedRefusal("us", req, "objective", { ...at, estimatedTtftMs: 4_615.4 });
    expect(r.message).toContain("within its 1000 ms objective");
    expect(r.message).toContain("its first token predicted in 4615 ms");
    expect(r.estimatedTtftMs).toBe(4_615.4);
    expect(r.waitSeconds).toBeCloseTo(0.8, 9);
    expect(r.retryAfterSeconds).toBe(3);
  });

  it("says never for a prediction of never, and carries no number that JSON would turn into null", () => {
    const r = shedRefusal("us", req, "objective", { ...at, estimatedTtftMs: Number.POSITIVE_INFINITY });
    expect(r.message).not.toMatch(/Infinity|NaN/);
    expect(r.message).toContain("no node is predicted to start it at all");
    expect("estimatedTtftMs" in r).toBe(false);
    expect(JSON.parse(JSON.stringify(r))).toEqual(r);
  });

  it("says nothing of a prediction that is not a number of ms or never (NaN, -Infinity)", () => {
    for (const estimatedTtftMs of [Number.NaN, Number.NEGATIVE_INFINITY]) {
      const r = shedRefusal("us", req, "objective", { ...at, estimatedTtftMs });
      expect(r.message).toMatch(/even after the queue$/);
      expect("estimatedTtftMs" in r).toBe(false);
    }
  });

  it("says nothing of a prediction it was not given", () => {
    const r = shedRefusal("us", req, "objective", at);
    expect(r.message).toMatch(/even after the queue$/);
    expect("estimatedTtftMs" in r).toBe(false);
  });

  it("names the wait of a request shed from the queue, which has used its objective", () => {
    const r = shedRefusal("us", req, "deadline", { ...at, queuedMs: 900 });
    expect(r.message).toContain("its deadline passed after 900 ms in the queue");
    expect(r.waitSeconds).toBe(0);
  });
});
