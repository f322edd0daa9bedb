/**
 * Every request answered without a node leaves a line and a metric (src/edge/middleware/refusal-log.ts),
 * never the key or the body, and a flood's lines are bounded.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { LINES_PER_SECOND, recordRefusal, type RefusalLine } from "../../../src/edge/middleware/refusal-log.ts";
import { ACME_KEY, TEST_ADMIN_TOKEN } from "../../fixtures/config.ts";
import { call, chat } from "../../helpers.ts";

const lines = (spy: { mock: { calls: unknown[][] } }) =>
  spy.mock.calls.map((c) => {
    try {
      return JSON.parse(String(c[0])) as Record<string, unknown>;
    } catch {
      return {};
    }
  });

afterEach(() => vi.restoreAllMocks());

describe("refusal lines", () => {
  it("writes one line per refusal before routing, found by its x-request-id, without the key or the body", async () => {
    const spy = vi.spyOn(console, "log");
    const cases = [
      {
        res: await chat({ model: "nope", messages: [{ role: "user", content: "secret body 91c2" }] }),
        status: 404,
        code: "model_not_found",
        tenant: "acme",
      },
      { res: await chat({ model: "m-us" }), status: 400, code: "invalid_request", tenant: "acme" },
      {
        res: await chat({ model: "m-us", messages: [] }, { key: "sk-wrong-key-3f9e" }),
        status: 401,
        code: "invalid_api_key",
        tenant: undefined,
      },
      { res: await call("/v1/nowhere"), status: 404, code: "route_not_found", tenant: undefined },
    ];
    for (const { res, status, code, tenant } of cases) {
      expect(res.status).toBe(status);
      await res.arrayBuffer();
      const id = res.headers.get("x-request-id");
      const found = lines(spy).filter((l) => l.event === "refusal" && l.request_id === id);
      expect(found).toHaveLength(1);
      expect(found[0]).toMatchObject({ status, code });
      expect(found[0]!.tenant).toBe(tenant);
    }
    for (const c of spy.mock.calls.map((c) => String(c[0]))) {
      expect(c).not.toContain("secret body");
      expect(c).not.toContain("sk-wrong-key");
      expect(c).not.toContain(ACME_KEY);
    }
  });

  it("counts them by status and code in /metrics", async () => {
    const res = await chat({ model: "nope", messages: [{ role: "user", content: "x" }] });
    await res.arrayBuffer();
    const text = await (await call("/metrics", { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })).text();
    const line = text.split("\n").find((l) => l.startsWith('warmpath_edge_refusals_total{status="404",code="model_not_found"}'));
    expect(Number(line?.split(" ").at(-1))).toBeGreaterThanOrEqual(1);
    // Failovers exist as series before the first one.
    expect(text).toMatch(/warmpath_failovers_total\{region="us",from="eu"\} \d+/);
  });

  it("bounds a flood's lines: past the bound a second, one summary line says how many", () => {
    const spy = vi.spyOn(console, "log");
    const line: RefusalLine = {
      event: "refusal",
      request_id: "r",
      method: "POST",
      route: "/v1/chat/completions",
      status: 401,
      type: "authentication_error",
      code: "flood_test",
      duration_ms: 0,
    };
    // Past any window this isolate's earlier refusals opened.
    const t0 = Date.now() + 10_000;
    for (let i = 0; i < 500; i++) recordRefusal(line, t0 + i, undefined);
    recordRefusal(line, t0 + 1_500, undefined);
    const written = lines(spy);
    expect(written.filter((l) => l.code === "flood_test")).toHaveLength(LINES_PER_SECOND + 1);
    const summary = written.find((l) => l.event === "refusals_suppressed")!;
    expect((summary.counts as Record<string, number>)["401 flood_test"]).toBe(500 - LINES_PER_SECOND);
  });
});
