/**
 * GET /metrics: the regions' state in Prometheus' text format, checked with a real parser of the
 * exposition format rather than by pattern; and refusals through the real workers and region
 * objects (src/edge/middleware/refusal-log.ts): a budget's 429 `insufficient_quota` and a region's
 * own 429 `rate_limit_exceeded` are counted in `warmpath_edge_refusals_total` by reason, each with
 * one `refusal` line and no decision line, and a flood of them, each with a client's sampled
 * `traceparent`, writes a bounded volume of log (docs/OBSERVABILITY.md, "Refusals").
 */
import { describe, expect, it, vi } from "vitest";
// @ts-expect-error: the package ships no types; its result is typed by Family below.
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { ACME_KEY, INITECH_KEY, TEST_ADMIN_TOKEN, WONKA_KEY } from "../fixtures/config.ts";
import { call, chat, readChunks, registerAll } from "../helpers.ts";
import { continuationOutcomeSchema, streamFailureSchema } from "../../src/contracts/routing.ts";
import { LINES_PER_SECOND } from "../../src/edge/middleware/refusal-log.ts";
import { SPANS_LINES_PER_SECOND } from "../../src/proxy/spans.ts";
// The document itself, bundled as text (the tests run in workerd, without a file system).
import observabilityDoc from "../../docs/OBSERVABILITY.md?raw";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

interface Family {
  name: string;
  type: string;
  help: string;
  metrics: Array<{ labels?: Record<string, string>; value?: string; buckets?: Record<string, string>; count?: string; sum?: string }>;
}

