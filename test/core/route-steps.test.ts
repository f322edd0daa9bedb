/** The pure steps of RegionRouter.route: hold-for-others.ts, refusals.ts and considered.ts (src/core/region/). */
import { describe, expect, it } from "vitest";
import type { Candidate } from "../../src/core/policies/types.ts";
import type { NodeEntry } from "../../src/core/region/node-table.ts";
import { considered, spilledPast } from "../../src/core/region/considered.ts";
import { holdForOthers, shareNodes, type CandidateField } from "../../src/core/region/hold-for-others.ts";
import { overShareRefusal, saturatedRefusal } from "../../src/core/region/refusals.ts";
import { rateLimitOf } from "../../src/core/region/rate-budget.ts";

const candidate = (id: string, over: Partial<Candidate> = {}): Candidate => ({
  id,
  matchBlocks: 0,
  matchTokens: 0,
  uncachedTokens: 1_000,
  workAheadTokens: 0,
  recentPrefillTokens: 0,
  prefillRate: 10_000,
  inflight: 0,
  dispatched: 0,
  lastDispatchAt: 0,
  activeTokens: 0,
  queuedPrefillTokens: 0,
  activeBlocks: 0,
  activeMatchBlocks: 0,
  indexBlocks: 0,
  kvCapacityTokens: 100_000,
  running: 0,
  waiting: 0,
  kvUsage: 0,
  ...over,
});
/** Only what the steps read of a node entry: its last report. */
const entry = (at?: number) => ({ load: { lastReport: at === undefined ? undefined : { at } } }) as unknown as NodeEntry;
const field = (...cs: Candidate[]): CandidateField => ({ candidates: cs, eligible: cs.map(() => entry()) });
const req = { requestId: "x", model: "m", hashes: [], promptTokens: 1_000 };

describe("hold for others", () => {
  const f = field(candidate("a"), candidate("b", { matchTokens: 600 }), candidate("c"));

  it("tells the fair share each candidate's wait and whether it holds most of the prompt", () => {
    const nodes = shareNodes([candidate("a", { workAheadTokens: 5_000, matchTokens: 500 })], 1_000);
    expect(nodes).toEqual([{ id: "a", waitSeconds: 0.5, prefillRate: 10_000, holdsPrompt: true }]);
  });

  it("keeps a heavy tenant off the held nodes unless one holds most of its prompt", () => {
    const out = holdForOthers(f, { ok: true, reserved: new Set(["a", "b"]) }, undefined, 1_000);
    expect(out.candidates.map((c) => c.id)).toEqual(["b", "c"]);
    expect(out.eligible).toHaveLength(2);
  });

  it("sends a light tenant to the held nodes", () => {
    const out = holdForOthers(f, { ok: true, reserved: undefined, preferred: new Set(["c"]) }, undefined, 1_000);
    expect(out.candidates.map((c) => c.id)).toEqual(["c"]);
  });

  it("never narrows a follow-up whose stored response is on a candidate, and leaves an unnarrowed field as it is", () => {
    expect(holdForOthers(f, { ok: true, reserved: new Set(["a"]) }, "a", 1_000)).toBe(f);
    expect(holdForOthers(f, { ok: true, reserved: undefined }, undefined, 1_000)).toBe(f);
  });
});

describe("refusals", () => {
  it("a saturated region says which bound it is past and what to beat", () => {
    expect(saturatedRefusal("r", req, 40, 30)).toEqual({
      ok: false,
      reason: "saturated",
      message: "region r is saturated: the shortest prefill queue is 40.0 s",
      retryAfterSeconds: 10,
      waitSeconds: 40,
    });
    const failover = saturatedRefusal("r", { ...req, waitToBeatSeconds: 2, failoverFrom: "eu" }, 3.5, 30);
    expect(failover.message).toBe("region r cannot start it sooner than eu: its shortest prefill queue is 3.5 s");
    expect(failover.retryAfterSeconds).toBe(2);
  });

  it("an over-share refusal names the tenant's share and the nodes held for others", () => {
    const r = overShareRefusal("r", "t", { ok: false, retryAfterSeconds: 3, shareOfQueue: 0.8, queuedTokens: 1, reserved: 2 });
    expect(r.message).toBe(
      "tenant t sent 80% of region r's recent prefill, over its fair share, and its queue is full (2 of its nodes held for the other tenants)",
    );
    expect(r.retryAfterSeconds).toBe(3);
  });

  it("a tenant without limits reports none", () => {
    expect(rateLimitOf({ ok: true, requests: undefined, tokens: undefined })).toBeUndefined();
  });
});

describe("considered", () => {
  it("shows the soonest candidates first, and the chosen one even past MAX_CONSIDERED", () => {
    const cs = Array.from({ length: 10 }, (_, i) => candidate(`n${i}`, { workAheadTokens: i * 1_000 }));
    const shown = considered(
      cs,
      cs.map(() => entry(10)),
      9,
      25,
    );
    expect(shown[0]).toMatchObject({ node: "n0", estimatedTtftMs: 100, reportAgeMs: 15 });
    expect(shown.at(-1)!.node).toBe("n9");
    expect(
      considered(
        cs,
        cs.map(() => entry()),
        -1,
        0,
      ).some((c) => c.node === "n9"),
    ).toBe(false);
  });
});

describe("a choice among the nodes that meet the deadline, as the log explains it (spilledPast)", () => {
  const warm = candidate("warm", { matchBlocks: 8 });
  const cool = candidate("cool", { matchBlocks: 3 });
  const cold = candidate("cold");

  it("a prefix hit or a cold spread onto a node holding less than one left out for its queue is a hot spill", () => {
    expect(spilledPast({ index: 0, decision: "prefix-hit" }, [cool, cold], [warm, cool, cold])).toEqual({
      index: 0,
      decision: "hot-spill",
    });
    expect(spilledPast({ index: 1, decision: "cold-spread" }, [cool, cold], [warm, cool, cold])).toEqual({
      index: 1,
      decision: "hot-spill",
    });
  });

  it("is left as the policy said when the chosen node holds the most, or the decision is of another kind", () => {
    expect(spilledPast({ index: 0, decision: "prefix-hit" }, [warm, cold], [warm, cool, cold])).toEqual({
      index: 0,
      decision: "prefix-hit",
    });
    expect(spilledPast({ index: 0, decision: "session" }, [cool], [warm, cool])).toEqual({ index: 0, decision: "session" });
  });
});
