/**
 * The region object's init (durable-objects/region.ts, src/contracts/region-init.ts): a `route`
 * call carries only the init's fingerprint; an object that does not hold that init answers
 * `initNeeded` and routes once the whole init is sent; a new fingerprint rebuilds the router; a
 * restarted object rebuilds from the init it stored, and one whose stored init this version no
 * longer accepts asks for it again.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.ts";
import { regionInitFingerprint, type RegionInit } from "../../src/contracts/region-init.ts";
import { RESTART_REASON } from "../../src/contracts/region-object.ts";

const rr = () => loadConfig(env).regionByName.get("rr")!;
let seq = 0;
const ask = () => ({ requestId: `init-${seq++}`, model: "m-rr", hashes: ["0123456789abcdef"], promptTokens: 100, tenant: "acme" });

/** The same region's init with its second static node gone, and the fingerprint that change gives. */
function changed(init: RegionInit): RegionInit {
  const content = { ...init, staticNodes: init.staticNodes.filter((n) => n.id !== "static-2") };
  return { ...content, fingerprint: regionInitFingerprint(content) };
}

/** Restarts the object as the admin API does (src/region/app.ts): the abort ends the very call that asked for it. */
async function restart(stub: DurableObjectStub<import("../../durable-objects/region.ts").RegionDurableObject>): Promise<string> {
  try {
    await stub.restart();
  } catch (e) {
    return (e as Error).message;
  }
  return "not restarted";
}

/** Places one request on the object and completes it at once (so the object's load stays empty). */
async function placeOnce(stub: DurableObjectStub<import("../../durable-objects/region.ts").RegionDurableObject>, init: unknown) {
  const answer = await stub.route(init as RegionInit, ask());
  if (answer.ok) await answer.session.complete({ status: "ok" });
  // Its RPC session ends here: one left open would fail, unobserved, when a test restarts the object.
  answer[Symbol.dispose]();
  return answer;
}

