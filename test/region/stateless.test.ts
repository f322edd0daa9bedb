/**
 * Routing without the region's Durable Object (src/region/stateless.ts): the chooser, the worker
 * degrading to it when its object answers `overloaded`, saying so in the decision header, and the
 * bill of such a request reaching the object afterwards (src/region/respond.ts).
 */
import { env, exports } from "cloudflare:workers";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { beforeEach, describe, expect, it, vi } from "vitest";
import worker from "../../src/index.ts";
import { rendezvousOrder } from "../../src/core/policies/placement.ts";
import { chooseStateless, countStateless, forgetNodes, NODE_MEMORY_MS, rememberNode } from "../../src/region/stateless.ts";
import { ACME_KEY, TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import type { UsageRow } from "../../src/contracts/usage.ts";
import { BASE, CF_VIRGINIA, registerAll, withRegionService } from "../helpers.ts";

beforeEach(() => forgetNodes());

describe("stateless chooser", () => {
  it("sends a prefix to the same node every time, among the nodes serving the model, within their load bound", () => {
    for (const id of ["a", "b", "c"]) rememberNode("r", id, `http://${id}`, "m", 0);
    rememberNode("r", "other", "http://other", "m2", 0);
    const first = chooseStateless("r", "m", "0123456789abcdef", [], 10)!;
    expect(chooseStateless("r", "m", "0123456789abcdef", [], 20)).toEqual(first);
    expect(["a", "b", "c"]).toContain(first.nodeId);
    // Excluded (it failed this request), the next node by weight.
    const second = chooseStateless("r", "m", "0123456789abcdef", [first.nodeId], 30)!;
    expect(second.nodeId).not.toBe(first.nodeId);
    // Loaded past its bound by this isolate, it is skipped.
    for (let i = 0; i < 3; i++) countStateless("r", first.nodeId, 1);
    expect(chooseStateless("r", "m", "0123456789abcdef", [], 40)!.nodeId).not.toBe(first.nodeId);
    for (let i = 0; i < 3; i++) countStateless("r", first.nodeId, -1);
    // Different prefixes spread over the nodes.
    const spread = new Set(Array.from({ length: 40 }, (_, i) => chooseStateless("r", "m", `prefix-${i}`.padEnd(16, "0"), [], 50)!.nodeId));
    expect(spread.size).toBe(3);
  });

  it("places a prefix as the consistent-hash policy does: its first node in rendezvous order (src/core/policies/placement.ts)", () => {
    const ids = ["a", "b", "c", "d"];
    for (const id of ids) rememberNode("r", id, `http://${id}`, "m", 0);
    for (let i = 0; i < 20; i++) {
      const key = `${i}`.padStart(16, "0");
      const order = rendezvousOrder(
        ids.map((id) => ({ id })),
        key,
      );
      expect(chooseStateless("r", "m", key, [], 1)!.nodeId).toBe(ids[order[0]!]);
      expect(chooseStateless("r", "m", key, [ids[order[0]!]!], 1)!.nodeId).toBe(ids[order[1]!]);
    }
  });

  it("knows nothing of a node unseen for too long, or of a model it was never sent", () => {
    rememberNode("r", "a", "http://a", "m", 0);
    expect(chooseStateless("r", "m", "x".repeat(16), [], NODE_MEMORY_MS + 1)).toBeUndefined();
    expect(chooseStateless("r", "m2", "x".repeat(16), [], 1)).toBeUndefined();
  });
});

/** A chat completion for m-stateless in region us, through the worker with `environment`'s bindings; its body read and its background work done. */
async function post(environment: Env, content: string): Promise<{ res: Response; body: ArrayBuffer }> {
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request(`${BASE}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}`, "x-warmpath-region": "us" },
      body: JSON.stringify({ model: "m-stateless", messages: [{ role: "user", content }] }),
      cf: CF_VIRGINIA,
    } as RequestInit) as Request<unknown, IncomingRequestCfProperties>,
    withRegionService(environment, ctx),
    ctx,
  );
  const body = await res.arrayBuffer();
  await waitOnExecutionContext(ctx);
  return { res, body };
}

