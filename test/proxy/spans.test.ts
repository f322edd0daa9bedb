import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_SPANS, SPANS_LINES_PER_SECOND, SpanRecorder, unixNano, type MirrorSpan } from "../../src/proxy/spans.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

function recorder(flags = 1, mirror?: (name: string) => MirrorSpan | undefined) {
  let n = 0;
  let clock = 1_700_000_000_000;
  const r = new SpanRecorder(
    { traceId: TRACE, flags },
    {
      service: "warmpath-test",
      requestId: "req-1",
      // A counter in the id's last four bytes: distinct ids, reproducibly.
      random: (b) => {
        b.fill(0);
        new DataView(b.buffer, b.byteOffset, b.byteLength).setUint32(b.byteLength - 4, ++n);
      },
      now: () => (clock += 5),
      mirror,
    },
  );
  return r;
}

afterEach(() => vi.restoreAllMocks());

describe("span recorder", () => {
  it("writes OTLP/JSON spans: hex ids, nanosecond strings, typed attributes, error status", () => {
    const r = recorder();
    const root = r.start("root", "00f067aa0ba902b7", "server", { "a.string": "x", "a.int": 3, "a.double": 0.5, "a.bool": true });
    const child = r.start("child", root.id, "client");
    child.end({ "http.response.status_code": 503, skipped: undefined }, "HTTP 503");
    root.end();
    const line = r.line();
    expect(line).toMatchObject({ event: "spans", service: "warmpath-test", request_id: "req-1", trace_id: TRACE, dropped_spans: 0 });
    const [s0, s1] = line.spans;
    expect(s0).toMatchObject({ traceId: TRACE, parentSpanId: "00f067aa0ba902b7", name: "root", kind: 2, status: { code: 0 } });
    expect(s0!.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(s0!.attributes).toEqual([
      { key: "a.string", value: { stringValue: "x" } },
      { key: "a.int", value: { intValue: "3" } },
      { key: "a.double", value: { doubleValue: 0.5 } },
      { key: "a.bool", value: { boolValue: true } },
    ]);
    expect(s1).toMatchObject({ parentSpanId: s0!.spanId, kind: 3, status: { code: 2, message: "HTTP 503" } });
    expect(s1!.attributes).toEqual([{ key: "http.response.status_code", value: { intValue: "503" } }]);
    expect(BigInt(s1!.endTimeUnixNano) > BigInt(s1!.startTimeUnixNano)).toBe(true);
    // Ending twice changes nothing.
    child.end({ late: 1 });
    expect(r.line().spans[1]!.attributes).toHaveLength(1);
  });

  it("cuts off a span still open when the line is written, and says so", () => {
    const r = recorder();
    r.start("open", undefined, "internal");
    const [s] = r.line().spans;
    expect(s!.attributes).toEqual([{ key: "warmpath.unfinished", value: { boolValue: true } }]);
    expect(s!.parentSpanId).toBeUndefined();
  });

  it("keeps at most MAX_SPANS spans and counts the rest, which still get ids", () => {
    const r = recorder();
    const ids = new Set<string>();
    for (let i = 0; i < MAX_SPANS + 10; i++) {
      const s = r.start(`s${i}`, undefined, "internal");
      ids.add(s.id);
      s.end();
    }
    expect(ids.size).toBe(MAX_SPANS + 10);
    const line = r.line();
    expect(line.spans).toHaveLength(MAX_SPANS);
    expect(line.dropped_spans).toBe(10);
  });

  it("records nothing of an unsampled trace's spans but their ids", () => {
    const r = recorder(0);
    const a = r.start("a", undefined, "internal", { "warmpath.x": 1 });
    const b = r.start("b", a.id, "client");
    expect(a.id).toMatch(/^[0-9a-f]{16}$/);
    expect(b.id).toMatch(/^[0-9a-f]{16}$/);
    expect(b.id).not.toBe(a.id);
    a.set({ "warmpath.y": 2 });
    a.end();
    expect(a.ended).toBe(true);
    expect(b.ended).toBe(false);
    expect(r.line().spans).toEqual([]);
  });

  it("logs one line, once, and only for a sampled trace", () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => {});
    const sampled = recorder(1);
    sampled.start("a", undefined, "internal").end();
    sampled.flush();
    sampled.flush();
    expect(log).toHaveBeenCalledTimes(1);
    expect(JSON.parse(String(log.mock.calls[0]![0]))).toMatchObject({ event: "spans", trace_id: TRACE });
    const unsampled = recorder(0);
    unsampled.start("a", undefined, "internal").end();
    unsampled.flush();
    expect(log).toHaveBeenCalledTimes(1);
  });

  it("mirrors each span to the runtime's tracing with the W3C ids as attributes", () => {
    const seen: Array<{ name: string; attributes: Record<string, unknown>; status?: unknown; ended: boolean }> = [];
    const r = recorder(1, (name) => {
      const m = { name, attributes: {} as Record<string, unknown>, status: undefined as unknown, ended: false };
      seen.push(m);
      return {
        setAttributes: (a) => Object.assign(m.attributes, a),
        setStatus: (s) => (m.status = s),
        end: () => (m.ended = true),
      };
    });
    const root = r.start("root", undefined, "server", { "warmpath.node": "n1" });
    const child = r.start("child", root.id, "client");
    child.end(undefined, "failed");
    root.end();
    expect(seen.map((m) => [m.name, m.ended])).toEqual([
      ["root", true],
      ["child", true],
    ]);
    expect(seen[0]!.attributes).toMatchObject({ "warmpath.node": "n1", "warmpath.trace_id": TRACE, "warmpath.span_id": root.id });
    expect(seen[1]!.attributes["warmpath.parent_span_id"]).toBe(root.id);
    expect(seen[1]!.status).toEqual({ code: "error", message: "failed" });
  });

  it("writes ms as nanosecond strings exactly (past a double's integers)", () => {
    expect(unixNano(1_796_415_214_129)).toBe("1796415214129000000");
    expect(unixNano(1.5)).toBe("1500000");
  });
});

describe("spans lines under the isolate's log bound (issue 31)", () => {
  it("writes at most SPANS_LINES_PER_SECOND a second per service, whatever the clients' traceparents say, and says how many it left out", () => {
    const log = vi.spyOn(console, "log");
    // Past any window this isolate's other tests opened.
    let clock = Date.now() + 3_600_000;
    const sampled = (service: string) => {
      const r = new SpanRecorder(
        { traceId: TRACE, flags: 1 },
        { service, requestId: "flood", random: (b) => void crypto.getRandomValues(b), now: () => clock },
      );
      r.start("warmpath.edge", undefined, "server").end();
      r.flush();
    };
    for (let i = 0; i < 100; i++) {
      sampled("warmpath-flood-a");
      clock += 1;
    }
    // Another service has its own bound.
    sampled("warmpath-flood-b");
    clock += 1_000;
    sampled("warmpath-flood-a");
    const lines = log.mock.calls.map(
      (c) => JSON.parse(String(c[0])) as { event: string; service?: string; counts?: Record<string, number> },
    );
    expect(lines.filter((l) => l.event === "spans" && l.service === "warmpath-flood-a")).toHaveLength(SPANS_LINES_PER_SECOND + 1);
    expect(lines.filter((l) => l.event === "spans" && l.service === "warmpath-flood-b")).toHaveLength(1);
    const summary = lines.find((l) => l.event === "spans_suppressed")!;
    expect(summary.counts).toEqual({ "warmpath-flood-a": 100 - SPANS_LINES_PER_SECOND });
  });
});
