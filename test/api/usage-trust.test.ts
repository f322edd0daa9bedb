/**
 * Usage no node can forge (docs/USAGE.md, "What is billed"; src/proxy/usage-check.ts): a hostile
 * node's usage (negative, fractional, absurd, a prompt far past the router's estimate, more cached
 * tokens than prompt) is never billed, learned from or logged as measured: the router's estimate
 * is billed, capped by `max_tokens`, and a `usage_rejected` line says why. And every stream is
 * measured: a client's `include_usage: false`, `null` or `{}` no longer chooses the estimate.
 */
import { describe, expect, it, vi } from "vitest";
import { TEST_ADMIN_TOKEN, UMBRELLA_KEY } from "../fixtures/config.ts";
import { HUGE_EVENT_CHARS } from "../fixtures/fake-node.ts";
import { call, CF_VIRGINIA, registerAll } from "../helpers.ts";
import type { UsageRow } from "../../src/contracts/usage.ts";
import { COMPLETION_SLACK_TOKENS } from "../../src/proxy/usage-check.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
const US = { "x-warmpath-region": "us" };
let seq = 0;

async function ask(model: string, body: Record<string, unknown>): Promise<{ res: Response; text: string }> {
  const res = await call("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${UMBRELLA_KEY}`, ...US },
    body: JSON.stringify({ model, messages: [{ role: "user", content: `trust question ${seq++}` }], ...body }),
    cf: CF_VIRGINIA,
  });
  return { res, text: await res.text() };
}

async function rowsOf(model: string): Promise<UsageRow[]> {
  const res = await call("/admin/usage?tenant=umbrella", { headers: admin });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: UsageRow[] }).data.filter((r) => r.model === model);
}

const sum = (rows: UsageRow[], k: keyof UsageRow) => rows.reduce((s, r) => s + (r[k] as number), 0);

function logged(spy: { mock: { calls: unknown[][] } }, event: string): Array<Record<string, unknown>> {
  return spy.mock.calls
    .map((c) => {
      try {
        return JSON.parse(String(c[0])) as Record<string, unknown>;
      } catch {
        return {};
      }
    })
    .filter((l) => l.event === event);
}

describe("a node's usage is checked before it is billed", () => {
  const cases = [
    { mode: "usageneg", reason: "not-counts" },
    { mode: "usagefrac", reason: "not-counts" },
    { mode: "usagehuge", reason: "over-max-tokens" },
    { mode: "usageprompt", reason: "prompt-over-estimate" },
    { mode: "usagecached", reason: "cached-over-prompt" },
  ];
  cases.forEach(({ mode, reason }, i) => {
    it(`${mode}: the answer is served, the estimate billed (within max_tokens), and why is logged`, async () => {
      const model = `m-trust-${i}`;
      await registerAll([{ id: `trust-${mode}`, region: "us", mode, models: [model] }]);
      const spy = vi.spyOn(console, "log");
      try {
        const whole = await ask(model, { max_tokens: 5 });
        const streamed = await ask(model, { max_tokens: 5, stream: true, stream_options: { include_usage: true } });
        for (const { res } of [whole, streamed]) expect(res.status).toBe(200);
        expect(streamed.text).toContain("data: [DONE]");
        const rows = await vi.waitFor(
          async () => {
            const r = await rowsOf(model);
            expect(sum(r, "requests")).toBe(2);
            return r;
          },
          { timeout: 10_000, interval: 100 },
        );
        // Nothing of the node's figures: both answers billed as estimates, at most max_tokens (+ slack) each.
        expect(sum(rows, "estimated_requests")).toBe(2);
        expect(sum(rows, "prompt_tokens")).toBe(0);
        expect(sum(rows, "completion_tokens")).toBe(0);
        expect(sum(rows, "estimated_completion_tokens")).toBeGreaterThan(0);
        expect(sum(rows, "estimated_completion_tokens")).toBeLessThanOrEqual(2 * (5 + COMPLETION_SLACK_TOKENS));
        expect(sum(rows, "estimated_prompt_tokens")).toBeGreaterThan(0);
        const ids = [whole, streamed].map(({ res }) => res.headers.get("x-request-id"));
        const rejected = await vi.waitFor(() => {
          const lines = logged(spy, "usage_rejected").filter((l) => ids.includes(l.request_id as string));
          expect(lines).toHaveLength(2);
          return lines;
        });
        for (const line of rejected) expect(line).toMatchObject({ reason, node: `trust-${mode}`, tenant: "umbrella" });
        // The decision line has no measured usage, and says why.
        const decisions = logged(spy, "request").filter((l) => ids.includes(l.request_id as string));
        expect(decisions).toHaveLength(2);
        for (const d of decisions) {
          expect(d.usage).toBeUndefined();
          expect(d.usage_rejected).toMatchObject({ reason });
        }
      } finally {
        spy.mockRestore();
      }
    });
  });
});

