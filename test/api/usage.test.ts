/**
 * The usage ledger (docs/USAGE.md, durable-objects/usage-store.ts, GET /admin/usage): a tenant's
 * totals equal the sum of the usage its answers carried, exactly, whatever path the answers took
 * (streamed, whole, retried on another node, continued mid-stream, failed over to another region,
 * a sharded region), they survive a restart of every region object, and an answer without usage
 * is counted apart as estimated.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { BILL_PRICE, TEST_ADMIN_TOKEN, UMBRELLA_BILL_PRICE, UMBRELLA_KEY } from "../fixtures/config.ts";
import { call, CF_FRANKFURT, registerAll } from "../helpers.ts";
import { loadConfig, regionStub } from "../../src/config/load.ts";
import { SPEND_LEDGER_NAME, type UsageRow } from "../../src/contracts/usage.ts";
import { MAX_REQUEST_TOKENS, MAX_REQUEST_USD, MAX_TOKENS_SUM } from "../../src/core/usage/bounds.ts";
import { utcDay } from "../../src/core/usage/periods.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

interface Carried {
  prompt: number;
  cached: number;
  completion: number;
}

/** The usage an answer carried: the last `usage` of a stream, or the body's. */
function carried(text: string, stream: boolean): Carried {
  let usage: Record<string, unknown> | undefined;
  if (!stream) usage = (JSON.parse(text) as { usage: Record<string, unknown> }).usage;
  else
    for (const line of text.split("\n")) {
      if (!line.startsWith("data: {")) continue;
      const json = JSON.parse(line.slice(6)) as { usage?: Record<string, unknown> };
      if (json.usage) usage = json.usage;
    }
  expect(usage, `no usage in ${text.slice(0, 200)}`).toBeDefined();
  const details = usage!.prompt_tokens_details as { cached_tokens?: number } | undefined;
  return { prompt: usage!.prompt_tokens as number, cached: details?.cached_tokens ?? 0, completion: usage!.completion_tokens as number };
}