describe("the region object's init", () => {
  it("asks for the init it does not hold, and routes on the fingerprint alone once it holds it", async () => {
    const region = rr();
    const stub = env.REGION.getByName("rr-init-fresh");
    expect(await placeOnce(stub, region.initRef)).toEqual({ ok: false, initNeeded: true });
    const placed = await placeOnce(stub, region.init);
    expect(placed.ok).toBe(true);
    const again = await placeOnce(stub, region.initRef);
    expect(again.ok).toBe(true);
    if (again.ok) expect(["static-1", "static-2"]).toContain(again.nodeId);
  });

  it("rebuilds the router for a new fingerprint, and then asks a caller of the old one for its init", async () => {
    const region = rr();
    const stub = env.REGION.getByName("rr-init-change");
    expect((await placeOnce(stub, region.init)).ok).toBe(true);
    const next = changed(region.init);
    expect(next.fingerprint).not.toBe(region.init.fingerprint);
    expect((await placeOnce(stub, { fingerprint: next.fingerprint })).ok).toBe(false);
    expect((await placeOnce(stub, next)).ok).toBe(true);
    expect((await stub.snapshot(next)).nodes.map((n) => n.id)).toEqual(["static-1"]);
    // The router now in force is the new configuration's: the old fingerprint alone is not enough.
    expect(await placeOnce(stub, region.initRef)).toEqual({ ok: false, initNeeded: true });
    expect((await placeOnce(stub, region.init)).ok).toBe(true);
    expect((await placeOnce(stub, region.initRef)).ok).toBe(true);
    expect((await stub.snapshot(region.init)).nodes.map((n) => n.id).sort()).toEqual(["static-1", "static-2"]);
  });

  it("keeps the newer worker version's init while an older version's calls come too (a gradual deployment)", async () => {
    const region = rr();
    // The newer version dropped static-2; both versions call the object, the older one with its own init.
    const older: RegionInit = { ...region.init, generation: 1_000 };
    const newer: RegionInit = { ...changed(region.init), generation: 2_000 };
    const stub = env.REGION.getByName("rr-init-gradual");
    expect((await placeOnce(stub, newer)).ok).toBe(true);
    const nodes = new Set<string>();
    for (let i = 0; i < 4; i++) {
      // Alternately, as the two versions' shares of the traffic come: the older init is routed by
      // the newer, which is not rebuilt (else its round-robin would reach static-2 again).
      for (const init of [older, { fingerprint: older.fingerprint }, newer, { fingerprint: newer.fingerprint }]) {
        const placed = await placeOnce(stub, init);
        expect(placed.ok).toBe(true);
        if (placed.ok) nodes.add(placed.nodeId);
      }
    }
    expect([...nodes]).toEqual(["static-1"]);
    expect((await stub.snapshot(older)).nodes.map((n) => n.id)).toEqual(["static-1"]);

    // A newer version's init replaces an older one at once.
    const other = env.REGION.getByName("rr-init-gradual-up");
    expect((await placeOnce(other, older)).ok).toBe(true);
    expect((await other.snapshot(older)).nodes.map((n) => n.id).sort()).toEqual(["static-1", "static-2"]);
    expect((await placeOnce(other, newer)).ok).toBe(true);
    expect((await other.snapshot(newer)).nodes.map((n) => n.id)).toEqual(["static-1"]);
  });

  it("after a restart routes on the fingerprint with the init it stored", async () => {
    const region = rr();
    const stub = env.REGION.getByName("rr-init-restart");
    expect((await placeOnce(stub, region.init)).ok).toBe(true);
    expect(await restart(stub)).toContain(RESTART_REASON);
    const fresh = env.REGION.getByName("rr-init-restart");
    expect((await placeOnce(fresh, region.initRef)).ok).toBe(true);
  });

  it("after a restart asks for the init when the one it stored is no longer accepted (an old, unhashed fingerprint)", async () => {
    const region = rr();
    const stub = env.REGION.getByName("rr-init-old");
    expect((await placeOnce(stub, region.init)).ok).toBe(true);
    // What an object stored before fingerprints were hashed: the settings' JSON itself (~1.4 KB).
    const old = { ...region.init, fingerprint: JSON.stringify([region.init.settings, region.init.staticNodes, region.init.usage]) };
    await runInDurableObject(stub, (_instance, state) => {
      state.storage.sql.exec(`UPDATE config SET value = ? WHERE key = 'init'`, JSON.stringify(old));
    });
    expect(await restart(stub)).toContain(RESTART_REASON);
    const fresh = env.REGION.getByName("rr-init-old");
    expect(await placeOnce(fresh, region.initRef)).toEqual({ ok: false, initNeeded: true });
    expect((await placeOnce(fresh, region.init)).ok).toBe(true);
    expect((await placeOnce(fresh, region.initRef)).ok).toBe(true);
  });
});

