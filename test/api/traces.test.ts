/**
 * Traces (docs/OBSERVABILITY.md, "Traces"): a client's W3C `traceparent` reaches the node as a
 * child of the same trace, through the edge and the region worker; every node call (a retry, a
 * continuation) is a span of its own, and the node's parent; the decision and refusal lines and
 * `x-warmpath-trace-id` name the trace; each worker logs its spans, linked parent to child.
 */
import { describe, expect, it, vi } from "vitest";
import { ACME_KEY } from "../fixtures/config.ts";
import { call, chat, CF_FRANKFURT, nodeUrl, readChunks, registerAll } from "../helpers.ts";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_PARENT = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE}-${CLIENT_PARENT}-01`;
const TRACESTATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";
const US = { "x-warmpath-region": "us" };
const TRACEPARENT_RE = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

interface Received {
  traceparent: string | null;
  tracestate: string | null;
  request_id: string | null;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
  status: { code: number; message?: string };
}
interface SpansLine {
  event: "spans";
  service: string;
  request_id: string;
  trace_id: string;
  spans: OtlpSpan[];
}

let models = 0;
const received = async (n: { id: string; mode?: string }) => (await (await fetch(`${nodeUrl(n)}/_traces`)).json()) as Received[];
const attr = (s: OtlpSpan, key: string) => {
  const v = s.attributes.find((a) => a.key === key)?.value;
  return v && Object.values(v)[0];
};

/** The JSON lines logged while `run` runs (and until `until` holds of them: the region's spans follow the answer). */
async function logged<T>(run: () => Promise<T>, until: (lines: Array<Record<string, unknown>>, result: T) => boolean) {
  const spy = vi.spyOn(console, "log");
  try {
    const result = await run();
    const lines = () =>
      spy.mock.calls.flatMap((c) => {
        try {
          return [JSON.parse(String(c[0])) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
    await vi.waitFor(() => expect(until(lines(), result)).toBe(true), { timeout: 5_000, interval: 20 });
    return { result, lines: lines() };
  } finally {
    spy.mockRestore();
  }
}

const spansOf = (lines: Array<Record<string, unknown>>, requestId: string, service?: string) =>
  (lines as unknown as SpansLine[]).filter((l) => l.event === "spans" && l.request_id === requestId && (!service || l.service === service));

describe("traces", () => {
  it("continues a client's trace to the node as a child of warmpath's node-call span, with its tracestate", async () => {
    const model = `m-us`;
    const node = { id: `tr-ok-${models++}`, region: "us", models: [model] };
    await registerAll([node]);
    const { result: res, lines } = await logged(
      async () => {
        const r = await chat(
          { model, stream: true, messages: [{ role: "user", content: "trace me" }] },
          { headers: { ...US, traceparent: TRACEPARENT, tracestate: TRACESTATE } },
        );
        await readChunks(r);
        return r;
      },
      (ls, r) => spansOf(ls, r.headers.get("x-request-id")!).length === 2,
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("x-warmpath-trace-id")).toBe(TRACE);
    const requestId = res.headers.get("x-request-id")!;

    // The node saw warmpath's child, never the client's own parent, and the client's tracestate verbatim.
    const answering = { id: res.headers.get("x-warmpath-node")! };
    const seen = (await received(answering)).filter((r) => r.request_id === requestId);
    expect(seen).toHaveLength(1);
    const [, traceId, parent, flags] = TRACEPARENT_RE.exec(seen[0]!.traceparent!)!;
    expect(traceId).toBe(TRACE);
    expect(parent).not.toBe(CLIENT_PARENT);
    expect(flags).toBe("01");
    expect(seen[0]!.tracestate).toBe(TRACESTATE);

    // The decision line names the trace.
    const decision = lines.find((l) => l.event === "request" && l.request_id === requestId)!;
    expect(decision.trace_id).toBe(TRACE);

    // The spans: edge <- client; region_call <- edge; region <- region_call; route, node_call <- region; first_byte <- node_call.
    const [edgeLine] = spansOf(lines, requestId, "warmpath-edge");
    const [regionLine] = spansOf(lines, requestId, "warmpath-region");
    const all = [...edgeLine!.spans, ...regionLine!.spans];
    for (const s of all) expect(s.traceId).toBe(TRACE);
    const one = (name: string) => {
      const found = all.filter((s) => s.name === name);
      expect(found, name).toHaveLength(1);
      return found[0]!;
    };
    const edge = one("warmpath.edge");
    const regionCall = one("warmpath.region_call");
    const region = one("warmpath.region");
    const route = one("warmpath.route");
    const nodeCall = one("warmpath.node_call");
    const firstByte = one("warmpath.first_byte");
    expect(edge.parentSpanId).toBe(CLIENT_PARENT);
    expect(regionCall.parentSpanId).toBe(edge.spanId);
    expect(region.parentSpanId).toBe(regionCall.spanId);
    expect(route.parentSpanId).toBe(region.spanId);
    expect(nodeCall.parentSpanId).toBe(region.spanId);
    expect(firstByte.parentSpanId).toBe(nodeCall.spanId);
    // The node's parent is the node-call span.
    expect(parent).toBe(nodeCall.spanId);
    expect(attr(nodeCall, "warmpath.node")).toBe(answering.id);
    expect(attr(nodeCall, "http.response.status_code")).toBe("200");
    expect(attr(route, "warmpath.node")).toBe(answering.id);
    expect(attr(edge, "warmpath.tenant")).toBe("acme");
    expect(attr(edge, "gen_ai.request.model")).toBe(model);
    expect(attr(edge, "http.response.status_code")).toBe("200");
    expect(attr(edge, "warmpath.end")).toBe("ok");
    expect(typeof attr(nodeCall, "gen_ai.usage.output_tokens")).toBe("string");
    for (const s of all) expect(BigInt(s.endTimeUnixNano) >= BigInt(s.startTimeUnixNano), s.name).toBe(true);
  });

  it("starts a trace for a request without one, and replaces an invalid one", async () => {
    const node = { id: `tr-new-${models++}`, region: "us", models: ["m-us"] };
    await registerAll([node]);
    const cases: Array<Record<string, string>> = [{}, { traceparent: `00-${"0".repeat(32)}-${CLIENT_PARENT}-01`, tracestate: TRACESTATE }];
    for (const headers of cases) {
      const res = await chat({ model: "m-us", messages: [{ role: "user", content: "no trace" }] }, { headers: { ...US, ...headers } });
      expect(res.status).toBe(200);
      await res.text();
      const traceId = res.headers.get("x-warmpath-trace-id")!;
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(traceId).not.toBe("0".repeat(32));
      const answering = { id: res.headers.get("x-warmpath-node")! };
      const seen = (await received(answering)).find((r) => r.request_id === res.headers.get("x-request-id"))!;
      const [, id, parent, flags] = TRACEPARENT_RE.exec(seen.traceparent!)!;
      expect(id).toBe(traceId);
      expect(parent).not.toBe(CLIENT_PARENT);
      expect(flags).toBe("01"); // a new trace is sampled
      // A tracestate belongs to the trace it came with: dropped with an invalid traceparent.
      expect(seen.tracestate).toBeNull();
    }
  });

  it("gives each node tried before the first byte a span of its own in the same trace", async () => {
    const model = "m-us";
    const failing = [0, 1].map(() => ({ id: `tr-fail-${models++}`, region: "us", mode: "fail", models: [model] }));
    const ok = { id: `tr-after-${models++}`, region: "us", models: [model] };
    await registerAll([...failing, ok]);
    for (let i = 0; i < 20; i++) {
      const { result: res, lines } = await logged(
        async () => {
          const r = await chat(
            { model, messages: [{ role: "user", content: `retry ${i} ${Math.random()}` }] },
            { headers: { ...US, traceparent: TRACEPARENT } },
          );
          await r.text();
          return r;
        },
        (ls, r) =>
          spansOf(ls, r.headers.get("x-request-id")!, "warmpath-region").length === 1 &&
          ls.some((l) => l.event === "request" && l.request_id === r.headers.get("x-request-id")),
      );
      expect(res.status).toBe(200);
      if (Number(res.headers.get("x-warmpath-attempts")) < 2) continue;
      const requestId = res.headers.get("x-request-id")!;
      const decision = lines.find((l) => l.event === "request" && l.request_id === requestId)!;
      const tried = [...new Set((decision.attempts as Array<{ node: string }>).map((a) => a.node))];
      const seen = (await Promise.all(tried.map((id) => received({ id })))).flat().filter((r) => r.request_id === requestId);
      expect(seen.length).toBe(Number(res.headers.get("x-warmpath-attempts")));
      const parents = seen.map((r) => TRACEPARENT_RE.exec(r.traceparent!)!);
      for (const p of parents) expect(p[1]).toBe(TRACE);
      expect(new Set(parents.map((p) => p[2])).size).toBe(seen.length);
      const [regionLine] = spansOf(lines, requestId, "warmpath-region");
      const calls = regionLine!.spans.filter((s) => s.name === "warmpath.node_call");
      expect(calls.map((c) => c.spanId).sort()).toEqual(parents.map((p) => p[2]).sort());
      expect(calls.map((c) => attr(c, "warmpath.retry"))).toEqual(calls.map((_, k) => String(k)));
      const failed = calls.filter((c) => c.status.code === 2);
      expect(failed.length).toBe(calls.length - 1);
      for (const c of failed) expect(attr(c, "warmpath.failure")).toBe("http-5xx");
      return;
    }
    throw new Error("no request was retried");
  });

  it("gives a continued stream's node a span under a continuation span, in the same trace", async () => {
    const model = "m-mid";
    const dying = { id: `tr-die-${models++}`, region: "us", mode: "storydie3", models: [model], engine: "vllm" };
    const taking = { id: `tr-take-${models++}`, region: "us", mode: "story", models: [model], engine: "vllm" };
    await registerAll([dying, taking]);
    for (let i = 0; i < 20; i++) {
      const { result: res, lines } = await logged(
        async () => {
          const r = await chat(
            { model, stream: true, messages: [{ role: "user", content: `story ${i} ${Math.random()}` }] },
            { headers: { ...US, traceparent: TRACEPARENT } },
          );
          await readChunks(r);
          return r;
        },
        (ls, r) => spansOf(ls, r.headers.get("x-request-id")!, "warmpath-region").length === 1,
      );
      if (res.headers.get("x-warmpath-node") !== dying.id) continue;
      const requestId = res.headers.get("x-request-id")!;
      const first = (await received(dying)).find((r) => r.request_id === requestId)!;
      const second = (await received(taking)).find((r) => r.request_id === requestId)!;
      const a = TRACEPARENT_RE.exec(first.traceparent!)!;
      const b = TRACEPARENT_RE.exec(second.traceparent!)!;
      expect([a[1], b[1]]).toEqual([TRACE, TRACE]);
      expect(a[2]).not.toBe(b[2]);
      const spans = spansOf(lines, requestId, "warmpath-region")[0]!.spans;
      const byId = new Map(spans.map((s) => [s.spanId, s]));
      const continuation = spans.find((s) => s.name === "warmpath.continuation")!;
      expect(attr(continuation, "warmpath.continuation.outcome")).toBe("continued");
      expect(attr(continuation, "warmpath.continuation.to_node")).toBe(taking.id);
      // The second node's parent is a node-call span under the continuation; the first's failed.
      expect(byId.get(b[2]!)!.parentSpanId).toBe(continuation.spanId);
      expect(byId.get(a[2]!)!.status.code).toBe(2);
      expect(byId.get(b[2]!)!.status.code).toBe(0);
      return;
    }
    throw new Error("no request was placed on the dying node first");
  });

  it("names the failover region's span, and the trace in a refusal line", async () => {
    // m-shared is served by both regions; only us has a node here: eu (nearest Frankfurt) refuses, us serves.
    const node = { id: `tr-far-${models++}`, region: "us", models: ["m-shared"] };
    await registerAll([node]);
    const { result: res, lines } = await logged(
      async () => {
        const r = await chat(
          { model: "m-shared", messages: [{ role: "user", content: "fail over" }] },
          { headers: { traceparent: TRACEPARENT }, cf: CF_FRANKFURT },
        );
        await r.text();
        return r;
      },
      (ls, r) => spansOf(ls, r.headers.get("x-request-id")!, "warmpath-edge").length === 1,
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("x-warmpath-region")).toBe("us");
    const edge = spansOf(lines, res.headers.get("x-request-id")!, "warmpath-edge")[0]!.spans;
    const first = edge.find((s) => s.name === "warmpath.region_call")!;
    const failover = edge.find((s) => s.name === "warmpath.failover")!;
    expect(attr(first, "warmpath.region")).toBe("eu");
    expect(first.status.code).toBe(2);
    expect(attr(failover, "warmpath.region")).toBe("us");
    expect(attr(failover, "warmpath.failover.from")).toBe("eu");

    // A request refused at the edge (an unknown model) still has its trace, in its line and header.
    const { result: refused, lines: refusalLines } = await logged(
      async () => {
        const r = await call("/v1/chat/completions", {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}`, traceparent: TRACEPARENT },
          body: JSON.stringify({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
        });
        await r.text();
        return r;
      },
      (ls, r) => ls.some((l) => l.event === "refusal" && l.request_id === r.headers.get("x-request-id")),
    );
    expect(refused.status).toBe(404);
    expect(refused.headers.get("x-warmpath-trace-id")).toBe(TRACE);
    const refusal = refusalLines.find((l) => l.event === "refusal" && l.request_id === refused.headers.get("x-request-id"))!;
    expect(refusal.trace_id).toBe(TRACE);
  });
});
