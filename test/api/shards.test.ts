/**
 * A region split over several objects (`shards`, src/core/shard.ts), end to end in workerd: the
 * shard that owns a prompt's first block decides, every shard knows every node, a follow-up of a
 * stored response finds its node whichever shard served it, and operators see one region.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ACME_KEY, TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { CF_VIRGINIA, call, chat, deregister, registerAll } from "../helpers.ts";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { loadConfig } from "../../src/config/load.ts";
import { loadExchangeName, shardObjectName } from "../../src/core/shard.ts";
import { exchangeIntervalMs } from "../../durable-objects/load-exchange.ts";
import type { RegionDurableObject } from "../../durable-objects/region.ts";

const NODES = ["shd-a", "shd-b", "shd-c", "shd-d"];
const headers = { "x-warmpath-region": "shd" };
const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

/** A prompt whose first block (its first 512 characters) is `topic`'s own. */
const prompt = (topic: string, tail = "") => `Topic ${topic}. ` + `Background on ${topic}, in detail. `.repeat(40) + tail;

async function ask(content: string) {
  const res = await chat({ model: "m-shard", messages: [{ role: "user", content }] }, { headers });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return {
    shard: res.headers.get("x-warmpath-shard"),
    node: res.headers.get("x-warmpath-node"),
    decision: res.headers.get("x-warmpath-decision"),
  };
}

async function state(): Promise<RegionSnapshot & { shards: number }> {
  const res = await call("/admin/state/shd", { headers: admin });
  expect(res.status).toBe(200);
  return res.json();
}

