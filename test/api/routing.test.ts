/**
 * Cache-aware routing through the real worker and region Durable Object: affinity, sharing
 * across users, tenant isolation, cold spread and hot spill.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ACME_KEY, ACME_KEY_2, GLOBEX_KEY } from "../fixtures/config.ts";
import { chat, longSystemPrompt, registerAll, report } from "../helpers.ts";

const NODES = ["r1", "r2", "r3", "r4"].map((id) => ({ id, region: "eu", models: ["m-eu"] }));

beforeAll(async () => {
  await registerAll(NODES);
});

function conversation(system: string, user: string) {
  return {
    model: "m-eu",
    messages: [
      { role: "system", content: system },
      { role: "user", content: user },
    ],
  };
}

describe("prefix affinity", () => {
  it("sends a repeated prefix back to the node that served it", async () => {
    const system = longSystemPrompt("affinity");
    const first = await chat(conversation(system, "first question"));
    expect(first.status).toBe(200);
    const node = first.headers.get("x-warmpath-node");
    expect(first.headers.get("x-warmpath-decision")).toBe("cold-spread");
    await first.arrayBuffer();

    for (const q of ["second question", "third question", "fourth question"]) {
      const again = await chat(conversation(system, q));
      expect(again.headers.get("x-warmpath-node")).toBe(node);
      expect(again.headers.get("x-warmpath-decision")).toBe("prefix-hit");
      const [matched, total] = again.headers.get("x-warmpath-prefix-match")!.split("/").map(Number);
      // The whole system prompt (~12 blocks) matched; only the question's block differs.
      expect(matched).toBeGreaterThanOrEqual(11);
      expect(total).toBeGreaterThan(matched!);
      await again.arrayBuffer();
    }
  });

  it("sends a different user with the same long system prompt to the same node", async () => {
    const system = longSystemPrompt("shared-by-users");
    const alice = await chat(conversation(system, "alice asks about invoices"), { key: ACME_KEY });
    await alice.arrayBuffer();
    const bob = await chat(conversation(system, "bob asks about refunds"), { key: ACME_KEY_2, headers: { "x-session-id": "bob-1" } });
    await bob.arrayBuffer();
    expect(bob.headers.get("x-warmpath-node")).toBe(alice.headers.get("x-warmpath-node"));
    expect(bob.headers.get("x-warmpath-decision")).toBe("prefix-hit");
  });

  it("keeps tenants' caches apart unless they opt into a shared namespace", async () => {
    const system = longSystemPrompt("two-tenants");
    const acme = await chat(conversation(system, "q1"), { key: ACME_KEY });
    await acme.arrayBuffer();
    const globex = await chat(conversation(system, "q1"), { key: GLOBEX_KEY });
    await globex.arrayBuffer();
    expect(globex.headers.get("x-warmpath-prefix-match")).toMatch(/^0\//);

    const shared = { "x-warmpath-namespace": "commons" };
    const a = await chat(conversation(system, "q2"), { key: ACME_KEY, headers: shared });
    await a.arrayBuffer();
    const g = await chat(conversation(system, "q3"), { key: GLOBEX_KEY, headers: shared });
    await g.arrayBuffer();
    expect(g.headers.get("x-warmpath-node")).toBe(a.headers.get("x-warmpath-node"));
    expect(g.headers.get("x-warmpath-decision")).toBe("prefix-hit");
  });

  it("treats a changed earlier message as a different prefix from that point on", async () => {
    const system = longSystemPrompt("edit");
    const a = await chat(conversation(system, "question"));
    await a.arrayBuffer();
    const edited = await chat(conversation("X" + system, "question"));
    await edited.arrayBuffer();
    expect(edited.headers.get("x-warmpath-prefix-match")).toMatch(/^0\//);
  });
});

describe("load", () => {
  it("spreads cold requests over all nodes", async () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 24; i++) {
      const res = await chat(conversation(`Cold prompt number ${i}: ` + "lorem ipsum ".repeat(60), "go"));
      await res.arrayBuffer();
      expect(res.headers.get("x-warmpath-decision")).toBe("cold-spread");
      const node = res.headers.get("x-warmpath-node")!;
      counts.set(node, (counts.get(node) ?? 0) + 1);
    }
    expect([...counts.keys()].sort()).toEqual(["r1", "r2", "r3", "r4"]);
    expect(Math.max(...counts.values())).toBeLessThanOrEqual(12);
  });

  it("spills a hot prefix to a second node when its holder is overloaded", async () => {
    const system = longSystemPrompt("hot");
    const first = await chat(conversation(system, "warm up"));
    await first.arrayBuffer();
    const holder = first.headers.get("x-warmpath-node")!;

    // The holder reports a deep queue: its prefill backlog now costs more than the prefix saves.
    const r = await report({ id: holder, region: "eu", models: ["m-eu"], running: 64, waiting: 40, kvUsage: 0.8 });
    expect(r.status).toBe(200);

    const spilled = await chat(conversation(system, "under load"));
    await spilled.arrayBuffer();
    expect(spilled.headers.get("x-warmpath-decision")).toBe("hot-spill");
    const second = spilled.headers.get("x-warmpath-node")!;
    expect(second).not.toBe(holder);

    // The spill copied the prefix to the second node: it is now a holder too.
    const next = await chat(conversation(system, "still under load"));
    await next.arrayBuffer();
    expect(next.headers.get("x-warmpath-node")).toBe(second);
    expect(next.headers.get("x-warmpath-decision")).toBe("prefix-hit");
  });
});
