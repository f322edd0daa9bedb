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
import type { DispatchRequest } from "../../src/contracts/region-service.ts";
import { tryNodes } from "../../src/region/place.ts";
import { RegionTrace } from "../../src/region/trace.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

async function askRr(content: string): Promise<Response> {
  const res = await chat({ model: "m-rr", messages: [{ role: "user", content }] });
  await res.arrayBuffer();
  return res;
}

/** A region worker's context for `request` in region us, as dispatch builds it, with the client's signal to abort and the work it leaves behind. */
function regionContext(request: DispatchRequest, content: string, holdKey: string) {
  const config = loadConfig(env, { kind: "region", served: undefined });
  const waits: Promise<unknown>[] = [];
  const gone = new AbortController();
  const body = new TextEncoder().encode(JSON.stringify({ model: request.model, messages: [{ role: "user", content }] }));
  const rc: RegionContext = {
    env,
    ctx: { waitUntil: (p) => void waits.push(p) },
    config,
    region: config.regionByName.get("us")!,
    request,
    body,
    usageInjected: false,
    completionBudget: undefined,
    holdKey,
    trace: new RegionTrace(request, "us"),
    clientGone: gone.signal,
  };
  return { rc, body, waits, gone };
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
    const { rc, body, waits, gone } = regionContext(dispatchMeta({ model: "m-gone" }), "hi", "gone-1");
    const trying = tryNodes(rc, { shard: 0, exclude: [], body, own: [] });
    // Gone once the object was asked (tryNodes asks before its first await), before its answer.
    gone.abort(new Error("the client went"));
    const tried = await trying;
    expect(tried.ok).toBe(false);
    if (!tried.ok) expect(tried.refusal.attempts).toEqual([{ region: "us", node: "gone-a", outcome: "client gone" }]);
    await Promise.all(waits);
    const state = await (await call("/admin/state/us", { headers: admin })).json<AdminRegionState>();
    const node = state.nodes.find((n) => n.id === "gone-a")!;
    expect(node.load.inflight).toBe(0);
    expect(node.metrics.cancelled).toBe(1);
  });
});

describe("a queued request whose client goes", () => {
  it("leaves the region's queue at once: no node is called for it, and nothing waits behind it", async () => {
    await registerAll([{ id: "gone-q", region: "us", mode: "hangfirst", models: ["m-gone-q"] }]);
    // 40,000 tokens on the only node (4 s of prefill predicted, and it never answers): the batch
    // request after it fits its objective only once that prefill is done (test/api/admission.test.ts),
    // so it waits in the queue, for seconds.
    const first = chat(
      { model: "m-gone-q", stream: true, messages: [{ role: "user", content: "first " + "lorem ipsum ".repeat(13_334) }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    const queueDepth = async () =>
      ((await (await call("/admin/state/us", { headers: admin })).json<AdminRegionState>()).queue?.depth ?? []).reduce((a, b) => a + b, 0);
    const { rc, body, waits, gone } = regionContext(
      dispatchMeta({ model: "m-gone-q", requestId: "gone-q-2", promptTokens: 20_000, hashes: ["fedcba9876543210"], priority: "batch" }),
      "second",
      "gone-q-hold",
    );
    const inflight = async () =>
      (await (await call("/admin/state/us", { headers: admin })).json<AdminRegionState>()).nodes.find((n) => n.id === "gone-q")?.load
        .inflight;
    while ((await inflight()) !== 1) await new Promise((r) => setTimeout(r, 5));
    const tried = tryNodes(rc, { shard: 0, exclude: [], body, own: [] });
    while ((await queueDepth()) === 0) await new Promise((r) => setTimeout(r, 5));
    gone.abort(new Error("the client went"));
    const answer = await tried;
    expect(answer.ok).toBe(false);
    // No node: it left the queue, rather than being placed (and settled unanswered) at the first's first byte.
    if (!answer.ok) expect(answer.refusal.attempts).toEqual([{ region: "us", outcome: "client gone" }]);
    await Promise.all(waits);
    expect(await queueDepth()).toBe(0);
    // The first ends as a failure at its first-byte timeout, not lost.
    await (await first).text();
  }, 60_000);
});
