/** Per-tenant rate limits through the worker: OpenAI's 429, its headers, and no other region tried. */
import { describe, expect, it } from "vitest";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { call, chat, registerAll } from "../helpers.ts";
import { ACME_KEY, INITECH_KEY, TEST_ADMIN_TOKEN } from "../fixtures/config.ts";

const body = (text: string) => ({ model: "m-shared", messages: [{ role: "user", content: text }] });

describe("rate limits", () => {
  it("answers within the limit with x-ratelimit-* headers, then 429 rate_limit_exceeded with Retry-After", async () => {
    await registerAll([
      { id: "rl-eu", region: "eu", models: ["m-shared"] },
      { id: "rl-us", region: "us", models: ["m-shared"] },
    ]);
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await chat(body(`limited ${i}`), { key: INITECH_KEY });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ratelimit-limit-requests")).toBe("3");
      expect(res.headers.get("x-ratelimit-limit-tokens")).toBe("2000");
      remaining.push(res.headers.get("x-ratelimit-remaining-requests")!);
      await res.arrayBuffer();
    }
    expect(remaining).toEqual(["2", "1", "0"]);
    const refused = await chat(body("one too many"), { key: INITECH_KEY });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect(refused.headers.get("x-ratelimit-reset-requests")).toMatch(/^\d+(\.\d+)?s$/);
    const err = await refused.json<{ error: { type: string; code: string; message: string } }>();
    expect(err.error).toMatchObject({ type: "rate_limit_error", code: "rate_limit_exceeded" });
    // The nearest region refused it for the tenant's rate: the next one was not asked (another budget).
    const rejected = async (region: string) =>
      (await (await call(`/admin/state/${region}`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })).json<RegionSnapshot>())
        .rejected;
    expect((await rejected("eu")).rateLimited).toBe(1);
    expect((await rejected("us")).rateLimited).toBe(0);
    // Other tenants are untouched, and carry no rate-limit headers (they have no limits).
    const other = await chat(body("unlimited"), { key: ACME_KEY });
    expect(other.status).toBe(200);
    expect(other.headers.get("x-ratelimit-limit-requests")).toBeNull();
    await other.arrayBuffer();
  });

  it("counts estimated prompt tokens in the same budget (a fresh region's)", async () => {
    // The us region has its own budget (limits hold per region): 2,000 tokens a minute.
    const big = await chat(body("y".repeat(12_000)), { key: INITECH_KEY, headers: { "x-warmpath-region": "us" } }); // ~3,000 tokens > 2,000: judged against a full minute
    expect(big.status).toBe(200);
    await big.arrayBuffer();
    const next = await chat(body("z".repeat(4_000)), { key: INITECH_KEY, headers: { "x-warmpath-region": "us" } });
    expect(next.status).toBe(429);
    // The bucket refills at 2,000 a minute (33 a second): what the delay between the two requests
    // refilled (a few tokens on a loaded machine) is far below this request's ~1,000.
    expect(Number(next.headers.get("x-ratelimit-remaining-tokens"))).toBeLessThan(100);
    expect((await next.json<{ error: { message: string } }>()).error.message).toMatch(/prompt tokens per minute/);
  });
});
