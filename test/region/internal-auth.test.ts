/**
 * The internal boundary (src/region/authenticate.ts, src/core/internal-auth.ts; docs/SECURITY.md),
 * through the real region worker behind its real service binding (the local composition's
 * REGION_WORKERS -> RegionWorker): a forged dispatch, node registration (at the cloud metadata
 * address), node removal or spend batch is refused, 401/403 in OpenAI's shape, and changes nothing;
 * so is a replayed, expired, tampered or wrongly signed one; the previous secret is still accepted
 * during a rotation; and an edge whose secret the region worker does not hold gets 503, not a
 * region answer.
 */
import { env } from "cloudflare:workers";
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it, vi } from "vitest";
import { createApp } from "../../src/edge/app.ts";
import {
  CONTRACT_HEADER,
  REGION_CONTRACT_VERSION,
  encodeDispatch,
  regionPath,
  type DispatchRequest,
} from "../../src/contracts/region-service.ts";
import { ALL_REGIONS_BINDING } from "../../src/contracts/topology.ts";
import { dispatchMeta } from "../fixtures/dispatch.ts";
import { AUTH_REFUSAL_HEADER, INTERNAL_AUTH_HEADER, signInternal, type InternalRole } from "../../src/core/internal-auth.ts";
import { utcDay } from "../../src/core/usage/periods.ts";
import {
  TEST_CONFIG,
  TEST_INTERNAL_SECRET,
  TEST_INTERNAL_SECRET_PREVIOUS,
  TEST_INTERNAL_SECRET_WRONG,
  TEST_NODE_TOKEN,
} from "../fixtures/config.ts";
import { BASE, registerAll } from "../helpers.ts";

const ORIGIN = "https://region.warmpath.internal";
const MODEL = "m-auth";
const NODE = { id: "auth-us-1", region: "us", models: [MODEL] };
/** The budget ledger's home: the first configured region's worker. */
const HOME = TEST_CONFIG.regions[0]!.name;

interface Sign {
  secret?: string;
  role?: InternalRole;
  timestamp?: number;
  nonce?: string;
  /** Sign these bytes (or this path) instead of what is sent: a tampered message. */
  signedBody?: Uint8Array | string;
  signedPath?: string;
}

const bytesOf = (b: Uint8Array | string | undefined) => (typeof b === "string" ? new TextEncoder().encode(b) : (b ?? new Uint8Array()));

async function signature(method: string, path: string, body: Uint8Array | string | undefined, o: Sign = {}): Promise<string> {
  return signInternal(crypto.subtle, o.secret ?? TEST_INTERNAL_SECRET, {
    role: o.role ?? "edge",
    method,
    pathAndQuery: o.signedPath ?? path,
    timestamp: o.timestamp ?? Date.now(),
    nonce: o.nonce ?? crypto.randomUUID().replace(/-/g, ""),
    body: bytesOf(o.signedBody ?? body),
  });
}

/** One message to the region worker over its binding; `auth`: a header value, or null for none. */
async function send(method: "GET" | "POST", path: string, body: Uint8Array | string | undefined, auth: string | null): Promise<Response> {
  const headers: Record<string, string> = { [CONTRACT_HEADER]: String(REGION_CONTRACT_VERSION) };
  if (typeof body === "string") headers["content-type"] = "application/json";
  if (auth !== null) headers[INTERNAL_AUTH_HEADER] = auth;
  const worker = (env as unknown as Record<string, Fetcher>)[ALL_REGIONS_BINDING]!;
  return worker.fetch(ORIGIN + path, { method, headers, body: body ?? null });
}

/** A message signed as the edge signs it (or as `o` says). */
async function signedSend(method: "GET" | "POST", path: string, body?: Uint8Array | string, o: Sign = {}): Promise<Response> {
  return send(method, path, body, await signature(method, path, body, o));
}

