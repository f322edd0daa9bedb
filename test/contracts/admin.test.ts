/**
 * The admin API's contract (src/contracts/admin.ts) and the region's own types agree: what a
 * region produces satisfies the contract (checked by the compiler here), and what the edge serves
 * parses with it (checked against a live region).
 */
import { describe, expect, it } from "vitest";
import { adminHistorySchema, adminStateSchema, type RegionHistoryAnswer, type RegionSnapshotAnswer } from "../../src/contracts/admin.ts";
import type { RegionHistoryView, RegionSnapshot } from "../../src/core/region/index.ts";
import { TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { call, chat, registerAll } from "../helpers.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

describe("the admin contract", () => {
  it("is satisfied by what a region produces", () => {
    // Compile-time: a region's snapshot and history are the contract's answers (tsc fails otherwise).
    const snapshot = (s: RegionSnapshot & { shards: number }): RegionSnapshotAnswer => s;
    const history = (h: RegionHistoryView): RegionHistoryAnswer => h;
    expect([typeof snapshot, typeof history]).toEqual(["function", "function"]);
  });

  it("parses what /admin/state and /admin/history serve after traffic", async () => {
    await registerAll([{ id: "contract-a", region: "us", models: ["m-us"], engine: "vllm" }]);
    const res = await chat(
      { model: "m-us", messages: [{ role: "user", content: "contract" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await new Promise((r) => setTimeout(r, 50));
    const raw = await (await call("/admin/state", { headers: admin })).json();
    const state = adminStateSchema.parse(raw);
    // Nothing the edge serves is outside the contract (a field the contract lacks would be dropped here).
    expect(state).toEqual(raw);
    const us = state.regions.find((r) => r.region === "us")!;
    expect(us.nodes.find((n) => n.id === "contract-a")).toMatchObject({ engine: "vllm" });
    const rawHistory = await (await call("/admin/history", { headers: admin })).json();
    const history = adminHistorySchema.parse(rawHistory);
    expect(history).toEqual(rawHistory);
    expect(history.regions.find((r) => r.region === "us")!.decisions.some((d) => d.node === "contract-a")).toBe(true);
  });
});
