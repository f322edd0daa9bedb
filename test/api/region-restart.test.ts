/**
 * POST /admin/regions/{region}/restart: the region's Durable Object is aborted and constructed
 * again. What it keeps in memory (index, load model, counters) starts over; what it keeps in
 * storage (the node table) survives, and routing goes on without a single new report.
 */
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { call, chat, longSystemPrompt, nodeUrl, readChunks, registerAll } from "../helpers.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
const US = { "x-warmpath-region": "us" };

async function state(): Promise<RegionSnapshot> {
  const res = await call("/admin/state/us", { headers: admin });
  expect(res.status).toBe(200);
  return res.json<RegionSnapshot>();
}

const restart = (region: string, headers: Record<string, string> = admin) =>
  call(`/admin/regions/${region}/restart`, { method: "POST", headers });

function ask(content: string, stream = false) {
  return chat(
    {
      model: "m-us",
      stream,
      messages: [
        { role: "system", content: longSystemPrompt("restart") },
        { role: "user", content },
      ],
    },
    { headers: US },
  );
}

describe("POST /admin/regions/{region}/restart", () => {
  it("needs the admin token outside local development; 404 for an unknown region", async () => {
    const remote = (headers: Record<string, string> = {}) =>
      exports.default.fetch(new Request("https://router.example.com/admin/regions/us/restart", { method: "POST", headers }));
    expect((await remote()).status).toBe(401);
    expect((await remote({ authorization: "Bearer nope" })).status).toBe(401);
    const unknown = await restart("mars");
    expect(unknown.status).toBe(404);
    expect((await unknown.json<{ error: { code: string } }>()).error.code).toBe("unknown_region");
  });

  it("drops the object's soft state, keeps its node table, and the next request routes", async () => {
    await registerAll([
      { id: "rs-a", region: "us", models: ["m-us"], kvCapacityTokens: 150_000, bootId: "rs-a-boot", engine: "sglang" },
      { id: "rs-b", region: "us", models: ["m-us"] },
    ]);
    const first = await ask("before the restart");
    expect(first.status).toBe(200);
    await first.text();
    const before = await state();
    const served = before.nodes.find((n) => n.metrics.routed === 1)!;
    expect(served.indexBlocks).toBeGreaterThan(0);

    // A stream already relaying when the object goes: the relay does not need the object.
    const inFlight = await ask("streamed across the restart", true);
    expect(inFlight.status).toBe(200);

    const res = await restart("us");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ region: "us", restarted: true, objects: 1 });
    const tail = (await readChunks(inFlight)).map((c) => c.text).join("");
    expect(tail.trimEnd().endsWith("data: [DONE]")).toBe(true);

    const after = await state();
    // Constructed again: nothing routed or indexed by this instance yet...
    expect(after.nodes.every((n) => n.metrics.routed === 0 && n.indexBlocks === 0)).toBe(true);
    // ...but the node table came back from storage, as it was.
    const kept = after.nodes.find((n) => n.id === "rs-a")!;
    expect(kept).toMatchObject({ url: nodeUrl({ id: "rs-a" }), kvCapacityTokens: 150_000, available: true, engine: "sglang" });
    // A node that never said its engine is `other`.
    expect(after.nodes.find((n) => n.id === "rs-b")!.engine).toBe("other");

    const next = await ask("after the restart");
    expect(next.status).toBe(200);
    expect(["rs-a", "rs-b"]).toContain(next.headers.get("x-warmpath-node"));
    expect(next.headers.get("x-warmpath-decision")).not.toBe("stateless");
    await next.text();
  });
});