async function expectRefused(res: Response, status: 401 | 403, failure: string): Promise<void> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  expect(res.headers.get(AUTH_REFUSAL_HEADER)).toBe(failure);
  const parsed = JSON.parse(text) as { error: Record<string, unknown> };
  expect(Object.keys(parsed)).toEqual(["error"]);
  expect(Object.keys(parsed.error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(parsed.error.type).toBe(status === 401 ? "authentication_error" : "permission_error");
  expect(String(parsed.error.code)).toBe(`internal_auth_${failure.replace(/-/g, "_")}`);
  // No secret, and not the signature it was sent, ever comes back.
  for (const secret of [TEST_INTERNAL_SECRET, TEST_INTERNAL_SECRET_PREVIOUS, TEST_INTERNAL_SECRET_WRONG])
    expect(text).not.toContain(secret);
}

interface Snapshot {
  nodes: Array<{ id: string; url: string; models: string[]; load: { inflight: number } }>;
  inflight: number;
  tenants: Record<string, unknown>;
  rejected: unknown;
}

/** The region's state as far as a message could change it: its nodes, requests in flight, per-tenant counters. */
async function regionState(region = "us") {
  const res = await signedSend("GET", regionPath.state(region));
  expect(res.status).toBe(200);
  const s = await res.json<Snapshot>();
  return {
    nodes: s.nodes.map((n) => ({ id: n.id, url: n.url, models: n.models, inflight: n.load.inflight })),
    inflight: s.inflight,
    tenants: s.tenants,
    rejected: s.rejected,
  };
}

async function usageOf(tenant: string, region = "us") {
  const day = utcDay(Date.now());
  const res = await signedSend("GET", `${regionPath.usage(region)}?tenant=${tenant}&from=${day}&to=${day}`);
  expect(res.status).toBe(200);
  return (await res.json<{ data: unknown[] }>()).data;
}

function dispatchMessage(tenant: string): Uint8Array {
  const meta: DispatchRequest = dispatchMeta({ requestId: `auth-${crypto.randomUUID()}`, tenant: { id: tenant, weight: 1 }, model: MODEL });
  return encodeDispatch(meta, new TextEncoder().encode(JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "forged" }] })));
}

