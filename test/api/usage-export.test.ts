/**
 * The usage export's bound (src/edge/api/usage.ts, src/region/app.ts, durable-objects/usage-store.ts):
 * GET /admin/usage carries at most MAX_USAGE_EXPORT_ROWS rows, every region and shard together,
 * each layer asking the next for what is left of the bound, so none holds more; past it the export
 * is refused in OpenAI's shape with what to ask instead, never cut short.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { call } from "../helpers.ts";
import { loadConfig, regionStub } from "../../src/config/load.ts";
import { MAX_USAGE_EXPORT_ROWS, type UsageRow } from "../../src/contracts/usage.ts";
import { utcDay } from "../../src/core/usage/periods.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

/** Stores `count` ledger rows of tenant `tenant` today in a region's object (its shard), one model each, named from `first`. */
async function store(regionName: string, shard: number, tenant: string, count: number, first = 0): Promise<void> {
  const region = loadConfig(env).regionByName.get(regionName)!;
  const today = utcDay(Date.now());
  await runInDurableObject(regionStub(env, region, shard), (_instance, state) => {
    for (let i = first; i < first + count; i++)
      state.storage.sql.exec(`INSERT INTO usage VALUES (?, ?, ?, 1, 10, 0, 1, 0.001, 0, 0, 0, 0)`, tenant, today, `m-${i}`);
  });
}

async function exportOf(tenant: string): Promise<Response> {
  const today = utcDay(Date.now());
  return call(`/admin/usage?tenant=${tenant}&from=${today}&to=${today}`, { headers: admin });
}

async function expectTooLarge(res: Response, narrower: string): Promise<void> {
  expect(res.status).toBe(400);
  const body = (await res.json()) as { error: { type: string; code: string; param: string; message: string } };
  expect(body.error).toMatchObject({ type: "invalid_request_error", code: "usage_export_too_large", param: "from" });
  expect(body.error.message).toContain("50,000 rows");
  expect(body.error.message).toContain(narrower);
}

describe("the usage export's bound", () => {
  it("exports up to the bound whole, and refuses one row more across regions, naming what to ask instead", async () => {
    await store("eu", 0, "bulk", MAX_USAGE_EXPORT_ROWS);
    const whole = await exportOf("bulk");
    expect(whole.status).toBe(200);
    const rows = ((await whole.json()) as { data: UsageRow[] }).data;
    expect(rows).toHaveLength(MAX_USAGE_EXPORT_ROWS);
    expect(new Set(rows.map((r) => r.model)).size).toBe(MAX_USAGE_EXPORT_ROWS);

    // One more row, in another region asked after the first filled the bound.
    await store("us", 0, "bulk", 1, MAX_USAGE_EXPORT_ROWS);
    await expectTooLarge(await exportOf("bulk"), "fewer days (from, to)");
    // Without a tenant, one tenant is a way to narrow it too.
    const today = utcDay(Date.now());
    await expectTooLarge(await call(`/admin/usage?from=${today}&to=${today}`, { headers: admin }), "or one tenant (tenant)");
  }, 60_000);

  it("counts a sharded region's shards together: the bound filled by one shard, a row in the next is one too many", async () => {
    // eu holds all but one row of the bound; shd's first shard the last one, its second one more.
    await store("eu", 0, "sharded", MAX_USAGE_EXPORT_ROWS - 1);
    await store("shd", 0, "sharded", 1, MAX_USAGE_EXPORT_ROWS);
    expect((await exportOf("sharded")).status).toBe(200);
    await store("shd", 1, "sharded", 1, MAX_USAGE_EXPORT_ROWS + 1);
    await expectTooLarge(await exportOf("sharded"), "fewer days (from, to)");
  }, 60_000);
});

describe("a region whose shards were lowered", () => {
  it("still exports what its removed shards billed", async () => {
    const shd = loadConfig(env).regionByName.get("shd")!;
    // shd had four shards once (an init naming 4, as a deploy before this one sent), now three.
    const before = { ...shd.init, fingerprint: "four-shards", settings: { ...shd.init.settings, shards: 4 } };
    const today = utcDay(Date.now());
    await regionStub(env, shd, 0).usage(before, { from: today, to: today });
    // The fourth shard's object billed a row then, and keeps it.
    await store("shd", 3, "lowered", 1, 7);
    await store("shd", 1, "lowered", 1, 8);
    const res = await exportOf("lowered");
    expect(res.status).toBe(200);
    const rows = ((await res.json()) as { data: UsageRow[] }).data;
    expect(rows.map((r) => r.model).sort()).toEqual(["m-7", "m-8"]);
    // Kept across a restart of the region's objects: read back from storage.
    expect((await call("/admin/regions/shd/restart", { method: "POST", headers: admin })).status).toBe(200);
    const again = ((await (await exportOf("lowered")).json()) as { data: UsageRow[] }).data;
    expect(again.map((r) => r.model).sort()).toEqual(["m-7", "m-8"]);
  }, 30_000);
});
