/**
 * A tenant's commitment through the real workers and region object (docs/ADMISSION.md): the
 * configured `committed_prompt_tokens_per_minute` reaches the region, and a request past it ranks
 * after every class, which its answer reports as `x-warmpath-priority: batch`. Its own file: the
 * region's tenants start with no demand, so the tenant without a commitment is judged alone.
 */
import { describe, expect, it } from "vitest";
import { call, chat, registerAll } from "../helpers.ts";
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
});
