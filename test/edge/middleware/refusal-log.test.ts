/**
 * Every request answered without a node leaves a line and a metric (src/edge/middleware/refusal-log.ts),
 * whatever refused it (the edge, or a region: src/edge/forward.ts), exactly once each, never the
 * key or the body, and a flood's lines are bounded.
 */
import { env } from "cloudflare:workers";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../../../src/edge/app.ts";
import { edgeRefusalTotals, LINES_PER_SECOND, recordRefusal, type RefusalLine } from "../../../src/edge/middleware/refusal-log.ts";
import type { RegionRefusal } from "../../../src/contracts/region-service.ts";
import { ALL_REGIONS_BINDING, regionBindingName } from "../../../src/contracts/topology.ts";
import { refusalResponse } from "../../../src/region/app.ts";
import { ACME_KEY, TEST_ADMIN_TOKEN } from "../../fixtures/config.ts";
import { BASE, call, chat, CF_FRANKFURT, withRegionService } from "../../helpers.ts";

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
    const line = text
      .split("\n")
      .find((l) => l.startsWith('warmpath_edge_refusals_total{status="404",code="model_not_found",reason="unknown-model"}'));
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
      reason: "authentication",
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

/** This isolate's refusal counts by `status code reason`. */
const counts = () => new Map(edgeRefusalTotals().map((t) => [`${t.status} ${t.code} ${t.reason}`, t.count]));
const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/** A request through the edge with every region's worker replaced by `region` (a refusal, or unreachable). */
async function throughRegions(region: (() => Promise<Response>) | undefined, path: string, body: object) {
  const ctx = createExecutionContext();
  const bound = withRegionService(env, ctx) as unknown as Record<string, unknown>;
  if (region) {
    const worker = { fetch: region };
    bound[ALL_REGIONS_BINDING] = worker;
    for (const name of ["eu", "us", "ap", "rr", "shd", "sat"]) bound[regionBindingName(name)] = worker;
  }
  const res = await createApp().fetch(
    new Request(`${BASE}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}` },
      body: JSON.stringify(body),
      cf: CF_FRANKFURT,
    } as RequestInit) as Request<unknown, IncomingRequestCfProperties>,
    bound as unknown as Env,
    ctx,
  );
  await res.text();
  await waitOnExecutionContext(ctx);
  return res;
}

const refusing =
  (reason: RegionRefusal["reason"], more: Partial<RegionRefusal> = {}) =>
  async () =>
    refusalResponse({
      reason,
      message: `refused: ${reason}`,
      retryAfterSeconds: 2,
      attempts: [{ region: "eu", outcome: reason }],
      ...more,
    });

