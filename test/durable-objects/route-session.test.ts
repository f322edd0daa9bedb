/**
 * The region object's RouteSession (durable-objects/route-session.ts): a placement comes with its
 * session, and its first byte and completion are calls on it (one RPC session, one billed
 * request).
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.ts";
import { registerAll } from "../helpers.ts";

const route = (requestId: string) => ({ requestId, model: "m-us", hashes: ["0123456789abcdef"], promptTokens: 100, tenant: "acme" });

describe("a placement's session", () => {
  it("releases the request when completed on it, once", async () => {
    await registerAll([{ id: "sess-a", region: "us", models: ["m-us"] }]);
    const region = loadConfig(env).regionByName.get("us")!;
    const stub = env.REGION.getByName("us");
    const answer = await stub.route(region.init, route("sess-1"));
    expect(answer.ok).toBe(true);
    if (!answer.ok) return;
    const inflight = async () => (await stub.snapshot(region.init)).nodes.find((n) => n.id === "sess-a")!.load.inflight;
    expect(await inflight()).toBe(1);
    await answer.session.firstByte();
    expect(await answer.session.complete({ status: "ok", usage: { promptTokens: 100, completionTokens: 3 } })).toBe(true);
    expect(await inflight()).toBe(0);
    // A second completion of the same request changes nothing.
    expect(await answer.session.complete({ status: "ok" })).toBe(false);
  });

  it("is the only way to a ticket: the object offers no RPC method that takes one", async () => {
    await registerAll([{ id: "sess-b", region: "us", models: ["m-us"] }]);
    const region = loadConfig(env).regionByName.get("us")!;
    const stub = env.REGION.getByName("us");
    const answer = await stub.route(region.init, route("sess-2"));
    expect(answer.ok).toBe(true);
    if (!answer.ok) return;
    // The session's ticket is the object's own value, not validated again: nothing else may pass one.
    const rpc = stub as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    for (const name of ["ticketComplete", "ticketFirstByte", "tickets"]) {
      await expect(Promise.resolve().then(() => rpc[name]!(answer.ticket, { status: "ok" }))).rejects.toThrow();
    }
    expect(await answer.session.complete({ status: "ok" })).toBe(true);
  });
});