describe("a node's places (max_running_requests), kept in the node table", () => {
  const report = (over: Record<string, unknown> = {}) => ({
    node_id: "places-1",
    region: "rr",
    url: "http://places-1.test",
    models: ["m-rr"],
    kv_capacity_tokens: 100_000,
    running: 0,
    waiting: 0,
    kv_usage: 0,
    ...over,
  });
  const placesOf = async (stub: DurableObjectStub<import("../../durable-objects/region.ts").RegionDurableObject>, init: RegionInit) =>
    (await stub.snapshot(init)).nodes.find((n) => n.id === "places-1")?.maxRunning;

  it("a report's figure survives a restart, and a later report that does not say drops it", async () => {
    const region = rr();
    const stub = env.REGION.getByName("rr-places");
    await stub.mirrorReport(region.init, report({ max_running_requests: 8 }));
    expect(await placesOf(stub, region.init)).toBe(8);
    expect(await restart(stub)).toContain(RESTART_REASON);
    const fresh = env.REGION.getByName("rr-places");
    expect(await placesOf(fresh, region.init)).toBe(8);
    await fresh.mirrorReport(region.init, report());
    expect(await placesOf(fresh, region.init)).toBeUndefined();
    await fresh.mirrorReport(region.init, report({ max_running_requests: 16 }));
    expect(await restart(fresh)).toContain(RESTART_REASON);
    expect(await placesOf(env.REGION.getByName("rr-places"), region.init)).toBe(16);
  });

  it("a configured node's places hold again when its reports stop saying others, and after a restart until its next report", async () => {
    const base = rr().init;
    const content = { ...base, staticNodes: base.staticNodes.map((n) => (n.id === "static-1" ? { ...n, maxRunning: 8 } : n)) };
    const init: RegionInit = { ...content, fingerprint: regionInitFingerprint(content) };
    const configured = { node_id: "static-1", url: "http://static-1.ok.node.test" };
    const placesOfStatic = async (stub: DurableObjectStub<import("../../durable-objects/region.ts").RegionDurableObject>) =>
      (await stub.snapshot(init)).nodes.find((n) => n.id === "static-1")?.maxRunning;
    const stub = env.REGION.getByName("rr-places-configured");
    expect(await placesOfStatic(stub)).toBe(8);
    await stub.mirrorReport(init, report({ ...configured, max_running_requests: 16 }));
    expect(await placesOfStatic(stub)).toBe(16);
    expect(await restart(stub)).toContain(RESTART_REASON);
    // The stored table says 16 (a report's); the configuration, applied after it, says 8.
    const fresh = env.REGION.getByName("rr-places-configured");
    expect(await placesOfStatic(fresh)).toBe(8);
    await fresh.mirrorReport(init, report({ ...configured, max_running_requests: 16 }));
    expect(await placesOfStatic(fresh)).toBe(16);
    await fresh.mirrorReport(init, report(configured));
    expect(await placesOfStatic(fresh)).toBe(8);
  });

  it("an object whose node table predates the column gains it on start, its nodes' places not said", async () => {
    const region = rr();
    const stub = env.REGION.getByName("rr-places-old");
    await stub.mirrorReport(region.init, report({ max_running_requests: 8 }));
    await runInDurableObject(stub, (_instance, state) => {
      state.storage.sql.exec(`ALTER TABLE nodes DROP COLUMN max_running`);
    });
    expect(await restart(stub)).toContain(RESTART_REASON);
    const fresh = env.REGION.getByName("rr-places-old");
    expect(await placesOf(fresh, region.init)).toBeUndefined();
    await fresh.mirrorReport(region.init, report({ max_running_requests: 4 }));
    expect(await placesOf(fresh, region.init)).toBe(4);
  });
});

describe("the region object's usage flush", () => {
  it("writes all of a flush's rows or none: a write that fails part-way keeps them all for the next, counted once", async () => {
    const stub = env.REGION.getByName("usage-flush-atomic");
    await runInDurableObject(stub, (instance) => {
      // Its private parts, as a flush uses them.
      const o = instance as unknown as {
        pendingUsage: { add(bill: object, at: number): void };
        usageStore: {
          write(rows: unknown[]): void;
          query(q: object, region: string, limit: number): Array<{ model: string; prompt_tokens: number }>;
        };
        flushUsage(now: number): void;
      };
      const now = Date.UTC(2026, 11, 7, 12);
      const bill = (model: string) => ({
        tenant: "acme",
        model,
        estimated: false,
        promptTokens: 100,
        cachedTokens: 0,
        completionTokens: 10,
        costUsd: 0,
        budgeted: false,
      });
      o.pendingUsage.add(bill("m-1"), now);
      o.pendingUsage.add(bill("m-2"), now);
      const write = o.usageStore.write.bind(o.usageStore);
      // The first flush writes one row, then fails.
      o.usageStore.write = (rows) => {
        write(rows.slice(0, 1));
        throw new Error("disk full");
      };
      o.flushUsage(now);
      o.usageStore.write = write;
      o.flushUsage(now);
      const rows = o.usageStore.query({ tenant: "acme", from: "2026-12-07", to: "2026-12-07" }, "x", 100);
      expect(rows.map((r) => [r.model, r.prompt_tokens]).sort()).toEqual([
        ["m-1", 100],
        ["m-2", 100],
      ]);
    });
  });
});
