/**
 * GET /metrics: the regions' state in Prometheus' text format, checked with a real parser of the
 * exposition format rather than by pattern.
 */
import { describe, expect, it } from "vitest";
// @ts-expect-error: the package ships no types; its result is typed by Family below.
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { ACME_KEY, TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { call, chat, readChunks, registerAll } from "../helpers.ts";

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

  it("needs the admin token outside local development", async () => {
    const res = await call("/metrics", { headers: { authorization: "Bearer nope" } });
    expect(res.status).toBe(401);
  });
});
