/**
 * Placing a request through the region's object (src/region/place.ts): the route call carries the
 * init's fingerprint only, and an object that does not hold the init (never called, or restarted
 * with a stored init it no longer accepts) gets it on a second call, so the request is placed by
 * the object, not statelessly.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { dispatchMeta } from "../fixtures/dispatch.ts";
import { call, chat, registerAll } from "../helpers.ts";
import { loadConfig } from "../../src/config/load.ts";
import type { AdminRegionState } from "../../src/contracts/admin.ts";
import type { RegionContext } from "../../src/region/context.ts";
import { tryNodes } from "../../src/region/place.ts";
import { RegionTrace } from "../../src/region/trace.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

async function askRr(content: string): Promise<Response> {
  const res = await chat({ model: "m-rr", messages: [{ role: "user", content }] });
  await res.arrayBuffer();
  return res;
}

describe("placing through the region's object", () => {
  it("sends the init to an object that asks for it, and places the request there (not statelessly)", async () => {
    // This file's storage is its own: the rr object has never been called.
    const first = await askRr("the object's first call");
    expect(first.status).toBe(200);
    expect(first.headers.get("x-warmpath-decision")).not.toBe("stateless");
    expect(first.headers.get("x-warmpath-policy")).toBe("round-robin");
    const second = await askRr("on the fingerprint alone");
    expect(second.status).toBe(200);
    expect(second.headers.get("x-warmpath-policy")).toBe("round-robin");

    // A restarted object whose stored init this version no longer accepts asks again, and gets it.
    await runInDurableObject(env.REGION.getByName("rr"), (_instance, state) => {
      state.storage.sql.exec(`UPDATE config SET value = json_set(value, '$.fingerprint', ?) WHERE key = 'init'`, "x".repeat(2000));
    });
    expect((await call("/admin/regions/rr/restart", { method: "POST", headers: admin })).status).toBe(200);
    const after = await askRr("after the restart");
    expect(after.status).toBe(200);
    expect(after.headers.get("x-warmpath-policy")).toBe("round-robin");
  });
});

describe("a placement whose client went while it waited", () => {
  it("calls no node and is settled at once, so the object counts nothing in flight", async () => {
    await registerAll([{ id: "gone-a", region: "us", models: ["m-gone"] }]);
    const config = loadConfig(env, { kind: "region", served: undefined });
    const region = config.regionByName.get("us")!;
    const request = dispatchMeta({ model: "m-gone" });
    const waits: Promise<unknown>[] = [];
    const gone = new AbortController();
    gone.abort(new Error("the client went"));
    const body = new TextEncoder().encode(JSON.stringify({ model: "m-gone", messages: [{ role: "user", content: "hi" }] }));
    const rc: RegionContext = {
      env,
      ctx: { waitUntil: (p) => void waits.push(p) },
      config,
      region,
      request,
      body,
      usageInjected: false,
      completionBudget: undefined,
      holdKey: "gone-1",
      trace: new RegionTrace(request, "us"),
      clientGone: gone.signal,
    };
    const tried = await tryNodes(rc, { shard: 0, exclude: [], body, own: [] });
    expect(tried.ok).toBe(false);
    if (!tried.ok) expect(tried.refusal.attempts).toEqual([{ region: "us", node: "gone-a", outcome: "client gone" }]);
    await Promise.all(waits);
    const state = await (await call("/admin/state/us", { headers: admin })).json<AdminRegionState>();
    const node = state.nodes.find((n) => n.id === "gone-a")!;
    expect(node.load.inflight).toBe(0);
    expect(node.metrics.cancelled).toBe(1);
  });
});
