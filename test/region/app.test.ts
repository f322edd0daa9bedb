/**
 * The region worker's service (src/region/app.ts): to a signed message, it refuses a contract
 * version or a region it does not serve before touching anything, and a malformed message from the edge is a 400 of its
 * own (logged), never a node call.
 */
import { env } from "cloudflare:workers";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { createRegionApp } from "../../src/region/app.ts";
import {
  CONTRACT_HEADER,
  REFUSAL_HEADER,
  REGION_CONTRACT_VERSION,
  encodeDispatch,
  regionPath,
  type DispatchRequest,
} from "../../src/contracts/region-service.ts";
import { REGION_VAR } from "../../src/contracts/topology.ts";
import { dispatchMeta } from "../fixtures/dispatch.ts";
import { internalAuthHeader } from "../../src/http/internal-auth.ts";

/** A message as the edge sends it: signed with the internal secret (test/region/internal-auth.test.ts tests the refusals). */
async function ask(path: string, init: RequestInit & { version?: string | null; body?: Uint8Array | string } = {}, environment: Env = env) {
  const headers = new Headers(init.headers);
  if (init.version !== null) headers.set(CONTRACT_HEADER, init.version ?? String(REGION_CONTRACT_VERSION));
  const url = `https://region.test${path}`;
  for (const [k, v] of Object.entries(await internalAuthHeader(environment, "edge", init.method ?? "GET", url, init.body)))
    headers.set(k, v);
  const ctx = createExecutionContext();
  const res = await createRegionApp().fetch(new Request(url, { ...init, headers }), environment, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

const meta: DispatchRequest = dispatchMeta();

describe("the region worker", () => {
  it("refuses a contract version it does not speak, or none, before doing anything", async () => {
    for (const version of [null, "0", String(REGION_CONTRACT_VERSION + 1), "x"]) {
      const res = await ask(regionPath.state("us"), { version });
      expect(res.status, String(version)).toBe(503);
      expect(res.headers.get(REFUSAL_HEADER)).toBe("contract-mismatch");
      expect(res.headers.get(CONTRACT_HEADER)).toBe(String(REGION_CONTRACT_VERSION));
      const refusal = (await res.json()) as { reason: string; message: string };
      expect(refusal.reason).toBe("contract-mismatch");
    }
  });

  it("serves only its own region when it is one region's worker", async () => {
    const usOnly = { ...env, [REGION_VAR]: "us" } as unknown as Env;
    const other = await ask(regionPath.state("eu"), {}, usOnly);
    expect(other.headers.get(REFUSAL_HEADER)).toBe("wrong-region");
    expect((await ask(regionPath.state("us"), {}, usOnly)).status).toBe(200);
    expect((await ask(regionPath.state("nowhere"))).headers.get(REFUSAL_HEADER)).toBe("wrong-region");
  });

  it("answers a malformed dispatch with a 400 of its own, calling no node", async () => {
    const post = (body: Uint8Array) => ask(regionPath.dispatch("us"), { method: "POST", body });
    for (const bad of [
      new Uint8Array([0, 0]), // shorter than its length prefix
      new Uint8Array([0xff, 0xff, 0xff, 0xff, 1]), // a meta length past the message
      encodeDispatch({ ...meta, hashes: ["not-16-chars"] }, new Uint8Array()),
      encodeDispatch({ ...meta, tenant: { id: "", weight: 1 } }, new Uint8Array()),
      // A value no HTTP request carries, which setting it on the node's call would throw on.
      encodeDispatch({ ...meta, headers: { "user-agent": "a\r\nx-injected: 1" } }, new Uint8Array()),
    ]) {
      const res = await post(bad);
      expect(res.status).toBe(400);
      const { error } = (await res.json()) as { error: { code: string } };
      expect(error.code).toBe("invalid_region_message");
    }
  });

  it("refuses a request it cannot place with a refusal the edge can act on", async () => {
    // No node serves m-us in this test file: the region has no node for the request.
    const res = await ask(regionPath.dispatch("us"), { method: "POST", body: encodeDispatch(meta, new TextEncoder().encode("{}")) });
    expect(res.headers.get(REFUSAL_HEADER)).toBe("no-node");
    const refusal = (await res.json()) as { reason: string; attempts: Array<{ region: string; outcome: string }> };
    expect(refusal.attempts).toEqual([{ region: "us", outcome: "no-node" }]);
  });
});