describe("the internal boundary", () => {
  beforeAll(async () => {
    await registerAll([NODE]);
  });

  it("refuses a forged dispatch (unsigned, wrong secret, tampered body): 401, no node called, nothing billed", async () => {
    const before = await regionState();
    const usageBefore = await usageOf("globex");
    const message = dispatchMessage("globex");
    await expectRefused(await send("POST", regionPath.dispatch("us"), message, null), 401, "missing");
    await expectRefused(
      await signedSend("POST", regionPath.dispatch("us"), message, { secret: TEST_INTERNAL_SECRET_WRONG }),
      401,
      "bad-signature",
    );
    await expectRefused(await send("POST", regionPath.dispatch("us"), message, "v1;r=edge;t=1;n=x;s=00"), 401, "malformed");
    // Signed for another tenant's message, sent with this one.
    const other = dispatchMessage("acme");
    await expectRefused(await signedSend("POST", regionPath.dispatch("us"), message, { signedBody: other }), 401, "bad-signature");
    // Signed for another region's path.
    await expectRefused(
      await signedSend("POST", regionPath.dispatch("us"), message, { signedPath: regionPath.dispatch("eu") }),
      401,
      "bad-signature",
    );
    expect(await regionState()).toEqual(before);
    expect(await usageOf("globex")).toEqual(usageBefore);

    // The same message signed is served: the refusals above are the signature's, not the message's.
    const served = await signedSend("POST", regionPath.dispatch("us"), message);
    expect(served.status, await served.clone().text()).toBe(200);
    await served.text();
    expect((await regionState()).tenants).not.toEqual(before.tenants);
  });

  it("refuses a forged node registration at the cloud metadata address; the edge-signed one is refused by the allow-list here too", async () => {
    const before = await regionState();
    const body = JSON.stringify({
      report: {
        node_id: "metadata",
        region: "us",
        url: "http://169.254.169.254",
        models: [MODEL],
        kv_capacity_tokens: 100_000,
        running: 0,
        waiting: 0,
        kv_usage: 0,
      },
      credential: { kind: "admin" },
    });
    await expectRefused(await send("POST", regionPath.report("us"), body, null), 401, "missing");
    await expectRefused(
      await signedSend("POST", regionPath.report("us"), body, { secret: TEST_INTERNAL_SECRET_WRONG }),
      401,
      "bad-signature",
    );
    // Signed by a holder of the secret, as an edge with another configuration might: the region
    // worker checks the origin against its own allow-list and refuses it.
    const error = vi.spyOn(console, "error");
    const signed = await signedSend("POST", regionPath.report("us"), body);
    expect(signed.status).toBe(403);
    expect((await signed.json<{ error: { code: string; param: string } }>()).error).toMatchObject({
      code: "origin_not_allowed",
      param: "url",
    });
    expect(error.mock.calls.some(([line]) => String(line).includes('"event":"region_origin_refused"'))).toBe(true);
    error.mockRestore();
    expect(await regionState()).toEqual(before);
    expect(before.nodes.some((n) => n.id === "metadata")).toBe(false);
  });

  it("refuses a forged node removal, and a replayed one; the node stays", async () => {
    const body = JSON.stringify({ nodeId: NODE.id, credential: { kind: "admin" } });
    const before = await regionState();
    expect(before.nodes.some((n) => n.id === NODE.id)).toBe(true);
    await expectRefused(await send("POST", regionPath.remove("us"), body, null), 401, "missing");
    await expectRefused(
      await signedSend("POST", regionPath.remove("us"), body, { secret: TEST_INTERNAL_SECRET_WRONG }),
      401,
      "bad-signature",
    );
    expect(await regionState()).toEqual(before);

    // A real removal, captured and sent again after the node registered again: refused as replayed.
    const auth = await signature("POST", regionPath.remove("us"), body);
    const first = await send("POST", regionPath.remove("us"), body, auth);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ ok: true });
    expect((await regionState()).nodes.some((n) => n.id === NODE.id)).toBe(false);
    await registerAll([NODE]);
    const registered = await regionState();
    expect(registered.nodes.some((n) => n.id === NODE.id)).toBe(true);
    await expectRefused(await send("POST", regionPath.remove("us"), body, auth), 403, "replayed");
    expect(await regionState()).toEqual(registered);
  });

  it("refuses a message outside the clock skew, either way", async () => {
    const before = await regionState();
    const body = JSON.stringify({ nodeId: NODE.id, credential: { kind: "admin" } });
    await expectRefused(await signedSend("POST", regionPath.remove("us"), body, { timestamp: Date.now() - 31_000 }), 403, "expired");
    await expectRefused(await signedSend("POST", regionPath.remove("us"), body, { timestamp: Date.now() + 31_000 }), 403, "expired");
    expect(await regionState()).toEqual(before);
  });

  it("takes spend batches only from region workers: forged or edge-signed ones change no tenant's spend", async () => {
    const day = utcDay(Date.now());
    const forged = (source: string, tokens: number) =>
      JSON.stringify({ source, seq: 1, spends: [{ tenant: "victim", period: day, tokens, usd: 1_000 }], periods: [day] });
    const path = regionPath.spend(HOME);
    await expectRefused(await send("POST", path, forged("forger/0/a", 10_000_000), null), 401, "missing");
    await expectRefused(await signedSend("POST", path, forged("forger/0/b", 10_000_000), { role: "edge" }), 403, "wrong-role");
    await expectRefused(
      await signedSend("POST", path, forged("forger/0/c", 10_000_000), { role: "region", secret: TEST_INTERNAL_SECRET_WRONG }),
      401,
      "bad-signature",
    );
    // The ledger's totals, asked as a region worker asks them (an empty batch): no spend for the victim.
    const totals = async (source: string) => {
      const res = await signedSend("POST", path, JSON.stringify({ source, seq: 1, spends: [], periods: [day] }), { role: "region" });
      expect(res.status).toBe(200);
      return (await res.json<{ totals: Array<{ tenant: string; tokens: number }> }>()).totals.filter((t) => t.tenant === "victim");
    };
    expect(await totals("reader/0/a")).toEqual([]);
    // A region-signed batch is applied: the refusals above were the boundary's.
    const applied = await signedSend("POST", path, forged("region-us/0/x", 42), { role: "region" });
    expect(applied.status).toBe(200);
    expect((await totals("reader/0/b")).map((t) => t.tokens)).toEqual([42]);
  });

  it("accepts the previous secret during a rotation, and no other", async () => {
    const ok = await signedSend("GET", regionPath.state("us"), undefined, { secret: TEST_INTERNAL_SECRET_PREVIOUS });
    expect(ok.status).toBe(200);
    await ok.arrayBuffer();
    await expectRefused(
      await signedSend("GET", regionPath.state("us"), undefined, { secret: TEST_INTERNAL_SECRET_WRONG }),
      401,
      "bad-signature",
    );
  });

  it("signs the query too: a usage query signed for one tenant cannot read another's", async () => {
    const day = utcDay(Date.now());
    const mine = `${regionPath.usage("us")}?tenant=acme&from=${day}&to=${day}`;
    const theirs = `${regionPath.usage("us")}?tenant=globex&from=${day}&to=${day}`;
    await expectRefused(await signedSend("GET", theirs, undefined, { signedPath: mine }), 401, "bad-signature");
  });

  it("counts every refusal by failure on the region worker's /metrics", async () => {
    const worker = (env as unknown as Record<string, Fetcher>)[ALL_REGIONS_BINDING]!;
    const text = await (await worker.fetch(`${ORIGIN}/metrics`)).text();
    const count = (failure: string) =>
      Number(new RegExp(`warmpath_region_internal_auth_refusals_total\\{failure="${failure}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    // At least the refusals of the tests above (the isolate's counters: other test files' may add).
    expect(count("missing")).toBeGreaterThanOrEqual(4);
    expect(count("bad-signature")).toBeGreaterThanOrEqual(8);
    expect(count("replayed")).toBeGreaterThanOrEqual(1);
    expect(count("expired")).toBeGreaterThanOrEqual(2);
    expect(count("wrong-role")).toBeGreaterThanOrEqual(1);
  });

  it("an edge whose secret the region worker does not hold gets 503 and says why in its log", async () => {
    const ctx = createExecutionContext();
    const edgeEnv = { ...env, INTERNAL_SECRET: TEST_INTERNAL_SECRET_WRONG, INTERNAL_SECRET_PREVIOUS: undefined } as unknown as Env;
    const error = vi.spyOn(console, "error");
    const res = await createApp().fetch(
      new Request(`${BASE}/v1/nodes/report`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${TEST_NODE_TOKEN}` },
        body: JSON.stringify({
          node_id: "auth-us-2",
          region: "us",
          url: "http://auth-us-2.ok.node.test",
          models: [MODEL],
          kv_capacity_tokens: 1000,
          running: 0,
          waiting: 0,
          kv_usage: 0,
        }),
      }) as Request<unknown, IncomingRequestCfProperties>,
      edgeEnv,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect(res.status).toBe(503);
    expect((await res.json<{ error: { code: string } }>()).error.code).toBe("region_unavailable");
    expect(error.mock.calls.some(([line]) => String(line).includes('"event":"region_auth_refused"'))).toBe(true);
    expect(error.mock.calls.some(([line]) => String(line).includes(TEST_INTERNAL_SECRET_WRONG))).toBe(false);
    error.mockRestore();
    expect((await regionState()).nodes.some((n) => n.id === "auth-us-2")).toBe(false);
  });
});