describe("every stream is measured", () => {
  it("bills the node's own count whatever the client's stream_options said, and shows the usage event only to a client that asked", async () => {
    const model = "m-trust-5";
    await registerAll([{ id: "trust-honest", region: "us", models: [model] }]);
    const variants = [{ include_usage: false }, null, {}, undefined, { include_usage: true }];
    for (const options of variants) {
      const { res, text } = await ask(model, { stream: true, ...(options === undefined ? {} : { stream_options: options }) });
      expect(res.status).toBe(200);
      expect(text).toContain("data: [DONE]");
      const hasUsage = text.split("\n").some((l) => l.startsWith("data: {") && (JSON.parse(l.slice(6)) as { usage?: unknown }).usage);
      expect(hasUsage).toBe(options?.include_usage === true);
    }
    const rows = await vi.waitFor(
      async () => {
        const r = await rowsOf(model);
        expect(sum(r, "requests")).toBe(variants.length);
        return r;
      },
      { timeout: 10_000, interval: 100 },
    );
    // The fake node reports 8 completion tokens an answer: every one measured, none estimated.
    expect(sum(rows, "estimated_requests")).toBe(0);
    expect(sum(rows, "completion_tokens")).toBe(8 * variants.length);
    expect(sum(rows, "prompt_tokens")).toBeGreaterThan(0);
  });

  it("relays a 2 MiB event whole (the splitter is linear), and refuses a count of 8 tokens for its 2 MiB of text", async () => {
    const model = "m-trust-6";
    await registerAll([{ id: "trust-huge", region: "us", mode: "hugeevent", models: [model] }]);
    const spy = vi.spyOn(console, "log");
    try {
      const { res, text } = await ask(model, { stream: true });
      expect(res.status).toBe(200);
      let content = "";
      for (const line of text.split("\n")) {
        if (!line.startsWith("data: {")) continue;
        const json = JSON.parse(line.slice(6)) as { choices: Array<{ delta: { content?: string } }>; usage?: unknown };
        expect(json.usage).toBeUndefined();
        content += json.choices[0]?.delta.content ?? "";
      }
      expect(content.startsWith("x".repeat(HUGE_EVENT_CHARS))).toBe(true);
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
      const rows = await vi.waitFor(
        async () => {
          const r = await rowsOf(model);
          expect(sum(r, "requests")).toBe(1);
          return r;
        },
        { timeout: 10_000, interval: 100 },
      );
      // The node says 8 completion tokens; 2 MiB of text is at least 8,192 (256 characters a token at most).
      expect(sum(rows, "estimated_requests")).toBe(1);
      const line = logged(spy, "usage_rejected").find((l) => l.request_id === res.headers.get("x-request-id"));
      expect(line).toMatchObject({ reason: "under-relayed", limit: HUGE_EVENT_CHARS / 256 });
    } finally {
      spy.mockRestore();
    }
  });
});
