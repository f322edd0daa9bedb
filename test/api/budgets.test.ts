/**
 * Budgets (docs/USAGE.md, src/core/usage/spend.ts): a tenant's spend in one region counts in every
 * other; once spent, 429 `insufficient_quota` saying which budget and when it resets; the overshoot
 * (what another region admitted before the budget ledger told it) is measured against the ledger
 * and bounded; a budget found spent survives a restart of the region objects.
 */
import { describe, expect, it, vi } from "vitest";
import { ACME_KEY, TEST_ADMIN_TOKEN, WILLY_KEY, WILLY_TOKENS_PER_DAY, WONKA_KEY, WONKA_TOKENS_PER_DAY } from "../fixtures/config.ts";
import { call, CF_FRANKFURT, registerAll } from "../helpers.ts";
import type { UsageRow } from "../../src/contracts/usage.ts";
import { dayEndsAt } from "../../src/core/usage/periods.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
/** ~800 characters: ~200 prompt tokens (the fake node counts 4 characters a token), ~210 a request with its answer. */
const PROMPT = "budget ".repeat(115);

let sent = 0;
async function ask(region: string, key = WONKA_KEY): Promise<{ status: number; tokens: number; body: string; res: Response }> {
  const res = await call("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}`, "x-warmpath-region": region },
    body: JSON.stringify({ model: "m-budget", messages: [{ role: "user", content: `${sent++} ${PROMPT}` }] }),
    cf: CF_FRANKFURT,
  });
  const body = await res.text();
  if (res.status !== 200) return { status: res.status, tokens: 0, body, res };
  const usage = (JSON.parse(body) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
  return { status: 200, tokens: usage.prompt_tokens + usage.completion_tokens, body, res };
}

async function ledgerTokens(): Promise<number> {
  const res = await call("/admin/usage?tenant=wonka", { headers: admin });
  const rows = ((await res.json()) as { data: UsageRow[] }).data;
  return rows.reduce((s, r) => s + r.prompt_tokens + r.completion_tokens + r.estimated_prompt_tokens + r.estimated_completion_tokens, 0);
}

