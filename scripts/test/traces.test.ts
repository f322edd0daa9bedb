/**
 * Traces on the local system (docs/OBSERVABILITY.md, "Traces"): `npm start -- --traces` exports
 * the workers' spans as OTLP/JSON, to a file (wrangler dev, as `npm start` runs) and to an
 * OTLP/HTTP endpoint (a tiny collector here; the workers in workerd), and a fleet node receives a
 * client's trace as a child of warmpath's node-call span. ~40 s.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { startSystem, type System } from "../system.ts";
import { freePort } from "../ports.ts";
import { traceExporter } from "../traces/export.ts";

const TRACE = "0af7651916cd43dd8448eb211c80319c";
const CLIENT_PARENT = "b7ad6b7169203331";
const MODEL = "llama-3.1-8b-instruct";

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
}
interface ExportRequest {
  resourceSpans: Array<{
    resource: { attributes: Array<{ key: string; value: { stringValue: string } }> };
    scopeSpans: Array<{ spans: Span[] }>;
  }>;
}

const spansIn = (requests: ExportRequest[]) =>
  requests.flatMap((r) =>
    r.resourceSpans.flatMap((rs) =>
      rs.scopeSpans.flatMap((ss) =>
        ss.spans.map((s) => ({ ...s, service: rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue })),
      ),
    ),
  );

async function until<T>(what: string, check: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Sends a traced chat completion; checks the node got warmpath's child; returns the request id and the node's parent span id. */
async function tracedRequest(system: System): Promise<{ requestId: string; nodeParent: string }> {
  const res = await fetch(`${system.url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${DEV_API_KEY}`,
      "content-type": "application/json",
      traceparent: `00-${TRACE}-${CLIENT_PARENT}-01`,
      tracestate: "vendor=abc",
    },
    body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: `Hello ${Math.random()}` }] }),
  });
  assert.equal(res.status, 200);
  await res.text();
  assert.equal(res.headers.get("x-warmpath-trace-id"), TRACE);
  const requestId = res.headers.get("x-request-id")!;
  const node = system.fleet!.nodes.find((n) => n.id === res.headers.get("x-warmpath-node"))!;
  const { received } = (await (await fetch(`${node.url}/admin/traces`)).json()) as {
    received: Array<{ request_id: string; traceparent: string; tracestate: string }>;
  };
  const seen = received.find((r) => r.request_id === requestId)!;
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(seen.traceparent)!;
  assert.ok(m, `the node got a valid traceparent: ${seen.traceparent}`);
  assert.equal(m[1], TRACE);
  assert.notEqual(m[2], CLIENT_PARENT);
  assert.equal(seen.tracestate, "vendor=abc");
  return { requestId, nodeParent: m[2]! };
}

/** The edge and node-call spans of the request in what was exported, linked as they must be. */
function checkSpans(requests: ExportRequest[], requestId: string, nodeParent: string): boolean {
  const spans = spansIn(requests).filter((s) => s.traceId === TRACE);
  const edge = spans.find(
    (s) => s.name === "warmpath.edge" && s.attributes.some((a) => a.key === "warmpath.request_id" && a.value.stringValue === requestId),
  );
  const nodeCall = spans.find((s) => s.name === "warmpath.node_call" && s.spanId === nodeParent);
  if (!edge || !nodeCall) return false;
  assert.equal(edge.service, "warmpath-edge");
  assert.equal(edge.parentSpanId, CLIENT_PARENT);
  assert.equal(nodeCall.service, "warmpath-region");
  // node_call -> warmpath.region -> warmpath.region_call -> warmpath.edge
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const region = byId.get(nodeCall.parentSpanId!);
  assert.equal(region?.name, "warmpath.region");
  assert.equal(byId.get(region.parentSpanId!)?.parentSpanId, edge.spanId);
  return true;
}

