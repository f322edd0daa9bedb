/**
 * The decision log (src/proxy/decision-log.ts): which lines are written at a sampling rate, the
 * Analytics Engine data point's schema, and, through the worker, that every request reaches a
 * bound dataset with ids and figures only.
 */
import { env } from "cloudflare:workers";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import worker from "../../src/index.ts";
import { dataPoint, shouldLog, type DecisionLine } from "../../src/proxy/decision-log.ts";
import { ACME_KEY } from "../fixtures/config.ts";
import { BASE, CF_VIRGINIA, registerAll, withRegionService } from "../helpers.ts";

const line = (over: Partial<DecisionLine> = {}): DecisionLine => ({
  event: "request",
  request_id: "req-1",
  tenant: "acme",
  model: "m",
  status: 200,
  region: "us",
  node: "n1",
  decision: "prefix-hit",
  policy: "warmpath",
  prefix_match_blocks: 3,
  prefix_total_blocks: 4,
  prompt_tokens_estimated: 512,
  predicted_cached_tokens: 384,
  attempts: [{ region: "us", node: "n1", outcome: "ok" }],
  first_byte_ms: 40,
  duration_ms: 900,
  end: "ok",
  usage: { promptTokens: 520, cachedTokens: 384, completionTokens: 30 },
  measured_cached_tokens: 384,
  ...over,
});

/** A fixed sequence of draws, repeated. */
const draws = (...values: number[]) => {
  let i = 0;
  return () => values[i++ % values.length]!;
};

describe("decision log sampling", () => {
  it("writes clean answers at the configured rate", () => {
    const random = draws(0.05, 0.3, 0.6, 0.95);
    const written = Array.from({ length: 400 }, () => shouldLog(line(), 0.25, random)).filter(Boolean).length;
    expect(written).toBe(100);
    expect(shouldLog(line(), 0, () => 0)).toBe(false);
    expect(shouldLog(line(), 1, () => 0.999)).toBe(true);
  });

  it("always writes what did not end cleanly, whatever the rate", () => {
    const never = () => 1;
    expect(shouldLog(line({ status: 400 }), 0, never)).toBe(true);
    expect(shouldLog(line({ status: 503, end: undefined }), 0, never)).toBe(true);
    expect(shouldLog(line({ end: "stream-error" }), 0, never)).toBe(true);
    expect(shouldLog(line({ end: "cancelled" }), 0, never)).toBe(true);
  });
});

describe("Analytics Engine data point", () => {
  it("keeps the documented positions, sampled by tenant", () => {
    const p = dataPoint(line());
    expect(p.indexes).toEqual(["acme"]);
    expect(p.blobs).toEqual(["acme", "us", "n1", "m", "prefix-hit", "ok", "warmpath", ""]);
    expect(p.doubles).toEqual([200, 512, 384, 1, 520, 384, 30, 40, 900, 3, 4, 1]);
  });

  it("says why a node's usage was refused (blob8), and always logs that request's line", () => {
    const rejected = line({
      usage: undefined,
      measured_cached_tokens: null,
      usage_rejected: { reason: "over-max-tokens", limit: 21, reported: { promptTokens: 9, completionTokens: 9e15 } },
    });
    expect(dataPoint(rejected).blobs![7]).toBe("over-max-tokens");
    expect(dataPoint(rejected).doubles![6]).toBe(0); // no completion tokens taken from it
    expect(shouldLog(rejected, 0, () => 0.99)).toBe(true);
    expect(shouldLog(line(), 0, () => 0.99)).toBe(false);
  });

  it("says when the node did not report cached tokens rather than writing zero as measured", () => {
    const p = dataPoint(line({ usage: { promptTokens: 520, completionTokens: 30 }, measured_cached_tokens: null }));
    expect(p.doubles!.slice(3, 7)).toEqual([0, 0, 0, 30]);
    const none = dataPoint(
      line({
        status: 503,
        region: undefined,
        node: undefined,
        decision: undefined,
        policy: undefined,
        end: undefined,
        usage: undefined,
        first_byte_ms: undefined,
      }),
    );
    expect(none.blobs).toEqual(["acme", "", "", "m", "none", "none", "", ""]);
    expect(none.doubles![7]).toBe(-1); // no first byte
  });

  it("receives one point per request from the worker, with no prompt and no key", async () => {
    await registerAll([{ id: "ae-1", region: "us", models: ["m-meter"] }]);
    const points: AnalyticsEngineDataPoint[] = [];
    const dataset: AnalyticsEngineDataset = { writeDataPoint: (p) => void points.push(p ?? {}) };
    const secret = "a confidential prompt 91c2e";
    const send = async (model: string, region?: string) => {
      const ctx = createExecutionContext();
      const res = await worker.fetch(
        new Request(`${BASE}/v1/chat/completions`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            authorization: `Bearer ${ACME_KEY}`,
            ...(region ? { "x-warmpath-region": region } : {}),
          },
          body: JSON.stringify({ model, messages: [{ role: "user", content: secret }] }),
          cf: CF_VIRGINIA,
        } as RequestInit) as Request<unknown, IncomingRequestCfProperties>,
        withRegionService({ ...env, ANALYTICS: dataset }, ctx),
        ctx,
      );
      await res.arrayBuffer();
      await waitOnExecutionContext(ctx);
      return res;
    };
    const log = vi.spyOn(console, "log");
    try {
      const ok = await send("m-meter", "us");
      expect(ok.status).toBe(200);
      expect(points).toHaveLength(1);
      expect(points[0]!.blobs!.slice(0, 5)).toEqual(["acme", "us", "ae-1", "m-meter", ok.headers.get("x-warmpath-decision")]);
      expect(points[0]!.doubles![0]).toBe(200);
      expect(points[0]!.doubles![3]).toBe(1); // the fake node reports cached tokens
      // A request no node can take is a point too (status 503, no node).
      const none = await send("m-none");
      expect(none.status).toBe(503);
      expect(points).toHaveLength(2);
      expect(points[1]!.blobs!.slice(0, 3)).toEqual(["acme", "", ""]);
      expect(points[1]!.doubles![0]).toBe(503);
      for (const text of [JSON.stringify(points), ...log.mock.calls.map((c) => String(c[0]))]) {
        expect(text).not.toContain("confidential");
        expect(text).not.toContain(ACME_KEY);
      }
    } finally {
      log.mockRestore();
    }
  });
});
