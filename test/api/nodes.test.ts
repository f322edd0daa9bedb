/**
 * The node API and the region Durable Object's durable state: reports, validation, leaving,
 * expiry by alarm, surviving eviction, and the admin state.
 */
import { env, exports } from "cloudflare:workers";
import { evictDurableObject, runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { TEST_ADMIN_TOKEN, TEST_NODE_TOKEN } from "../fixtures/config.ts";
import { call, chat, deregister, nodeUrl, registerAll, report } from "../helpers.ts";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

async function state(region: string): Promise<RegionSnapshot> {
  const res = await call(`/admin/state/${region}`, { headers: admin });
  expect(res.status).toBe(200);
  return res.json<RegionSnapshot>();
}

function post(body: unknown, token: string | null = TEST_NODE_TOKEN) {
  return call("/v1/nodes/report", {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
}

const validReport = {
  node_id: "v1",
  region: "us",
  url: "http://v1.ok.node.test",
  models: ["m-us"],
  kv_capacity_tokens: 100_000,
  running: 1,
  waiting: 0,
  kv_usage: 0.25,
};

describe("node reports", () => {
  it("registers a node on its first valid report and shows its load", async () => {
    const res = await post(validReport);
    expect(res.status).toBe(200);
    const body = await res.json<{ ok: boolean; node_id: string; expires_after_ms: number; node_secret: string }>();
    expect(body).toMatchObject({ ok: true, node_id: "v1", expires_after_ms: 15_000, registered: true });
    expect(body.node_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const s = await state("us");
    const node = s.nodes.find((n) => n.id === "v1")!;
    expect(node.url).toBe("http://v1.ok.node.test");
    expect(node.load.report).toMatchObject({ running: 1, waiting: 0, kvUsage: 0.25 });
  });

  it("401 without or with a wrong node token", async () => {
    expect((await post(validReport, null)).status).toBe(401);
    const wrong = await post(validReport, "not-the-token");
    expect(wrong.status).toBe(401);
    expect((await wrong.json<{ error: { code: string } }>()).error.code).toBe("invalid_node_token");
  });

  it.each([
    [{ ...validReport, node_id: "Bad Id!" }, "node_id"],
    [{ ...validReport, url: "ftp://x" }, "url"],
    [{ ...validReport, kv_capacity_tokens: -5 }, "kv_capacity_tokens"],
    [{ ...validReport, kv_usage: 1.5 }, "kv_usage"],
    [{ ...validReport, models: [] }, "models"],
    [{ ...validReport, running: "three" }, "running"],
    [{ ...validReport, max_running_requests: 0 }, "max_running_requests"],
    [{ ...validReport, max_running_requests: 70_000 }, "max_running_requests"],
    [{ ...validReport, max_running_requests: 2.5 }, "max_running_requests"],
  ])("400 naming the bad field %#", async (body, field) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    const error = (await res.json<{ error: { param: string; message: string; code: string } }>()).error;
    expect(error.code).toBe("invalid_report");
    expect(error.param).toBe(field);
    expect(error.message).toContain(field);
  });

  it("takes the largest report the contract allows: 64 model names of 256 characters", async () => {
    const models = Array.from({ length: 64 }, (_, i) => `m-${String(i).padStart(2, "0")}-${"é".repeat(251)}`);
    expect(models.every((m) => m.length === 256)).toBe(true);
    const res = await report({ id: "many-models", region: "eu", models });
    expect(res.status).toBe(200);
  });

  it("400 for an unknown region", async () => {
    const res = await post({ ...validReport, region: "mars" });
    expect(res.status).toBe(400);
    expect((await res.json<{ error: { param: string } }>()).error.param).toBe("region");
  });

  it("removes a node on DELETE with its node secret; 404 for one that is not registered", async () => {
    await registerAll([{ id: "leaver", region: "us", models: ["m-us"] }]);
    const del = await deregister("us", "leaver");
    expect(del.status).toBe(200);
    expect((await state("us")).nodes.map((n) => n.id)).not.toContain("leaver");
    const again = await call("/v1/nodes/us/leaver", { method: "DELETE", headers: admin });
    expect(again.status).toBe(404);
    const withRegionToken = await call("/v1/nodes/us/leaver", {
      method: "DELETE",
      headers: { authorization: `Bearer ${TEST_NODE_TOKEN}` },
    });
    expect(withRegionToken.status).toBe(404);
  });
});

describe("durable state", () => {
  it("expires a node whose reports stop (alarm)", async () => {
    await registerAll([{ id: "quiet", region: "ap", models: ["m-expire"] }]);
    const ok = await chat({ model: "m-expire", messages: [{ role: "user", content: "before" }] });
    expect(ok.status).toBe(200);
    await ok.arrayBuffer();
    await new Promise((r) => setTimeout(r, 450)); // the ap region's silence timeout is 300 ms
    // The alarm may already have fired on its own; if it is still pending, run it now.
    await runDurableObjectAlarm(env.REGION.getByName("ap"));
    expect((await state("ap")).nodes.map((n) => n.id)).not.toContain("quiet");
    const after = await chat({ model: "m-expire", messages: [{ role: "user", content: "after" }] });
    expect(after.status).toBe(503);
  });

  it("keeps the node table across a Durable Object eviction", async () => {
    await registerAll([
      { id: "keep-1", region: "us", models: ["m-us"], kvCapacityTokens: 123_456, bootId: "boot-a" },
      { id: "keep-2", region: "us", models: ["m-us"] },
    ]);
    const stub = env.REGION.getByName("us");
    await evictDurableObject(stub);
    const s = await state("us");
    const kept = s.nodes.find((n) => n.id === "keep-1")!;
    expect(kept).toBeDefined();
    expect(kept.kvCapacityTokens).toBe(123_456);
    expect(kept.url).toBe(nodeUrl({ id: "keep-1" }));
    expect(s.nodes.map((n) => n.id)).toContain("keep-2");
    // ...and routes to it without a new report.
    const res = await chat(
      { model: "m-us", messages: [{ role: "user", content: "after eviction" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });

  it("forgets a restarted node's cache (new boot id)", async () => {
    await registerAll([{ id: "phoenix", region: "eu", models: ["m-eu"], bootId: "first-life" }]);
    const prompt = {
      model: "m-eu",
      messages: [
        { role: "system", content: "y".repeat(4000) },
        { role: "user", content: "q" },
      ],
    };
    (await chat(prompt)).arrayBuffer();
    const before = (await state("eu")).nodes.find((n) => n.id === "phoenix")!;
    expect(before.indexBlocks).toBeGreaterThan(0);
    await report({ id: "phoenix", region: "eu", models: ["m-eu"], bootId: "second-life" });
    const after = (await state("eu")).nodes.find((n) => n.id === "phoenix")!;
    expect(after.indexBlocks).toBe(0);
  });
});

describe("admin state", () => {
  it("requires the admin token, except on a local development server", async () => {
    const remote = (headers: Record<string, string> = {}) =>
      exports.default.fetch(new Request("https://router.example.com/admin/state", { headers }));
    expect((await remote()).status).toBe(401);
    expect((await remote({ authorization: "Bearer nope" })).status).toBe(401);
    const withToken = await remote(admin);
    expect(withToken.status).toBe(200);
    expect((await call("/admin/state")).status).toBe(200); // localhost, development mode
    expect((await call("/admin/state", { headers: { authorization: "Bearer nope" } })).status).toBe(401);
  });

  it("reports decisions, predicted and measured cache hits per node", async () => {
    await registerAll([{ id: "metered", region: "us", models: ["m-meter"] }]);
    for (let i = 0; i < 3; i++) {
      const res = await chat({
        model: "m-meter",
        stream: true,
        messages: [
          { role: "system", content: "z".repeat(3000) },
          { role: "user", content: `q${i}` },
        ],
      });
      await res.text();
    }
    await new Promise((r) => setTimeout(r, 50)); // completions are recorded after the stream ends
    const all = await call("/admin/state", { headers: admin });
    const body = await all.json<{ regions: RegionSnapshot[] }>();
    expect(body.regions.map((r) => r.region)).toEqual(["eu", "us", "ap", "rr", "shd", "sat"]);
    const node = body.regions.find((r) => r.region === "us")!.nodes.find((n) => n.id === "metered")!;
    expect(node.metrics.routed).toBe(3);
    expect(node.metrics.decisions["cold-spread"]).toBe(1);
    expect(node.metrics.decisions["prefix-hit"]).toBe(2);
    expect(node.metrics.predictedCachedTokens).toBeGreaterThan(0);
    expect(node.metrics.completed).toBe(3);
    // The fake node reports half the prompt as cached: the router records the node's own figure.
    expect(node.metrics.measuredRequests).toBe(3);
    expect(node.metrics.measuredCachedTokens).toBeGreaterThan(0);
    expect(node.load.inflight).toBe(0);
  });

  it("a request the node refused (4xx) is neither predicted nor left in the index", async () => {
    const node = { id: "learner", region: "us", models: ["m-learn"] };
    const body = {
      model: "m-learn",
      messages: [
        { role: "system", content: "r".repeat(4000) },
        { role: "user", content: "a question the node refuses" },
      ],
    };
    await registerAll([{ ...node, mode: "bad" }]);
    const refused = await chat(body);
    expect(refused.status).toBe(400);
    await refused.text();
    await new Promise((r) => setTimeout(r, 50)); // the completion is recorded after the answer
    // The same node, now accepting: the refused prompt was never computed there, so no match.
    await registerAll([node]);
    const again = await chat(body);
    expect(again.status).toBe(200);
    expect(again.headers.get("x-warmpath-node")).toBe("learner");
    expect(again.headers.get("x-warmpath-prefix-match")).toMatch(/^0\//);
    await again.text();
    await new Promise((r) => setTimeout(r, 50));
    const state = await (await call("/admin/state", { headers: admin })).json<{ regions: RegionSnapshot[] }>();
    const m = state.regions.find((r) => r.region === "us")!.nodes.find((n) => n.id === "learner")!.metrics;
    expect(m.refused).toBe(1);
    expect(m.completed).toBe(1);
    expect(m.predictedCachedTokens).toBe(0);
    // The accepted answer's usage was compared with the prediction (the fake node reports half cached).
    expect(m.compared).toBe(1);
  });
});