describe("every refusal counted and logged once, whatever refused it (issue 31)", () => {
  const chatBody = { model: "m-shared", messages: [{ role: "user", content: "refuse me" }] };
  const cases: Array<{
    name: string;
    region?: () => Promise<Response>;
    path?: string;
    body?: object;
    status: number;
    code: string;
    reason: string;
    /** What the line carries beyond the common fields. */
    line?: Record<string, unknown>;
  }> = [
    { name: "a region's rate limit", region: refusing("rate-limited"), status: 429, code: "rate_limit_exceeded", reason: "rate-limited" },
    { name: "a budget", region: refusing("over-budget"), status: 429, code: "insufficient_quota", reason: "over-budget" },
    { name: "over its share", region: refusing("over-share"), status: 429, code: "tenant_over_share", reason: "over-share" },
    {
      name: "an objective out of reach",
      region: refusing("shed", { shed: "objective", objectiveMs: 1000, queuedMs: 0, estimatedTtftMs: 2400.4 }),
      status: 429,
      code: "objective_unreachable",
      reason: "shed",
      // The prediction the objective could not cover: why it was shed.
      line: { objective_ms: 1000, queued_ms: 0, estimated_ttft_ms: 2400 },
    },
    { name: "saturated regions", region: refusing("saturated"), status: 503, code: "no_capacity", reason: "saturated" },
    { name: "no node", region: refusing("no-node"), status: 503, code: "no_capacity", reason: "no-node" },
    { name: "failing nodes", region: refusing("failed"), status: 503, code: "no_capacity", reason: "failed" },
    {
      name: "no region reachable",
      region: () => Promise.reject(new Error("connection refused")),
      status: 503,
      code: "region_unavailable",
      reason: "region-unavailable",
    },
    {
      name: "a stored response not the tenant's",
      region: refusing("unknown-response"),
      path: "/v1/responses",
      body: { model: "m-shared", input: "x", previous_response_id: "resp_other" },
      status: 400,
      code: "previous_response_not_found",
      reason: "unknown-response",
    },
    { name: "edge validation", body: { model: "m-shared" }, status: 400, code: "invalid_request", reason: "invalid-request" },
    {
      name: "an unknown model",
      body: { model: "nope", messages: [{ role: "user", content: "x" }] },
      status: 404,
      code: "model_not_found",
      reason: "unknown-model",
    },
  ];

  for (const c of cases) {
    it(`${c.name}: ${c.status} ${c.code}, counted once as ${c.reason}, one refusal line, no decision line`, async () => {
      const spy = vi.spyOn(console, "log");
      const before = counts();
      const res = await throughRegions(c.region, c.path ?? "/v1/chat/completions", c.body ?? chatBody);
      expect(res.status).toBe(c.status);
      const after = counts();
      const key = `${c.status} ${c.code} ${c.reason}`;
      expect((after.get(key) ?? 0) - (before.get(key) ?? 0)).toBe(1);
      expect(sum(after) - sum(before)).toBe(1);
      const id = res.headers.get("x-request-id");
      const mine = lines(spy).filter((l) => l.request_id === id);
      expect(mine.filter((l) => l.event === "refusal")).toHaveLength(1);
      expect(mine.filter((l) => l.event === "request")).toHaveLength(0);
      const refusal = mine.find((l) => l.event === "refusal")!;
      expect(refusal).toMatchObject({ status: c.status, code: c.code, reason: c.reason, tenant: "acme" });
      if (c.region) expect(refusal).toMatchObject({ model: "m-shared", attempts: expect.any(Array) });
      if (c.line) expect(refusal).toMatchObject(c.line);
      for (const call of spy.mock.calls) expect(String(call[0])).not.toContain(ACME_KEY);
    });
  }

  it("names the client's own response id in the 400, as OpenAI does", async () => {
    const ctx = createExecutionContext();
    const bound = withRegionService(env, ctx) as unknown as Record<string, unknown>;
    const worker = { fetch: refusing("unknown-response") };
    bound[ALL_REGIONS_BINDING] = worker;
    for (const name of ["eu", "us"]) bound[regionBindingName(name)] = worker;
    const res = await createApp().fetch(
      new Request(`${BASE}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}` },
        body: JSON.stringify({ model: "m-shared", input: "x", previous_response_id: "resp_abc" }),
        cf: CF_FRANKFURT,
      } as RequestInit) as Request<unknown, IncomingRequestCfProperties>,
      bound as unknown as Env,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(await res.json()).toEqual({
      error: {
        message: "Previous response with id 'resp_abc' not found.",
        type: "invalid_request_error",
        param: "previous_response_id",
        code: "previous_response_not_found",
      },
    });
  });

  it("answers a capacity refusal, not a 400, when a region that may hold the response could not be asked", async () => {
    let n = 0;
    // The nearest region does not hold it; the next cannot be reached (it may).
    const res = await throughRegions(
      () => (n++ === 0 ? refusing("unknown-response")() : Promise.reject(new Error("connection refused"))),
      "/v1/responses",
      { model: "m-shared", input: "x", previous_response_id: "resp_maybe" },
    );
    expect(res.status).toBe(503);
  });
});
