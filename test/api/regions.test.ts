/** Region choice: nearest healthy region for the model, pinning, failover, and the model list. */
import { describe, expect, it } from "vitest";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { CF_FRANKFURT, CF_VIRGINIA, call, chat, deregister, registerAll } from "../helpers.ts";
import { ACME_KEY, GLOBEX_KEY, TEST_ADMIN_TOKEN } from "../fixtures/config.ts";

const body = (model: string, text: string) => ({ model, messages: [{ role: "user", content: text }] });

describe("regions", () => {
  it("picks the nearest region serving the model, from request.cf", async () => {
    await registerAll([
      { id: "eu-1", region: "eu", models: ["m-shared"] },
      { id: "us-1", region: "us", models: ["m-shared"] },
    ]);
    const fromEurope = await chat(body("m-shared", "near eu"), { cf: CF_FRANKFURT });
    expect(fromEurope.headers.get("x-warmpath-region")).toBe("eu");
    await fromEurope.arrayBuffer();
    const fromAmerica = await chat(body("m-shared", "near us"), { cf: CF_VIRGINIA });
    expect(fromAmerica.headers.get("x-warmpath-region")).toBe("us");
    await fromAmerica.arrayBuffer();
    // Continent only (no coordinates): same answer.
    const byContinent = await chat(body("m-shared", "continent"), { cf: { continent: "NA" } });
    expect(byContinent.headers.get("x-warmpath-region")).toBe("us");
    await byContinent.arrayBuffer();
  });

  it("honours x-warmpath-region", async () => {
    const res = await chat(body("m-shared", "pinned"), { cf: CF_FRANKFURT, headers: { "x-warmpath-region": "us" } });
    expect(res.headers.get("x-warmpath-region")).toBe("us");
    await res.arrayBuffer();
  });

  it("fails over to the next region when the nearest one cannot serve", async () => {
    // The only eu node serving m-shared leaves; eu still lists the model, so it is tried first.
    const del = await deregister("eu", "eu-1"); // with the node's own secret, as its agent would
    expect(del.status).toBe(200);
    const res = await chat(body("m-shared", "failover"), { cf: CF_FRANKFURT });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-warmpath-region")).toBe("us");
    expect(res.headers.get("x-warmpath-decision")).toBe("failover");
    await res.arrayBuffer();
  });

  it("fails over from a saturated region only to one that can start the request sooner, counting the round trip", async () => {
    // Both nodes hold what they are sent (no first byte within the test), so the modelled queues stay.
    await registerAll([
      { id: "sat-1", region: "sat", mode: "hangfirst", models: ["m-soon"] },
      { id: "soon-us", region: "us", mode: "hangfirst", models: ["m-soon"] },
    ]);
    const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    const inflight = async (region: string, node: string) =>
      (await (await call(`/admin/state/${region}`, { headers: admin })).json<RegionSnapshot>()).nodes.find((n) => n.id === node)!.load
        .inflight;
    const until = async (region: string, node: string, n: number) => {
      for (let i = 0; i < 200 && (await inflight(region, node)) < n; i++) await new Promise((r) => setTimeout(r, 20));
    };
    // London: about 2.5 s of prefill queued (past its 1 s bound); Virginia: about 3 s.
    const held = [
      chat(body("m-soon", "a".repeat(100_000)), { headers: { "x-warmpath-region": "sat" } }),
      chat(body("m-soon", "b".repeat(120_000)), { headers: { "x-warmpath-region": "us" } }),
    ];
    await until("sat", "sat-1", 1);
    await until("us", "soon-us", 1);
    // From Frankfurt, London is nearest and saturated; Virginia would start it later still (3 s plus
    // about 90 ms more of round trip, against 2.5 s), so the client is told to come back (503).
    const refused = await chat(body("m-soon", "small"), { cf: CF_FRANKFURT });
    expect(refused.status).toBe(503);
    const err = await refused.json<{ error: { code: string; message: string } }>();
    expect(err.error.message).toMatch(/cannot start it sooner than sat/);
    expect(await inflight("us", "soon-us")).toBe(1); // nothing was queued behind the 3 s there
    await Promise.all((await Promise.all(held)).map((r) => r.arrayBuffer()));
  }, 30_000);

  it("lists the configured models", async () => {
    const res = await call("/v1/models", { headers: { authorization: `Bearer ${ACME_KEY}` } });
    expect(res.status).toBe(200);
    const list = await res.json<{ object: string; data: { id: string; object: string; regions: string[] }[] }>();
    expect(list.object).toBe("list");
    const ids = list.data.map((m) => m.id);
    expect(ids).toContain("m-eu");
    expect(ids).toContain("m-rr");
    expect(list.data.find((m) => m.id === "m-shared")!.regions).toEqual(["eu", "us"]);
  });

  it("routes to statically configured nodes with the region's baseline policy", async () => {
    const nodes: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await chat(body("m-rr", `same prompt`));
      expect(res.headers.get("x-warmpath-policy")).toBe("round-robin");
      expect(res.headers.get("x-warmpath-decision")).toBe("balance");
      nodes.push(res.headers.get("x-warmpath-node")!);
      await res.arrayBuffer();
    }
    // Round-robin ignores the cache: the same prompt alternates between the two static nodes.
    expect(new Set(nodes)).toEqual(new Set(["static-1", "static-2"]));
    expect(nodes[0]).not.toBe(nodes[1]);
  });
});

describe("nodes dedicated to tenants (node_tenants)", () => {
  it("sends only the node's tenants there; another tenant is told no node serves it", async () => {
    await registerAll([{ id: "ded-acme", region: "us", models: ["m-ded"] }]);
    const mine = await chat(body("m-ded", "dedicated"), { key: ACME_KEY });
    expect(mine.status).toBe(200);
    expect(mine.headers.get("x-warmpath-node")).toBe("ded-acme");
    await mine.arrayBuffer();
    const other = await chat(body("m-ded", "dedicated"), { key: GLOBEX_KEY });
    expect(other.status).toBe(503);
    const err = await other.json<{ error: { code: string; message: string } }>();
    expect(err.error.code).toBe("no_capacity");
    expect(err.error.message).toMatch(/no node serving model m-ded/);
  });
});
