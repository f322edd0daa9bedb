/**
 * Routing without the region's Durable Object (src/region/stateless.ts): the chooser, and the
 * worker degrading to it when its object answers `overloaded`, saying so in the decision header.
 */
import { env } from "cloudflare:workers";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { beforeEach, describe, expect, it } from "vitest";
import worker from "../../src/index.ts";
import { chooseStateless, countStateless, forgetNodes, NODE_MEMORY_MS, rememberNode } from "../../src/region/stateless.ts";
import { ACME_KEY } from "../fixtures/config.ts";
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

  it("knows nothing of a node unseen for too long, or of a model it was never sent", () => {
    rememberNode("r", "a", "http://a", "m", 0);
    expect(chooseStateless("r", "m", "x".repeat(16), [], NODE_MEMORY_MS + 1)).toBeUndefined();
    expect(chooseStateless("r", "m2", "x".repeat(16), [], 1)).toBeUndefined();
  });
});

describe("the region's object overloaded", () => {
  const send = async (environment: Env, content: string) => {
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
    await res.arrayBuffer();
    await waitOnExecutionContext(ctx);
    return res;
  };

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
