/**
 * The decision log (src/proxy/decision-log.ts): which lines are written at a sampling rate, the
 * Analytics Engine data point's schema, the bound on a node's own errors (never on answered
 * requests), and, through the worker, that every request reaches a bound dataset with ids and
 * figures only and that a client sending requests a node rejects cannot force a line each.
 */
import { env } from "cloudflare:workers";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it, vi } from "vitest";
import worker from "../../src/index.ts";
import { parseLogLine, type DecisionLine } from "../../src/contracts/decision-line.ts";
import { dataPoint, ERROR_LINES_PER_SECOND, errorLineBound, shouldLog } from "../../src/proxy/decision-log.ts";
import { LogLimiter } from "../../src/proxy/log-limit.ts";
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

describe("decision log bound", () => {
  it("never drops a line of an answered request; bounds a node's own errors per status, with a summary", () => {
    const summaries: string[] = [];
    const allow = errorLineBound(new LogLimiter("decisions_suppressed", ERROR_LINES_PER_SECOND, (l) => summaries.push(l)));
    const t = 1_000_000;
    // One second: 500 answered requests, 100 of a node's 400s and 30 of its 503s.
    const ok = Array.from({ length: 500 }, (_, i) => allow(line(), t + i)).filter(Boolean).length;
    const bad = Array.from({ length: 100 }, (_, i) => allow(line({ status: 400 }), t + i)).filter(Boolean).length;
    const failed = Array.from({ length: 30 }, (_, i) => allow(line({ status: 503 }), t + i)).filter(Boolean).length;
    expect([ok, bad, failed]).toEqual([500, ERROR_LINES_PER_SECOND, ERROR_LINES_PER_SECOND]);
    // Answered requests never enter the limiter: nothing of theirs is counted as suppressed.
    expect(summaries).toEqual([]);
    // The next second: the summary says how many of each status were not written, then lines flow again.
    expect(allow(line({ status: 400 }), t + 1_000)).toBe(true);
    expect(summaries.map((s) => JSON.parse(s))).toEqual([
      {
        event: "decisions_suppressed",
        window_ms: 1_000,
        counts: { "400": 100 - ERROR_LINES_PER_SECOND, "503": 30 - ERROR_LINES_PER_SECOND },
      },
    ]);
  });

  it("through the worker: a client sending requests its node rejects gets each answered, but not a log line each", async () => {
    await registerAll([{ id: "log-bad", region: "us", mode: "bad", models: ["m-log-bad"] }]);
    const points: AnalyticsEngineDataPoint[] = [];
    const dataset: AnalyticsEngineDataset = { writeDataPoint: (p) => void points.push(p ?? {}) };
    const send = async () => {
      const ctx = createExecutionContext();
      const res = await worker.fetch(
        new Request(`${BASE}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}` },
          body: JSON.stringify({ model: "m-log-bad", messages: [{ role: "user", content: "too long" }] }),
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
    const events = (event: string) =>
      log.mock.calls
        .map((c) => String(c[0]))
        .filter((l) => l.startsWith(`{"event":"${event}"`))
        .map((l) => JSON.parse(l));
    // The bound is per second of the worker's clock: held still (timers still run), so the flood is
    // one second however slowly a loaded machine serves it.
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      // Now (the node just reported: a clock far ahead would find its report stale).
      const second = Date.now();
      vi.setSystemTime(second);
      const flood = 60;
      const answers = await Promise.all(Array.from({ length: flood }, () => send()));
      // Every request answered with the node's own error, passed through, and one data point each.
      expect(answers.map((r) => r.status)).toEqual(Array(flood).fill(400));
      expect(answers.every((r) => r.headers.get("x-warmpath-node") === "log-bad")).toBe(true);
      expect(points).toHaveLength(flood);
      // The bound's lines in that second, however many were sent.
      expect(events("request").filter((l) => l.model === "m-log-bad")).toHaveLength(ERROR_LINES_PER_SECOND);
      expect(events("decisions_suppressed")).toEqual([]);
      // The next second, the next one is written with the summary of what was not.
      vi.setSystemTime(second + 1_000);
      expect((await send()).status).toBe(400);
      expect(events("request").filter((l) => l.model === "m-log-bad")).toHaveLength(ERROR_LINES_PER_SECOND + 1);
      expect(events("decisions_suppressed")).toEqual([
        { event: "decisions_suppressed", window_ms: 1_000, counts: { "400": flood - ERROR_LINES_PER_SECOND } },
      ]);
    } finally {
      vi.useRealTimers();
      log.mockRestore();
    }
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
      // The line written is the contract's (src/contracts/decision-line.ts), as its readers parse it.
      const written = log.mock.calls
        .map((c) => parseLogLine(String(c[0])))
        .find((p) => p?.json.event === "request" && p.json.request_id === ok.headers.get("x-request-id"));
      expect(written?.invalid).toBeUndefined();
      expect(written?.decision).toMatchObject({
        event: "request",
        tenant: "acme",
        model: "m-meter",
        status: 200,
        region: "us",
        node: "ae-1",
      });
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
