/**
 * GET /admin/history: the last hour in buckets and the recent decisions, as the dashboard opens
 * with them, kept by each region's object rather than by the page.
 */
import { describe, expect, it } from "vitest";
import type { RegionHistoryView } from "../../src/core/region/index.ts";
import { ACME_KEY, TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { call, chat, readChunks, registerAll } from "../helpers.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

describe("GET /admin/history", () => {
  it("holds what the region routed and measured before anyone looked, and why each request went where it did", async () => {
    await registerAll([
      { id: "hist-a", region: "us", models: ["m-meter"] },
      { id: "hist-b", region: "us", models: ["m-meter"] },
    ]);
    const secret = "a private system prompt 5d1e";
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await chat(
        {
          model: "m-meter",
          stream: true,
          messages: [
            { role: "system", content: secret + " " + "s".repeat(2_000) },
            { role: "user", content: `turn ${i}` },
          ],
        },
        { headers: { "x-warmpath-region": "us" } },
      );
      await readChunks(res);
      ids.push(res.headers.get("x-request-id")!);
    }
    await new Promise((r) => setTimeout(r, 50)); // completions are recorded after the streams end
    const res = await call("/admin/history", { headers: admin });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain("private system prompt");
    expect(text).not.toContain(ACME_KEY);
    const { regions } = JSON.parse(text) as { regions: RegionHistoryView[] };
    const us = regions.find((r) => r.region === "us")!;
    expect(us.bucketMs).toBe(10_000);
    const sum = (f: (b: RegionHistoryView["buckets"][number]) => number) => us.buckets.reduce((n, b) => n + f(b), 0);
    expect(sum((b) => b.routed)).toBe(3);
    expect(sum((b) => b.measuredPromptTokens)).toBeGreaterThan(0);
    // The second and third turns reuse the first's system prompt: the nodes say so.
    expect(sum((b) => b.measuredCachedTokens)).toBeGreaterThan(0);
    const perNode = sum((b) => (b.nodes["hist-a"]?.decodeTokens ?? 0) + (b.nodes["hist-b"]?.decodeTokens ?? 0));
    expect(perNode).toBeGreaterThan(0);
    // Newest first, each with its node, decision, candidates and end.
    expect(us.decisions.slice(0, 3).map((d) => d.requestId)).toEqual([...ids].reverse());
    for (const d of us.decisions.slice(0, 3)) {
      expect(d).toMatchObject({ tenant: "acme", model: "m-meter", status: "ok" });
      expect(["hist-a", "hist-b"]).toContain(d.node);
      expect(d.considered.map((c) => c.node).sort()).toEqual(["hist-a", "hist-b"]);
      expect(d.measuredCachedTokens).not.toBeNull();
    }
    expect(us.decisions[0]!.decision).toBe("prefix-hit");
  });

  it("needs the admin token outside local development", async () => {
    expect((await call("/admin/history", { headers: { authorization: "Bearer nope" } })).status).toBe(401);
  });
});