describe("a tenant's budget", () => {
  it("holds across two regions: refused everywhere once spent, with the overshoot measured and bounded", async () => {
    await registerAll([
      { id: "budget-eu", region: "eu", models: ["m-budget"] },
      { id: "budget-us", region: "us", models: ["m-budget"] },
    ]);
    // Spend the budget in eu, one request at a time, until eu refuses.
    let carried = 0;
    let largest = 0;
    let refusal: Awaited<ReturnType<typeof ask>> | undefined;
    for (let i = 0; i < 40 && !refusal; i++) {
      const r = await ask("eu");
      if (r.status === 200) {
        carried += r.tokens;
        largest = Math.max(largest, r.tokens);
      } else refusal = r;
    }
    expect(refusal, "eu never refused").toBeDefined();
    expect(refusal!.status).toBe(429);
    const error = (JSON.parse(refusal!.body) as { error: { type: string; code: string; message: string; param: null } }).error;
    expect(error).toMatchObject({ type: "insufficient_quota", code: "insufficient_quota", param: null });
    const resets = new Date(dayEndsAt(Date.now())).toISOString().replace(".000Z", "Z");
    expect(error.message).toContain("3,000 tokens a day (UTC)");
    expect(error.message).toContain(`resets at ${resets}`);
    const retryAfter = Number(refusal!.res.headers.get("retry-after"));
    expect(Math.abs(retryAfter - (dayEndsAt(Date.now()) - Date.now()) / 1000)).toBeLessThan(60);
    // Spent, in eu's own view: at least the budget; over it by less than one request and the bills
    // still on their way when the last request was admitted (sequential requests: at most one).
    expect(carried).toBeGreaterThanOrEqual(WONKA_TOKENS_PER_DAY);
    expect(carried - WONKA_TOKENS_PER_DAY).toBeLessThan(2 * largest);

    // us has spent nothing itself: it refuses once the budget ledger has told it (one flush
    // interval, 200 ms here, and a round trip). What it admits before is the overshoot.
    let admittedInUs = 0;
    const us = await vi.waitFor(
      async () => {
        const r = await ask("us");
        if (r.status === 200) {
          admittedInUs++;
          carried += r.tokens;
        }
        expect(r.status).toBe(429);
        return r;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(JSON.parse(us.body)).toMatchObject({ error: { code: "insufficient_quota" } });

    // The ledger holds exactly what the answers carried; the overshoot is what it holds past the budget.
    await vi.waitFor(async () => expect(await ledgerTokens()).toBe(carried), { timeout: 10_000, interval: 100 });
    const overshoot = carried - WONKA_TOKENS_PER_DAY;
    console.log(JSON.stringify({ event: "budget_overshoot", budget: WONKA_TOKENS_PER_DAY, spent: carried, overshoot, admittedInUs }));
    // Bounded: the request that crossed in eu, one in flight, and what us admitted in one interval.
    expect(overshoot).toBeLessThan((2 + admittedInUs) * largest);

    // A tenant without a budget is not affected.
    expect((await ask("us", ACME_KEY)).status).toBe(200);

    // Restarted objects remember the spent budget before their first exchange answers.
    for (const region of ["eu", "us"])
      expect((await call(`/admin/regions/${region}/restart`, { method: "POST", headers: admin })).status).toBe(200);
    expect((await ask("eu")).status).toBe(429);
    expect((await ask("us")).status).toBe(429);
    await vi.waitFor(async () => expect(await ledgerTokens()).toBe(carried), { timeout: 10_000, interval: 100 });
  }, 30_000);
});

/**
 * Reserve, then settle (src/core/usage/reservations.ts): tenant `willy` (3,000 tokens a day) and
 * eu's own models, so its holds are its own. A `slowfirst` node keeps every request of a burst in
 * flight at once (600 ms before its first byte).
 */
describe("a budget held by requests in flight", () => {
  const MAX_TOKENS = 50;
  let n = 0;
  /** `maxTokens` null: the request sets none. */
  async function askWilly(model: string, maxTokens: number | null = MAX_TOKENS, requestId?: string) {
    const res = await call("/v1/chat/completions", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${WILLY_KEY}`,
        "x-warmpath-region": "eu",
        ...(requestId === undefined ? {} : { "x-request-id": requestId }),
      },
      body: JSON.stringify({
        model,
        messages: [{ role: "user", content: `${n++} ${PROMPT}` }],
        ...(maxTokens === null ? {} : { max_tokens: maxTokens }),
      }),
      cf: CF_FRANKFURT,
    });
    const body = await res.text();
    const retryAfter = res.headers.get("retry-after");
    if (res.status !== 200) return { status: res.status, tokens: 0, body, retryAfter };
    const usage = (JSON.parse(body) as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
    return { status: 200, tokens: usage.prompt_tokens + usage.completion_tokens, body, retryAfter };
  }
  const code = (body: string) => (JSON.parse(body) as { error: { code: string; message: string } }).error;
  /** What the tests so far spent (their answered requests). */
  let spentFirst = 0;

  async function willyLedger(): Promise<number> {
    const res = await call("/admin/usage?tenant=willy", { headers: admin });
    const rows = ((await res.json()) as { data: UsageRow[] }).data;
    return rows.reduce((s, r) => s + r.prompt_tokens + r.completion_tokens + r.estimated_prompt_tokens + r.estimated_completion_tokens, 0);
  }

  it("requests at once with the same x-request-id each take their own hold: only as many as the budget holds are answered", async () => {
    await registerAll([
      { id: "hold-slow", region: "eu", mode: "slowfirst", models: ["m-hold"] },
      { id: "hold-fail", region: "eu", mode: "fail", models: ["m-hold-fail"] },
      { id: "hold-bad", region: "eu", mode: "bad", models: ["m-hold-bad"] },
    ]);
    // Each holds ~1,200 tokens (its prompt and max_tokens 1,000) of the 3,000: two fit at once.
    // Sharing the client's id, every request after the first took up the first's hold, so each
    // saw one hold besides its own and all four were answered.
    const answers = await Promise.all(Array.from({ length: 4 }, () => askWilly("m-hold", 1_000, "same-id")));
    const ok = answers.filter((a) => a.status === 200);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    expect(ok.length).toBeLessThanOrEqual(2);
    for (const refused of answers.filter((a) => a.status !== 200)) {
      expect(refused.status).toBe(429);
      expect(code(refused.body)).toMatchObject({ code: "insufficient_quota" });
      expect(code(refused.body).message).toContain("held by its requests in flight");
    }
    for (const a of ok) spentFirst += a.tokens;
    // Its hold settled by its bill: the next test starts with nothing held.
    await vi.waitFor(async () => expect(await willyLedger()).toBe(spentFirst), { timeout: 10_000, interval: 100 });
  }, 40_000);

  it("a request whose nodes all failed, or that its node refused, does not keep its hold", async () => {
    // No max_tokens: it holds its prompt plus 4,096 tokens, more than the whole budget, so while
    // it holds, nothing else of willy's is admitted in eu.
    const failed = await askWilly("m-hold-fail", null);
    expect(failed.status).toBeGreaterThanOrEqual(500);
    const held = await askWilly("m-hold");
    expect(held.status).toBe(429);
    expect(code(held.body)).toMatchObject({ code: "insufficient_quota" });
    expect(code(held.body).message).toContain("held by its requests in flight");
    expect(held.retryAfter).toBe("1");
    // Released within its idle grace (10 s: a retry or a continuation would have taken it up by then).
    const admitted = await vi.waitFor(
      async () => {
        const r = await askWilly("m-hold");
        expect(r.status).toBe(200);
        return r;
      },
      { timeout: 20_000, interval: 500 },
    );
    // A node's own refusal (400) bills nothing and releases the hold at once.
    expect((await askWilly("m-hold-bad", null)).status).toBe(400);
    const after = await askWilly("m-hold");
    expect(after.status).toBe(200);
    spentFirst += admitted.tokens + after.tokens;
  }, 40_000);

  it("twenty requests at once are answered only while their holds fit; the spend stays within one request of the budget", async () => {
    await vi.waitFor(async () => expect(await willyLedger()).toBe(spentFirst), { timeout: 10_000, interval: 100 });
    let carried = spentFirst;
    const BURST = 20;
    let largest = 0;
    let bursts = 0;
    let heldRefusals = 0;
    // Bursts until every request of one is refused because the budget is spent.
    for (;;) {
      bursts++;
      const answers = await Promise.all(Array.from({ length: BURST }, () => askWilly("m-hold")));
      const ok = answers.filter((a) => a.status === 200);
      for (const a of answers) {
        if (a.status === 200) continue;
        expect(a.status).toBe(429);
        expect(code(a.body).code).toBe("insufficient_quota");
        if (code(a.body).message.includes("held by its requests in flight")) heldRefusals++;
      }
      // Never more admitted at once than the budget left holds (each holds ~250 tokens: prompt and max_tokens).
      expect(ok.length).toBeLessThan(BURST / 2);
      for (const a of ok) {
        carried += a.tokens;
        largest = Math.max(largest, a.tokens);
      }
      if (ok.length === 0 && answers.every((a) => code(a.body).message.includes("has spent its budget"))) break;
      expect(bursts).toBeLessThan(12);
    }
    expect(heldRefusals).toBeGreaterThan(0);
    await vi.waitFor(async () => expect(await willyLedger()).toBe(carried), { timeout: 10_000, interval: 100 });
    const overshoot = carried - WILLY_TOKENS_PER_DAY;
    console.log(
      JSON.stringify({ event: "budget_held_overshoot", budget: WILLY_TOKENS_PER_DAY, spent: carried, overshoot, bursts, heldRefusals }),
    );
    // One region, one object: at most the last request admitted when nothing else was in flight,
    // whatever the concurrency (before holds, all twenty of the first burst were answered).
    expect(overshoot).toBeLessThanOrEqual(largest + MAX_TOKENS);
  }, 60_000);
});