test("npm start --traces FILE writes the OTLP/JSON spans of a traced request", { timeout: 180_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "warmpath-traces-"));
  const file = join(dir, "traces.jsonl");
  const system = await startSystem({ port: 0, traces: file });
  try {
    const { requestId, nodeParent } = await tracedRequest(system);
    await until("the request's spans in the file", () => {
      const requests = readFileSync(file, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as ExportRequest);
      return checkSpans(requests, requestId, nodeParent) || undefined;
    });
    // A request without a traceparent: with --traces every trace the edge starts is sampled (the
    // configuration's default, 1%, would export almost none of them).
    const untraced = await fetch(`${system.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEV_API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: `Untraced ${Math.random()}` }] }),
    });
    assert.equal(untraced.status, 200);
    await untraced.text();
    const started = untraced.headers.get("x-warmpath-trace-id")!;
    await until("the spans of a trace the edge started", () => {
      const requests = readFileSync(file, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as ExportRequest);
      return spansIn(requests).some((s) => s.traceId === started && s.name === "warmpath.edge") || undefined;
    });
  } finally {
    await system.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("--traces URL posts them to an OTLP/HTTP endpoint as JSON", { timeout: 180_000 }, async () => {
  const received: ExportRequest[] = [];
  const contentTypes = new Set<string>();
  const collector = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/traces") {
        contentTypes.add(req.headers["content-type"] ?? "");
        received.push(JSON.parse(body) as ExportRequest);
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => collector.listen(0, "127.0.0.1", r));
  const { port } = collector.address() as { port: number };
  const system = await startSystem({ port: 0, runtime: "workerd-single", traces: `http://127.0.0.1:${port}/v1/traces` });
  try {
    const { requestId, nodeParent } = await tracedRequest(system);
    await until("the request's spans at the collector", () => checkSpans(received, requestId, nodeParent) || undefined);
    assert.deepEqual([...contentTypes], ["application/json"]);
    assert.equal(system.traces!.stats.failures, 0);
  } finally {
    await system.stop();
    collector.close();
  }
});

test("a failed OTLP/HTTP export is logged once, drops its batch, and the exporter recovers", { timeout: 30_000 }, async () => {
  const port = await freePort(); // nothing listens there yet
  const logged: string[] = [];
  const exporter = traceExporter(`http://127.0.0.1:${port}/v1/traces`, (m) => logged.push(m));
  const line = (i: number) =>
    `[wrangler] ${JSON.stringify({ event: "spans", service: "warmpath-edge", request_id: `r${i}`, trace_id: TRACE, dropped_spans: 0, spans: [{ traceId: TRACE, spanId: CLIENT_PARENT, name: "warmpath.edge", kind: 2, startTimeUnixNano: "1", endTimeUnixNano: "2", attributes: [], status: { code: 0 } }] })}`;
  try {
    exporter.push("not a spans line");
    exporter.push(line(1));
    exporter.push(line(2));
    await exporter.flush();
    exporter.push(line(3));
    await exporter.flush();
    assert.deepEqual(exporter.stats, { lines: 3, exported: 0, dropped: 3, failures: 2 });
    assert.equal(logged.length, 1, logged.join("\n"));
    assert.match(logged[0]!, /trace export .* failed/);

    const bodies: string[] = [];
    const collector = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        bodies.push(body);
        res.writeHead(200).end("{}");
      });
    });
    await new Promise<void>((r) => collector.listen(port, "127.0.0.1", r));
    try {
      exporter.push(line(4));
      await exporter.flush();
      assert.equal(exporter.stats.exported, 1);
      assert.equal(logged.length, 2);
      assert.match(logged[1]!, /works again/);
      const sent = JSON.parse(bodies[0]!) as ExportRequest;
      assert.equal(sent.resourceSpans[0]!.resource.attributes[0]!.value.stringValue, "warmpath-edge");
      assert.equal(sent.resourceSpans[0]!.scopeSpans[0]!.spans[0]!.traceId, TRACE);
    } finally {
      collector.close();
    }
  } finally {
    await exporter.stop();
  }
});