describe("GET /metrics", () => {
  it("is valid exposition format, with the requests, tokens and latencies the router saw", async () => {
    await registerAll([{ id: "prom-1", region: "us", models: ["m-meter"] }]);
    // Two streamed answers and one whole (whose first byte reaches the object with its completion).
    for (let i = 0; i < 3; i++) {
      const res = await chat(
        {
          model: "m-meter",
          stream: i < 2,
          messages: [
            { role: "system", content: "p".repeat(3000) },
            { role: "user", content: `q${i}` },
          ],
        },
        { headers: { "x-warmpath-region": "us" } },
      );
      await readChunks(res);
    }
    await new Promise((r) => setTimeout(r, 50));
    const res = await call("/metrics", { headers: admin });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain; version=0.0.4");
    const text = await res.text();
    const families = parsePrometheusTextFormat(text) as Family[];
    const byName = new Map(families.map((f) => [f.name, f]));
    // Every family has its type and help, and names are unique.
    expect(byName.size).toBe(families.length);
    for (const f of families) {
      expect(f.help.length).toBeGreaterThan(0);
      expect(["COUNTER", "GAUGE", "HISTOGRAM"]).toContain(f.type);
    }
    const sample = (name: string, labels: Record<string, string>) =>
      byName.get(name)!.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
    const node = { region: "us", node: "prom-1" };
    const routed = byName.get("warmpath_requests_total")!.metrics.filter((m) => m.labels?.node === "prom-1");
    expect(routed.reduce((a, m) => a + Number(m.value), 0)).toBe(3);
    expect(Number(sample("warmpath_request_outcomes_total", { ...node, outcome: "ok" })!.value)).toBe(3);
    expect(Number(sample("warmpath_measured_cached_tokens_total", node)!.value)).toBeGreaterThan(0);
    // Every value is a number, and every histogram's buckets are cumulative up to +Inf. (This parser
    // drops a histogram's labels, so the node's three first bytes are checked in the text.)
    const isNumber = (v: string | undefined) => v !== undefined && (/^[+-]?Inf$|^NaN$/.test(v) || Number.isFinite(Number(v)));
    for (const f of families) {
      for (const m of f.metrics) {
        if (f.type !== "HISTOGRAM") {
          expect(isNumber(m.value), `${f.name} ${m.value}`).toBe(true);
          continue;
        }
        // By bound (an object's integer-like keys do not keep the text's order).
        const counts = Object.entries(m.buckets!)
          .sort(([a], [b]) => (a === "+Inf" ? Infinity : Number(a)) - (b === "+Inf" ? Infinity : Number(b)))
          .map(([, c]) => Number(c));
        expect(counts.every((c, i) => i === 0 || c >= counts[i - 1]!)).toBe(true);
        expect(m.buckets!["+Inf"]).toBeDefined();
      }
    }
    const ttfb = byName.get("warmpath_time_to_first_byte_seconds")!;
    expect(ttfb.type).toBe("HISTOGRAM");
    expect(byName.get("warmpath_request_duration_seconds")!.type).toBe("HISTOGRAM");
    expect(text).toMatch(/^warmpath_time_to_first_byte_seconds_count\{region="us",node="prom-1"\} 3$/m);
    expect(Number(sample("warmpath_index_entries", { region: "us" })!.value)).toBeGreaterThan(0);
    // Per tenant (its id, never its key).
    expect(Number(sample("warmpath_tenant_requests_total", { region: "us", tenant: "acme" })!.value)).toBe(3);
    expect(Number(sample("warmpath_tenant_measured_prompt_tokens_total", { region: "us", tenant: "acme" })!.value)).toBeGreaterThan(0);
    expect(Number(sample("warmpath_tenant_generation_tokens_total", { region: "us", tenant: "acme" })!.value)).toBeGreaterThan(0);
    // Failures by reason, cool-downs, retries and index evictions are exported from the first scrape, at zero.
    for (const reason of ["timeout", "connection", "http-429", "http-5xx", "empty-body"]) {
      expect(sample("warmpath_node_failures_total", { ...node, reason })!.value).toBe("0");
    }
    expect(sample("warmpath_node_cooldowns_total", node)!.value).toBe("0");
    expect(sample("warmpath_retries_total", { region: "us" })!.value).toBe("0");
    expect(sample("warmpath_index_evictions_total", { region: "us" })!.value).toBe("0");
    expect(text).not.toContain(ACME_KEY);
  });

  it("exports exactly the metrics docs/OBSERVABILITY.md documents, each family from the first scrape after traffic", async () => {
    await registerAll([{ id: "prom-doc", region: "us", models: ["m-meter"] }]);
    const res = await chat(
      { model: "m-meter", stream: true, messages: [{ role: "user", content: "documented" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    await readChunks(res);
    // A refusal, so that the edge's refusal family is exported too.
    expect((await chat({ model: "m-meter", messages: [] }, { key: "not-a-key" })).status).toBe(401);
    const text = await (await call("/metrics", { headers: admin })).text();
    const exported = new Set((parsePrometheusTextFormat(text) as Family[]).map((f) => f.name));
    const section = observabilityDoc.slice(observabilityDoc.indexOf("## Prometheus metrics"));
    const table = section.slice(0, section.indexOf("\n## ", 1));
    const documented = new Set([...table.matchAll(/`(warmpath_[a-z_]+)/g)].map((m) => m[1]!));
    expect([...exported].filter((n) => !documented.has(n)).sort(), "exported but not documented").toEqual([]);
    expect([...documented].filter((n) => !exported.has(n)).sort(), "documented but not exported").toEqual([]);
    // The stream continuation counter is there before any stream failed: every reason and outcome, at 0.
    const continuations = text.split("\n").filter((l) => l.startsWith('warmpath_stream_continuations_total{region="us",'));
    expect(continuations.length).toBe(streamFailureSchema.options.length * continuationOutcomeSchema.options.length);
    expect(text).toMatch(/^warmpath_stream_continuations_total\{region="us",reason="connection",outcome="continued"\} 0$/m);
  });

  it("needs the admin token outside local development", async () => {
    const res = await call("/metrics", { headers: { authorization: "Bearer nope" } });
    expect(res.status).toBe(401);
  });
});

const SAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
/** ~200 prompt tokens (the fake node counts 4 characters a token). */
const PROMPT = "budget ".repeat(115);

/** `warmpath_edge_refusals_total` by `status code reason`, as GET /metrics shows it. */
async function refusalCounts(): Promise<Map<string, number>> {
  const text = await (await call("/metrics", { headers: admin })).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^warmpath_edge_refusals_total\{status="(\d+)",code="([^"]+)",reason="([^"]+)"\} (\d+)$/.exec(line);
    if (m) out.set(`${m[1]} ${m[2]} ${m[3]}`, Number(m[4]));
  }
  return out;
}

const ask = (key: string, model: string, text: string) =>
  chat(
    { model, messages: [{ role: "user", content: `${text} ${PROMPT}` }] },
    { key, headers: { "x-warmpath-region": "us", traceparent: SAMPLED } },
  );

/** Every JSON line `console.log` and `console.error` write while `run` runs (and `settleMs` after: the region's spans follow its answer). */
async function captured(run: () => Promise<void>, settleMs = 300): Promise<{ lines: Array<Record<string, unknown>>; bytes: number }> {
  const log = vi.spyOn(console, "log");
  const error = vi.spyOn(console, "error");
  try {
    await run();
    await new Promise((r) => setTimeout(r, settleMs));
    const texts = [...log.mock.calls, ...error.mock.calls].map((c) => String(c[0]));
    const lines = texts.flatMap((t) => {
      try {
        return [JSON.parse(t) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
    return { lines, bytes: texts.reduce((s, t) => s + t.length + 1, 0) };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

describe("refusals through the workers", () => {
  it("counts a budget's 429 and a region's own 429 once each by reason, with one refusal line and no decision line", async () => {
    await registerAll([{ id: "met-us", region: "us", models: ["m-budget", "m-shared"] }]);
    // Spend wonka's budget (3,000 tokens a day) and initech's 3 requests a minute.
    for (let i = 0; i < 40; i++) {
      const res = await ask(WONKA_KEY, "m-budget", `spend ${i}`);
      await res.arrayBuffer();
      if (res.status === 429) break;
    }
    for (let i = 0; i < 3; i++) await (await ask(INITECH_KEY, "m-shared", `spend ${i}`)).arrayBuffer();

    const before = await refusalCounts();
    const cases = [
      { key: WONKA_KEY, model: "m-budget", code: "insufficient_quota", reason: "over-budget" },
      { key: INITECH_KEY, model: "m-shared", code: "rate_limit_exceeded", reason: "rate-limited" },
    ];
    for (const c of cases) {
      const { lines } = await captured(async () => {
        const res = await ask(c.key, c.model, "refused");
        expect(res.status).toBe(429);
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe(c.code);
        const id = res.headers.get("x-request-id");
        (c as { id?: string | null }).id = id;
      });
      const id = (c as { id?: string | null }).id;
      const mine = lines.filter((l) => l.request_id === id);
      expect(mine.filter((l) => l.event === "refusal")).toHaveLength(1);
      expect(mine.find((l) => l.event === "refusal")).toMatchObject({ status: 429, code: c.code, reason: c.reason, model: c.model });
      expect(mine.filter((l) => l.event === "request")).toHaveLength(0);
    }
    const after = await refusalCounts();
    for (const c of cases) {
      const key = `429 ${c.code} ${c.reason}`;
      expect((after.get(key) ?? 0) - (before.get(key) ?? 0)).toBe(1);
    }
  }, 60_000);

  it("bounds the log of 400 budget refusals with a sampled traceparent (figure in docs/OBSERVABILITY.md)", async () => {
    await registerAll([{ id: "met-us", region: "us", models: ["m-budget", "m-shared"] }]);
    for (let i = 0; i < 40; i++) {
      const res = await ask(WONKA_KEY, "m-budget", `spend more ${i}`);
      await res.arrayBuffer();
      if (res.status === 429) break;
    }
    const REFUSED = 400;
    const CONCURRENCY = 8;
    let sent = 0;
    const startedAt = Date.now();
    const { lines, bytes } = await captured(async () => {
      const worker = async () => {
        while (sent < REFUSED) {
          const i = sent++;
          const res = await ask(WONKA_KEY, "m-budget", `flood ${i}`);
          expect(res.status).toBe(429);
          await res.arrayBuffer();
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    });
    const seconds = Math.max(1, Math.ceil((Date.now() - startedAt) / 1000));
    const count = (event: string) => lines.filter((l) => l.event === event).length;
    console.info(
      `400 refused requests in ${seconds} s: ${bytes} bytes of log, ${lines.length} lines ` +
        `(refusal ${count("refusal")}, request ${count("request")}, spans ${count("spans")}, ` +
        `refusals_suppressed ${count("refusals_suppressed")}, spans_suppressed ${count("spans_suppressed")})`,
    );
    expect(count("request")).toBe(0);
    // One code's lines and the spans lines of two services (edge, region) a second at most, and a summary line a second each.
    expect(count("refusal")).toBeGreaterThanOrEqual(Math.min(REFUSED, LINES_PER_SECOND));
    expect(count("refusal")).toBeLessThanOrEqual(LINES_PER_SECOND * (seconds + 1));
    expect(count("spans")).toBeLessThanOrEqual(2 * SPANS_LINES_PER_SECOND * (seconds + 1));
    // The bound is a rate: how many bytes depends on how long the flood took (the figure, before and
    // after, is in docs/OBSERVABILITY.md); no absolute figure is asserted under a shared machine's load.
  }, 120_000);
});