describe("a sharded region", () => {
  it("sends every request sharing a first block to one shard, and spreads distinct ones over the shards", async () => {
    await registerAll(NODES.map((id) => ({ id, region: "shd", models: ["m-shard"] })));
    const shardsSeen = new Set<string>();
    for (let t = 0; t < 12; t++) {
      const first = await ask(prompt(`t${t}`, "first question"));
      const again = await ask(prompt(`t${t}`, "a different question"));
      expect(first.shard).toMatch(/^[0-2]$/);
      expect(again.shard).toBe(first.shard);
      // The shard that owns the prefix knows where it went: affinity survives the split.
      expect(again.node).toBe(first.node);
      expect(again.decision).toBe("prefix-hit");
      shardsSeen.add(first.shard!);
    }
    expect(shardsSeen.size).toBeGreaterThan(1);
  });

  it("shows operators one region: every node once, every request counted once", async () => {
    await registerAll(NODES.map((id) => ({ id, region: "shd", models: ["m-shard"] })));
    const before = await state();
    const routedBefore = before.nodes.reduce((a, n) => a + n.metrics.routed, 0);
    for (let t = 0; t < 6; t++) await ask(prompt(`count${t}`));
    const after = await state();
    expect(after.shards).toBe(3);
    expect(after.nodes.map((n) => n.id).filter((id) => NODES.includes(id))).toEqual(NODES);
    expect(after.nodes.reduce((a, n) => a + n.metrics.routed, 0) - routedBefore).toBe(6);
  });

  it("lets every shard know a registered node, and forget a removed one", async () => {
    await registerAll([{ id: "shd-only", region: "shd", models: ["m-shard"] }]);
    for (const id of NODES) {
      const res = await deregister("shd", id);
      expect([200, 404]).toContain(res.status);
    }
    // The only node left takes every prompt, whichever shard decides.
    for (let t = 0; t < 9; t++) expect((await ask(prompt(`solo${t}`))).node).toBe("shd-only");
    expect((await deregister("shd", "shd-only")).status).toBe(200);
    const res = await chat({ model: "m-shard", messages: [{ role: "user", content: prompt("after") }] }, { headers });
    expect(res.status).toBe(503);
    await res.arrayBuffer();
  });

  it("sends a stored response's follow-up to its node, whichever shard served the first request", async () => {
    await registerAll(NODES.map((id) => ({ id, region: "shd", models: ["m-shard"] })));
    const post = (body: unknown) =>
      call("/v1/responses", {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}`, ...headers },
        body: JSON.stringify(body),
        cf: CF_VIRGINIA,
      });
    for (let i = 0; i < 6; i++) {
      const first = await post({ model: "m-shard", input: prompt(`conversation ${i}`) });
      expect(first.status).toBe(200);
      const { id } = await first.json<{ id: string }>();
      // The region learns the id with the first byte (waitUntil), in the shard its follow-ups ask.
      await new Promise((r) => setTimeout(r, 50));
      const next = await post({ model: "m-shard", input: `An unrelated question ${i}`, previous_response_id: id });
      expect(next.status).toBe(200);
      expect(next.headers.get("x-warmpath-node")).toBe(first.headers.get("x-warmpath-node"));
      expect(next.headers.get("x-warmpath-decision")).toBe("pinned");
      await next.arrayBuffer();
    }
  });
});

describe("reports in a sharded region", () => {
  it("are ingested once, by the region's exchange: a new or changed node reaches every shard at once, later load through the exchange's feed", async () => {
    const region = loadConfig(env).regionByName.get("shd")!;
    const object = (name: string) => env.REGION.getByName(name);
    const seenBy = async (name: string) => (await object(name).snapshot(region.init)).nodes.find((n) => n.id === "shd-mirror");
    const shard2 = shardObjectName("shd", 2);
    // The earlier tests' bills are flushed by each shard's alarm a second later: run them now.
    for (const k of [0, 1, 2]) await runDurableObjectAlarm(object(shardObjectName("shd", k)));
    await registerAll([{ id: "shd-mirror", region: "shd", models: ["m-shard"], waiting: 1 }]);
    for (const k of [0, 1, 2]) expect((await seenBy(shardObjectName("shd", k)))?.load.report?.waiting, `shard ${k}`).toBe(1);
    // The same node, a moment later, with a new load: only the exchange takes it (one object
    // request per report, whatever the number of shards)...
    await registerAll([{ id: "shd-mirror", region: "shd", models: ["m-shard"], waiting: 7 }]);
    expect((await seenBy(loadExchangeName("shd")))?.load.report?.waiting).toBe(7);
    expect((await seenBy(shard2))?.load.report?.waiting).toBe(1);
    // ...and a shard learns it with its next exchange (it exchanges as it routes).
    const route = () =>
      object(shard2).route(region.init, { requestId: crypto.randomUUID(), model: "m-shard", hashes: [], promptTokens: 10, shard: 2 });
    await route();
    await new Promise((r) => setTimeout(r, exchangeIntervalMs(3, 0) + 30));
    await route();
    await expect.poll(async () => (await seenBy(shard2))?.load.report?.waiting, { timeout: 2_000 }).toBe(7);
    // A change of the node itself (its boot id: a restart) reaches every shard at once.
    await registerAll([{ id: "shd-mirror", region: "shd", models: ["m-shard"], waiting: 9, bootId: "second-boot" }]);
    for (const k of [0, 1, 2]) expect((await seenBy(shardObjectName("shd", k)))?.load.report?.waiting, `shard ${k}`).toBe(9);
    expect((await deregister("shd", "shd-mirror")).status).toBe(200);
    for (const k of [0, 1, 2]) expect(await seenBy(shardObjectName("shd", k)), `shard ${k}`).toBeUndefined();
  });
});

describe("a shard's alarm", () => {
  it("flushes its bills without asking the exchange (it asks only before expiring a silent node)", async () => {
    const region = loadConfig(env).regionByName.get("shd")!;
    const shard1 = env.REGION.getByName(shardObjectName("shd", 1));
    const seen = async () => (await shard1.snapshot(region.init)).nodes.find((n) => n.id === "shd-alarm")?.load.report?.waiting;
    await registerAll([{ id: "shd-alarm", region: "shd", models: ["m-shard"], waiting: 1 }]);
    expect(await seen()).toBe(1);
    // A later load goes to the exchange only; a bill sets the shard's flush alarm (1 s).
    await registerAll([{ id: "shd-alarm", region: "shd", models: ["m-shard"], waiting: 4 }]);
    const bill = {
      tenant: "acme",
      model: "m-shard",
      estimated: false,
      promptTokens: 10,
      cachedTokens: 0,
      completionTokens: 2,
      costUsd: 0,
      budgeted: false,
    };
    shard1.recordUsage(region.init, bill);
    expect(await runDurableObjectAlarm(shard1)).toBe(true);
    // The flush asked the exchange nothing: the shard still has the load it was mirrored.
    expect(await seen()).toBe(1);
    const usage = await (
      await call(`/admin/usage?tenant=acme&format=json`, { headers: admin })
    ).json<{ data: { model: string; region: string; requests: number }[] }>();
    expect(usage.data.find((r) => r.model === "m-shard" && r.region === "shd")?.requests).toBeGreaterThanOrEqual(1);
    expect((await deregister("shd", "shd-alarm")).status).toBe(200);
  });
});

/** The others' summed load, as the exchange answers a shard. */
async function loads(exchange: DurableObjectStub<RegionDurableObject>, shard: number, load: unknown) {
  return (await exchange.exchange({ shard, load } as never)).loads;
}

describe("the load exchange", () => {
  it("is asked less often as the shards and the region's node reports grow, within the exchange object's budget", () => {
    expect(exchangeIntervalMs(3, 0)).toBe(20);
    expect(exchangeIntervalMs(31, 400)).toBe(62); // 500 exchanges a second left beside 400 reports
    expect(exchangeIntervalMs(64, 2_000)).toBe(640); // over budget on reports alone: the floor of 100 a second
  });

  it("answers each shard with the sum of the others' latest loads", async () => {
    const exchange = env.REGION.getByName("exchange-test#load");
    expect(await loads(exchange, 0, { a: { queued: 100, recent: 1_000 } })).toEqual({});
    expect(await loads(exchange, 1, { a: { queued: 50, recent: 10 }, b: { queued: 7, recent: 7 } })).toEqual({
      a: { queued: 100, recent: 1_000 },
    });
    expect(await loads(exchange, 2, {})).toEqual({ a: { queued: 150, recent: 1_010 }, b: { queued: 7, recent: 7 } });
    // Shard 0's own load is replaced, never added to itself.
    expect(await loads(exchange, 0, { a: { queued: 1, recent: 1 } })).toEqual({
      a: { queued: 50, recent: 10 },
      b: { queued: 7, recent: 7 },
    });
  });

  it("drops a malformed load without summing it", async () => {
    const exchange = env.REGION.getByName("exchange-test-2#load");
    expect(await loads(exchange, 0, { a: { queued: -1, recent: 0 } })).toEqual({});
    expect(await loads(exchange, 99, { a: { queued: 5, recent: 5 } })).toEqual({});
    expect(await loads(exchange, 1, { a: { queued: 2, recent: 2 } })).toEqual({});
  });
});
