/**
 * A tenant's commitment through the real workers and region object (docs/ADMISSION.md): the
 * configured `committed_prompt_tokens_per_minute` reaches the region, and a request past it ranks
 * after every class, which its answer reports as `x-warmpath-priority: batch`, and one refused for it
 * is told it is past its commitment, not over its fair share. Its own file: the
 * region's tenants start with no demand, so the tenant without a commitment is judged alone.
 */
import { describe, expect, it, vi } from "vitest";
import { call, chat, registerAll } from "../helpers.ts";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { STARK_KEY, TEST_ADMIN_TOKEN } from "../fixtures/config.ts";

const pinned = { "x-warmpath-region": "us" };
const body = (tag: string) => ({
  model: "m-commit",
  stream: true,
  messages: [{ role: "user", content: `${tag} ` + "lorem ipsum ".repeat(60) }],
});

describe("commitments", () => {
  it("ranks a tenant past its commitment after every class; one without a commitment keeps the class it asked for", async () => {
    await registerAll([{ id: "commit-1", region: "us", models: ["m-commit"] }]);
    // acme has no commitment and is the region's only tenant: its class stands.
    const within = await chat(body("acme"), { headers: pinned });
    expect(within.status).toBe(200);
    expect(within.headers.get("x-warmpath-priority")).toBe("standard");
    expect(within.headers.get("x-warmpath-demoted")).toBeNull();
    await within.text();
    // stark is committed 1 prompt token a minute: its first request is past it.
    const past = await chat(body("stark"), { key: STARK_KEY, headers: pinned });
    expect(past.status).toBe(200);
    expect(past.headers.get("x-warmpath-priority")).toBe("batch");
    expect(past.headers.get("x-warmpath-demoted")).toBe("commitment");
    await past.text();
    // Counted for the operator, by tenant and why.
    const metrics = await (await call("/metrics", { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })).text();
    expect(metrics).toMatch(/^warmpath_tenant_demoted_total\{region="us",tenant="stark",reason="commitment"\} 1$/m);
    expect(metrics).toMatch(/^warmpath_tenant_demoted_total\{region="us",tenant="acme",reason="commitment"\} 0$/m);
  });

  it("refuses a tenant past its commitment whose node has a long queue with 429, saying it is past its commitment", async () => {
    // One node that takes long to start answering: what stark sends stays queued in the load model.
    await registerAll([{ id: "commit-full", region: "us", mode: "hangfirst", models: ["m-commit-full"] }]);
    const big = (tag: string) => ({ model: "m-commit-full", messages: [{ role: "user", content: `${tag} ` + "x".repeat(100_000) }] });
    const first = chat(big("one"), { key: STARK_KEY, headers: pinned });
    for (let i = 0; ; i++) {
      const state = await (
        await call("/admin/state/us", { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })
      ).json<RegionSnapshot>();
      if (state.nodes.find((n) => n.id === "commit-full")?.load.inflight === 1) break;
      if (i > 200) throw new Error("commit-full never had the first request in flight");
      await new Promise((r) => setTimeout(r, 20));
    }
    const lines = [vi.spyOn(console, "log"), vi.spyOn(console, "error")];
    const second = await chat(big("two"), { key: STARK_KEY, headers: pinned });
    const logged = lines.flatMap((spy) => spy.mock.calls.map((c) => String(c[0])));
    for (const spy of lines) spy.mockRestore();
    expect(second.status).toBe(429);
    expect(Number(second.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const { error } = await second.json<{ error: { code: string; message: string } }>();
    expect(error.code).toBe("tenant_over_share");
    expect(error.message).toMatch(/^This tenant is past its committed prompt tokens a minute in the regions that could serve it \(/);
    expect(error.message).not.toContain("fair share");
    // Its one refusal line says why, as the decision line of a request placed past it does.
    const refusal = logged.filter((l) => l.includes('"event":"refusal"')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(refusal).toHaveLength(1);
    expect(refusal[0]).toMatchObject({ reason: "over-share", demoted: "commitment", tenant: "stark" });
    expect((await first).status).not.toBe(429);
  }, 30_000);
});