describe("the region's object overloaded", () => {
  const send = async (environment: Env, content: string) => (await post(environment, content)).res;

  it("routes statelessly over the nodes it has been sent to, and says so", async () => {
    const nodes = ["sl-a", "sl-b"].map((id) => ({ id, region: "us", models: ["m-stateless"] }));
    await registerAll(nodes);
    // With the object: learn the region's nodes from its answers.
    const seen = new Set<string>();
    for (let i = 0; i < 12 && seen.size < 2; i++)
      seen.add((await send(env, `learn ${i} ` + "x".repeat(600))).headers.get("x-warmpath-node")!);
    expect(seen.size).toBe(2);

    let asked = 0;
    const overloaded: DurableObjectNamespace = {
      ...env.REGION,
      getByName: () =>
        ({
          route: () => {
            asked++;
            throw Object.assign(new Error("Durable Object is overloaded. Requests queued for too long."), { overloaded: true });
          },
        }) as never,
    } as never;
    const down = { ...env, REGION: overloaded } as unknown as Env;
    const a = await send(down, "a prompt while the object is away " + "y".repeat(600));
    expect(a.status).toBe(200);
    expect(a.headers.get("x-warmpath-decision")).toBe("stateless");
    expect(nodes.map((n) => n.id)).toContain(a.headers.get("x-warmpath-node"));
    expect(asked).toBe(1); // `overloaded` is not asked again
    const again = await send(down, "a prompt while the object is away " + "y".repeat(600));
    expect(again.headers.get("x-warmpath-node")).toBe(a.headers.get("x-warmpath-node"));
    // Affinity returns with the object.
    expect((await send(env, "back " + "z".repeat(600))).headers.get("x-warmpath-decision")).not.toBe("stateless");
  });
});

describe("billing without the region's object", () => {
  const usageOf = async (): Promise<{ requests: number; prompt: number; completion: number }> => {
    const res = await exports.default.fetch(
      new Request(`${BASE}/admin/usage?tenant=acme`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } }),
    );
    const rows = ((await res.json()) as { data: UsageRow[] }).data.filter((r) => r.model === "m-stateless");
    return {
      requests: rows.reduce((s, r) => s + r.requests, 0),
      prompt: rows.reduce((s, r) => s + r.prompt_tokens, 0),
      completion: rows.reduce((s, r) => s + r.completion_tokens, 0),
    };
  };
  /** The region's object overloaded for routing; its other methods as `usage` says. */
  const overloadedFor = (recordUsage: (name: string, init: unknown, bill: unknown) => unknown): Env => {
    const namespace = {
      ...env.REGION,
      getByName: (name: string) => ({
        route: () => {
          throw Object.assign(new Error("Durable Object is overloaded. Requests queued for too long."), { overloaded: true });
        },
        recordUsage: (init: unknown, bill: unknown) => recordUsage(name, init, bill),
      }),
    };
    return { ...env, REGION: namespace } as unknown as Env;
  };
  const ask = async (environment: Env, content: string) => {
    const { res, body } = await post(environment, content);
    const answer = JSON.parse(new TextDecoder().decode(body)) as { usage: { prompt_tokens: number; completion_tokens: number } };
    return { res, usage: answer.usage };
  };

  it("a request placed statelessly is billed to the object when it answers, and logged as unbilled when it cannot", async () => {
    await registerAll([{ id: "sl-bill", region: "us", models: ["m-stateless"] }]);
    await ask(env, "learn the node " + "b".repeat(300));
    const before = await vi.waitFor(
      async () => {
        const u = await usageOf();
        expect(u.requests).toBeGreaterThan(0);
        return u;
      },
      { timeout: 5_000, interval: 100 },
    );

    const billed = await ask(
      overloadedFor((name, init, bill) => env.REGION.getByName(name).recordUsage(init as never, bill)),
      "billed without the object " + "c".repeat(300),
    );
    expect(billed.res.headers.get("x-warmpath-decision")).toBe("stateless");
    await vi.waitFor(
      async () =>
        expect(await usageOf()).toEqual({
          requests: before.requests + 1,
          prompt: before.prompt + billed.usage.prompt_tokens,
          completion: before.completion + billed.usage.completion_tokens,
        }),
      { timeout: 5_000, interval: 100 },
    );

    const lines: string[] = [];
    const spy = vi.spyOn(console, "error").mockImplementation((line: unknown) => void lines.push(String(line)));
    try {
      const lost = await ask(
        overloadedFor(() => {
          throw new Error("object unreachable");
        }),
        "not billed " + "d".repeat(300),
      );
      expect(lost.res.status).toBe(200);
      const unbilled = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.event === "usage_unbilled");
      expect(unbilled).toMatchObject({
        region: "us",
        bill: {
          tenant: "acme",
          model: "m-stateless",
          promptTokens: lost.usage.prompt_tokens,
          completionTokens: lost.usage.completion_tokens,
        },
      });
    } finally {
      spy.mockRestore();
    }
    // The ledger did not count the unbilled one.
    expect((await usageOf()).requests).toBe(before.requests + 1);
  }, 30_000);
});
