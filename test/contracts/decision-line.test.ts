/**
 * The decision log's lines as a contract (src/contracts/decision-line.ts): what its readers
 * (scripts/faults/, scripts/llama/midstream.ts, bench/e2e/run.ts, bench/goodput-live/run.ts) get
 * from a line of the router's output. The lines the region worker really writes are checked in
 * test/proxy/decision-log.test.ts and test/region/continuation.test.ts.
 */
import { describe, expect, it } from "vitest";
import { MAX_LOG_LINE_CHARS, parseLogLine, type DecisionLine, type StreamContinuedLine } from "../../src/contracts/decision-line.ts";

const decision: DecisionLine = {
  event: "request",
  request_id: "req-1",
  tenant: "acme",
  model: "m",
  status: 200,
  region: "us",
  node: "n1",
  decision: "prefix-hit",
  prompt_tokens_estimated: 512,
  attempts: [{ region: "us", node: "n1", outcome: "ok" }],
  continuations: [{ node: "n0", reason: "connection", tokens_carried: 5, outcome: "continued", to_node: "n1", first_byte_ms: 40 }],
  first_byte_ms: 40,
  duration_ms: 900,
  end: "ok",
  usage: { promptTokens: 520, cachedTokens: 384, completionTokens: 30 },
  measured_cached_tokens: 384,
};

const continued: StreamContinuedLine = {
  event: "stream_continued",
  request_id: "req-1",
  region: "us",
  node: "n0",
  reason: "connection",
  tokens_carried: 5,
  outcome: "continued",
  to_node: "n1",
  first_byte_ms: 40,
};

describe("parseLogLine", () => {
  it("reads a decision line after the prefix workerd and wrangler put before a worker's console line", () => {
    const parsed = parseLogLine(`[wrangler:info] ${JSON.stringify(decision)}`);
    expect(parsed?.invalid).toBeUndefined();
    expect(parsed?.decision).toEqual(decision);
    expect(parsed?.continued).toBeUndefined();
  });

  it("reads a stream_continued line as one", () => {
    const parsed = parseLogLine(JSON.stringify(continued));
    expect(parsed?.continued).toEqual(continued);
    expect(parsed?.decision).toBeUndefined();
  });

  it("names the field of a decision line that breaks the contract, and keeps its JSON", () => {
    const { duration_ms: _, ...noDuration } = decision;
    const parsed = parseLogLine(JSON.stringify(noDuration));
    expect(parsed?.decision).toBeUndefined();
    expect(parsed?.invalid).toMatch(/^duration_ms: /);
    expect(parsed?.json.request_id).toBe("req-1");
    expect(parseLogLine(JSON.stringify({ ...continued, outcome: "vanished" }))?.invalid).toMatch(/^outcome: /);
    expect(parseLogLine(JSON.stringify({ ...decision, decision: "guess" }))?.invalid).toMatch(/^decision: /);
  });

  it("keeps a field a newer writer added (objects are not strict)", () => {
    expect(parseLogLine(JSON.stringify({ ...decision, added_later: 1 }))?.decision?.request_id).toBe("req-1");
  });

  it("gives other events as JSON only", () => {
    const parsed = parseLogLine(JSON.stringify({ event: "refusal", request_id: "req-2", status: 429 }));
    expect(parsed).toEqual({ json: { event: "refusal", request_id: "req-2", status: 429 } });
  });

  it("reads nothing from a line with no JSON object, one cut short, or one past the bound", () => {
    expect(parseLogLine("Ready on http://localhost:8787")).toBeUndefined();
    expect(parseLogLine(JSON.stringify(decision).slice(0, 80))).toBeUndefined();
    expect(parseLogLine("[1, 2]")).toBeUndefined();
    expect(parseLogLine(JSON.stringify({ ...decision, end: "x".repeat(MAX_LOG_LINE_CHARS) }))).toBeUndefined();
  });
});