async function ask(model: string, i: number, opts: { stream: boolean; region?: string }): Promise<{ res: Response; text: string }> {
  const res = await call("/v1/chat/completions", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${UMBRELLA_KEY}`,
      ...(opts.region ? { "x-warmpath-region": opts.region } : {}),
    },
    body: JSON.stringify({
      model,
      messages: [{ role: "user", content: `bill question ${i} ${"x".repeat(i * 7)}` }],
      stream: opts.stream,
      ...(opts.stream ? { stream_options: { include_usage: true } } : {}),
    }),
    cf: CF_FRANKFURT,
  });
  return { res, text: await res.text() };
}

async function usage(query = ""): Promise<UsageRow[]> {
  const res = await call(`/admin/usage${query}`, { headers: admin });
  expect(res.status).toBe(200);
  return ((await res.json()) as { data: UsageRow[] }).data;
}

const sum = (rows: UsageRow[], k: keyof UsageRow) => rows.reduce((s, r) => s + (r[k] as number), 0);
const costOf = (c: Carried, p: { input: number; cached_input: number; output: number }) =>
  ((c.prompt - c.cached) * p.input + c.cached * p.cached_input + c.completion * p.output) / 1e6;

describe("the usage ledger", () => {
  it("a tenant's totals are exactly the usage its answers carried: streamed, whole, retried, continued, failed over, sharded; and survive restarts", async () => {
    await registerAll([
      // m-bill: one node that fails before its first byte (a retry), two that answer; none in eu (failover).
      { id: "bill-fail", region: "us", mode: "fail", models: ["m-bill"] },
      { id: "bill-a", region: "us", models: ["m-bill"] },
      { id: "bill-b", region: "us", models: ["m-bill"] },
      // m-bill-cont: a vLLM that dies after 4 tokens, and one that continues.
      { id: "billc-a", region: "us", mode: "storydie4", models: ["m-bill-cont"], engine: "vllm" },
      { id: "billc-b", region: "us", mode: "story", models: ["m-bill-cont"], engine: "vllm" },
      // A sharded region.
      { id: "bill-shd", region: "shd", models: ["m-bill-shard"] },
    ]);
    const byModel = new Map<string, Carried[]>();
    const add = (model: string, c: Carried) => byModel.set(model, [...(byModel.get(model) ?? []), c]);
    let retried = 0;
    let failedOver = 0;
    for (let i = 0; i < 8; i++) {
      const stream = i % 2 === 0;
      const { res, text } = await ask("m-bill", i, { stream });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-warmpath-region")).toBe("us");
      if (res.headers.get("x-warmpath-decision") === "failover") failedOver++;
      if (Number(res.headers.get("x-warmpath-attempts")) > 2) retried++;
      add("m-bill", carried(text, stream));
    }
    // Every request from Frankfurt went to eu first (no node there) and failed over.
    expect(failedOver).toBeGreaterThan(0);
    let continued = 0;
    for (let i = 0; i < 10 && continued < 2; i++) {
      const { res, text } = await ask("m-bill-cont", i, { stream: true, region: "us" });
      expect(res.status).toBe(200);
      if (res.headers.get("x-warmpath-node") === "billc-a") continued++;
      add("m-bill-cont", carried(text, true));
    }
    expect(continued).toBeGreaterThan(0);
    for (let i = 0; i < 4; i++) {
      const { res, text } = await ask("m-bill-shard", i, { stream: i % 2 === 1, region: "shd" });
      expect(res.status).toBe(200);
      add("m-bill-shard", carried(text, i % 2 === 1));
    }
    expect(retried + failedOver).toBeGreaterThan(0);

    const expectExact = async () => {
      const rows = await usage("?tenant=umbrella");
      for (const [model, answers] of byModel) {
        const mine = rows.filter((r) => r.model === model);
        expect(sum(mine, "requests"), model).toBe(answers.length);
        expect(sum(mine, "prompt_tokens"), model).toBe(answers.reduce((s, c) => s + c.prompt, 0));
        expect(sum(mine, "cached_tokens"), model).toBe(answers.reduce((s, c) => s + c.cached, 0));
        expect(sum(mine, "completion_tokens"), model).toBe(answers.reduce((s, c) => s + c.completion, 0));
        expect(sum(mine, "estimated_requests"), model).toBe(0);
      }
      return rows;
    };
    // The last answers' bills reach their objects just after their last bytes.
    const rows = await vi.waitFor(expectExact, { timeout: 10_000, interval: 100 });
    expect(new Set(rows.map((r) => r.day))).toEqual(new Set([utcDay(Date.now())]));
    expect(rows.find((r) => r.model === "m-bill")!.region).toBe("us");
    expect(rows.find((r) => r.model === "m-bill-shard")!.region).toBe("shd");
    // Priced at the tenant's own price for m-bill, the configuration's for m-bill-cont, unpriced m-bill-shard.
    const cost = (model: string) => rows.find((r) => r.model === model)!.cost_usd;
    expect(cost("m-bill")).toBeCloseTo(
      byModel.get("m-bill")!.reduce((s, c) => s + costOf(c, UMBRELLA_BILL_PRICE), 0),
      6,
    );
    expect(cost("m-bill")).not.toBeCloseTo(
      byModel.get("m-bill")!.reduce((s, c) => s + costOf(c, BILL_PRICE), 0),
      6,
    );
    expect(cost("m-bill-cont")).toBeCloseTo(
      byModel.get("m-bill-cont")!.reduce((s, c) => s + costOf(c, { input: 3, cached_input: 3, output: 15 }), 0),
      6,
    );
    expect(cost("m-bill-shard")).toBe(0);

    // Every region object restarted (the sharded region's three): the ledger is storage's.
    for (const region of ["eu", "us", "shd"]) {
      const res = await call(`/admin/regions/${region}/restart`, { method: "POST", headers: admin });
      expect(res.status).toBe(200);
    }
    await expectExact();
  }, 30_000);

  it("a request in flight when its region object restarts is billed by the object's new instance", async () => {
    await registerAll([{ id: "bill-restart", region: "us", models: ["m-bill-restart"] }]);
    const rows = async () => (await usage("?tenant=umbrella")).filter((r) => r.model === "m-bill-restart");
    const res = await call("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${UMBRELLA_KEY}`, "x-warmpath-region": "us" },
      body: JSON.stringify({
        model: "m-bill-restart",
        messages: [{ role: "user", content: "billed across a restart" }],
        stream: true,
        stream_options: { include_usage: true },
      }),
      cf: CF_FRANKFURT,
    });
    expect(res.status).toBe(200);
    // The fake node streams a word every 30 ms: the object restarts while it does.
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = decoder.decode((await reader.read()).value, { stream: true });
    expect((await call("/admin/regions/us/restart", { method: "POST", headers: admin })).status).toBe(200);
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value, { stream: true });
    const c = carried(text, true);
    await vi.waitFor(
      async () => expect(await rows()).toMatchObject([{ requests: 1, prompt_tokens: c.prompt, completion_tokens: c.completion }]),
      {
        timeout: 10_000,
        interval: 100,
      },
    );
  }, 30_000);

  it("a stream cut short without usage is counted apart, as estimated", async () => {
    await registerAll([{ id: "bill-mid", region: "us", mode: "midfail", models: ["m-bill-est"] }]);
    const { res, text } = await ask("m-bill-est", 1, { stream: true, region: "us" });
    expect(res.status).toBe(200);
    expect(text).toContain('"error"');
    const rows = await vi.waitFor(
      async () => {
        const r = (await usage("?tenant=umbrella")).filter((x) => x.model === "m-bill-est");
        expect(sum(r, "requests")).toBe(1);
        return r;
      },
      { timeout: 10_000, interval: 100 },
    );
    expect(rows[0]).toMatchObject({ requests: 1, estimated_requests: 1, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0 });
    // The router's estimate of the prompt, and what was streamed before the break (two words: "Hello", " from").
    expect(rows[0]!.estimated_prompt_tokens).toBeGreaterThan(0);
    expect(rows[0]!.estimated_completion_tokens).toBe(2);
  }, 30_000);

  it("exports CSV, filters by tenant and day, and refuses a bad query in OpenAI's shape", async () => {
    const today = utcDay(Date.now());
    const csv = await call(`/admin/usage?tenant=umbrella&from=${today}&to=${today}`, { headers: { ...admin, accept: "text/csv" } });
    expect(csv.status).toBe(200);
    expect(csv.headers.get("content-type")).toContain("text/csv");
    const lines = (await csv.text()).trimEnd().split("\r\n");
    expect(lines[0]).toBe(
      "tenant,day,model,region,requests,prompt_tokens,cached_tokens,completion_tokens,cost_usd,estimated_requests,estimated_prompt_tokens,estimated_completion_tokens,estimated_cost_usd",
    );
    const json = await usage(`?tenant=umbrella&from=${today}&to=${today}`);
    expect(lines.length - 1).toBe(json.length);
    expect(json.every((r) => r.tenant === "umbrella")).toBe(true);
    expect(await usage("?tenant=nobody")).toEqual([]);
    expect(await usage("?from=2000-01-01&to=2000-01-31")).toEqual([]);

    for (const [query, param] of [
      ["?from=2026-02-30", "from"],
      ["?to=yesterday", "to"],
      ["?from=2026-12-05&to=2026-12-04", "from"],
      ["?tenat=umbrella", "tenat"],
    ] as const) {
      const res = await call(`/admin/usage${query}`, { headers: admin });
      expect(res.status, query).toBe(400);
      const body = (await res.json()) as { error: { type: string; code: string; param: string } };
      expect(body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_usage_query", param });
    }
    expect((await call("/admin/usage", { headers: { authorization: "Bearer nope" } })).status).toBe(401);
  }, 30_000);

  it("an absurd bill never overflows a row, fails an export or makes a spend batch unsendable", async () => {
    // Two bills of 9e15 completion tokens ($3.6 billion each), as a broken node once had billed:
    // sent to eu's object as the region worker bills a request (recordUsage), for a budgeted tenant.
    const eu = loadConfig(env).regionByName.get("eu")!;
    const object = regionStub(env, eu);
    const absurd = {
      tenant: "absurd",
      model: "m-bill",
      estimated: false,
      promptTokens: 10,
      cachedTokens: 0,
      completionTokens: 9e15,
      costUsd: 3.6e9,
      budgeted: true,
    };
    await object.recordUsage(eu.init, absurd);
    await object.recordUsage(eu.init, absurd);
    // The flush writes the rows and sends the spend batch (the alarm).
    await runDurableObjectAlarm(object);
    const all = await call("/admin/usage", { headers: admin });
    expect(all.status).toBe(200);
    const rows = ((await all.json()) as { data: UsageRow[] }).data;
    const row = rows.find((r) => r.tenant === "absurd");
    // Each bill counted at what one request can cost, not dropped: the tokens were served.
    expect(row).toMatchObject({ requests: 2, completion_tokens: 2 * MAX_REQUEST_TOKENS, cost_usd: 2 * MAX_REQUEST_USD });
    // Other tenants' rows are still exported beside it.
    expect(rows.some((r) => r.tenant === "umbrella")).toBe(true);
    // The budget ledger accepted the batch: its totals hold the clamped spend.
    const today = utcDay(Date.now());
    const ledger = env.REGION.getByName(SPEND_LEDGER_NAME);
    const totals = await vi.waitFor(
      async () => {
        const t = (await ledger.spend({ source: "probe", seq: 1, spends: [], periods: [today] })).totals.find((x) => x.tenant === "absurd");
        expect(t).toBeDefined();
        return t!;
      },
      { timeout: 10_000, interval: 100 },
    );
    expect(totals.tokens).toBe(2 * (MAX_REQUEST_TOKENS + 10));

    // A row stored past 2^53 before sums saturated (as the issue found it) is exported at the bound.
    await runInDurableObject(object, (_instance, state) => {
      state.storage.sql.exec(
        `INSERT INTO usage VALUES ('corrupt', ?, 'm-bill', 2, 10, 0, 18000000000000000, 7200000000, 0, 0, 0, 0)`,
        today,
      );
    });
    const again = await call(`/admin/usage?from=${today}&to=${today}`, { headers: admin });
    expect(again.status).toBe(200);
    const corrupt = ((await again.json()) as { data: UsageRow[] }).data.find((r) => r.tenant === "corrupt");
    expect(corrupt?.completion_tokens).toBe(MAX_TOKENS_SUM);
    // And a bill added to it saturates there instead of going further.
    await object.recordUsage(eu.init, { ...absurd, tenant: "corrupt" });
    const csv = await call(`/admin/usage?tenant=corrupt&from=${today}&to=${today}`, { headers: { ...admin, accept: "text/csv" } });
    expect(csv.status).toBe(200);
    expect(await csv.text()).toContain(String(MAX_TOKENS_SUM));
  }, 30_000);
});
