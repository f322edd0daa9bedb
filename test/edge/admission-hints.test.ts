/** The edge's reading of a request's class and objective (src/edge/admission-hints.ts). */
import { describe, expect, it } from "vitest";
import { admissionAsk } from "../../src/edge/admission-hints.ts";
import { ApiError } from "../../src/http/errors.ts";

const request = (headers: Record<string, string>) => new Request("https://x/v1/chat/completions", { headers });
const standard = { priority: "standard" as const, ttft_objective_ms: undefined };

function refusal(f: () => unknown): { status: number; code: string; param: string | null | undefined } {
  try {
    f();
  } catch (e) {
    if (e instanceof ApiError) return { status: e.status, code: e.code, param: e.param };
    throw e;
  }
  throw new Error("no error");
}

describe("admissionAsk", () => {
  it("takes the tenant's class and objective when the request says nothing", () => {
    expect(admissionAsk(request({}), { priority: "interactive", ttft_objective_ms: 2_000 })).toEqual({
      priority: "interactive",
      tenantObjectiveMs: 2_000,
      requestObjectiveMs: undefined,
    });
  });

  it("lets a request lower its class and ask for its own objective", () => {
    expect(admissionAsk(request({ "x-warmpath-priority": " Batch ", "x-warmpath-ttft-objective-ms": "1500" }), standard)).toEqual({
      priority: "batch",
      tenantObjectiveMs: undefined,
      requestObjectiveMs: 1_500,
    });
  });

  it("refuses a class above the tenant's (403) and a class or objective it cannot read (400), naming the header", () => {
    expect(refusal(() => admissionAsk(request({ "x-warmpath-priority": "interactive" }), standard))).toEqual({
      status: 403,
      code: "priority_not_allowed",
      param: "x-warmpath-priority",
    });
    expect(refusal(() => admissionAsk(request({ "x-warmpath-priority": "urgent" }), standard))).toMatchObject({
      status: 400,
      code: "invalid_priority",
    });
    for (const bad of ["0", "-5", "1e3", "2.5", "3600001", "", "soon"]) {
      expect(refusal(() => admissionAsk(request({ "x-warmpath-ttft-objective-ms": bad }), standard))).toEqual({
        status: 400,
        code: "invalid_ttft_objective",
        param: "x-warmpath-ttft-objective-ms",
      });
    }
  });
});
