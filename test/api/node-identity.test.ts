/**
 * Node identity and allowed origins, as an attacker holding a region's node token would try them:
 * taking over another node's id, pointing a node at an internal address, removing other nodes.
 * Each node gets its own secret at registration; only it can report for, move or remove the node.
 */
import { env } from "cloudflare:workers";
import { createExecutionContext, runDurableObjectAlarm } from "cloudflare:test";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../../src/edge/app.ts";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { TEST_ADMIN_TOKEN, TEST_CONFIG, TEST_NODE_TOKEN } from "../fixtures/config.ts";
import { call, chat, nodeSecret, registerAll, withRegionService } from "../helpers.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

interface ErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}

interface ReportAnswer {
  ok: boolean;
  node_id: string;
  registered: boolean;
  node_secret?: string;
}

function body(id: string, url: string, region = "us", models = ["m-us"]) {
  return { node_id: id, region, url, models, kv_capacity_tokens: 100_000, running: 0, waiting: 0, kv_usage: 0 };
}

function post(report: unknown, token: string, fetcher: (path: string, init: RequestInit) => Promise<Response> = call) {
  return fetcher("/v1/nodes/report", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(report),
  });
}

function del(region: string, id: string, token: string) {
  return call(`/v1/nodes/${region}/${id}`, { method: "DELETE", headers: { authorization: `Bearer ${token}` } });
}

/** Registers a node with the region token; returns its secret. */
async function registerNode(id: string, url: string, region = "us", models = ["m-us"]): Promise<string> {
  const res = await post(body(id, url, region, models), TEST_NODE_TOKEN);
  expect(res.status, await res.clone().text()).toBe(200);
  const answer = await res.json<ReportAnswer>();
  expect(answer.registered).toBe(true);
  expect(answer.node_secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
  return answer.node_secret!;
}

async function nodeState(region: string, id: string) {
  const res = await call(`/admin/state/${region}`, { headers: admin });
  return (await res.json<RegionSnapshot>()).nodes.find((n) => n.id === id);
}

async function expectError(res: Response, status: number, code: string, param?: string | null): Promise<ErrorBody["error"]> {
  expect(res.status).toBe(status);
  const { error } = await res.json<ErrorBody>();
  expect(Object.keys(error).sort()).toEqual(["code", "message", "param", "type"]);
  expect(error.code).toBe(code);
  if (param !== undefined) expect(error.param).toBe(param);
  return error;
}

describe("node identity", () => {
  it("registration returns the node's secret once; later reports carry it and get none back", async () => {
    const res = await post(body("fresh", "http://fresh.ok.node.test"), TEST_NODE_TOKEN);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const first = await res.json<ReportAnswer>();
    expect(first).toMatchObject({ ok: true, node_id: "fresh", registered: true });
    const later = await post({ ...body("fresh", "http://fresh.ok.node.test"), running: 3 }, first.node_secret!);
    expect(later.status).toBe(200);
    const answer = await later.json<ReportAnswer>();
    expect(answer).toEqual({ ok: true, node_id: "fresh", region: "us", expires_after_ms: 15_000, registered: false });
    expect((await nodeState("us", "fresh"))!.load.report?.running).toBe(3);
  });

  it("a report reusing another node's id with only the region token is refused; the node's URL and traffic stay", async () => {
    await registerNode("victim", "http://victim.ok.node.test", "us", ["m-keep"]);
    const hijack = await post(body("victim", "http://attacker.ok.node.test", "us", ["m-keep"]), TEST_NODE_TOKEN);
    expect(hijack.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(hijack.headers.get("x-request-id")).toBeTruthy();
    const error = await expectError(hijack, 403, "node_identity_mismatch", "node_id");
    expect(error.type).toBe("permission_error");
    expect(error.message).toContain("node secret");
    expect((await nodeState("us", "victim"))!.url).toBe("http://victim.ok.node.test");
    // The next customer request still goes to the real node.
    const res = await chat(
      { model: "m-keep", messages: [{ role: "user", content: "another tenant's prompt" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("x-fake-node")).toBe("victim");
    await res.arrayBuffer();
  });

  it("another node's secret, or any other token, cannot act as a node", async () => {
    const a = await registerNode("owner-a", "http://owner-a.ok.node.test");
    const b = await registerNode("owner-b", "http://owner-b.ok.node.test");
    expect(a).not.toBe(b);
    await expectError(await post(body("owner-a", "http://owner-b.ok.node.test"), b), 403, "node_identity_mismatch");
    await expectError(await post(body("owner-a", "http://owner-a.ok.node.test"), "A".repeat(43)), 403, "node_identity_mismatch");
    await expectError(await post(body("owner-a", "http://owner-a.ok.node.test"), TEST_ADMIN_TOKEN), 403, "node_identity_mismatch");
    expect((await nodeState("us", "owner-a"))!.url).toBe("http://owner-a.ok.node.test");
    // A secret for an id nobody registered: 401, as any unknown token.
    await expectError(await post(body("nobody", "http://nobody.ok.node.test"), a), 401, "invalid_node_token");
    await expectError(await post(body("nobody", "http://nobody.ok.node.test"), "short-garbage"), 401, "invalid_node_token");
    expect(await nodeState("us", "nobody")).toBeUndefined();
  });

  it("a node moves (URL change) with its own secret only, and only inside the allowed origins", async () => {
    const secret = await registerNode("mover", "http://mover.ok.node.test");
    expect((await post(body("mover", "http://mover-2.ok.node.test:8080/base"), secret)).status).toBe(200);
    expect((await nodeState("us", "mover"))!.url).toBe("http://mover-2.ok.node.test:8080/base");
    await expectError(await post(body("mover", "http://10.0.0.5:8000"), secret), 403, "origin_not_allowed", "url");
    expect((await nodeState("us", "mover"))!.url).toBe("http://mover-2.ok.node.test:8080/base");
  });

  it("DELETE needs the node's own secret or the admin token; the admin's removal revokes the secret", async () => {
    const a = await registerNode("keeper", "http://keeper.ok.node.test");
    const b = await registerNode("other", "http://other.ok.node.test");
    await expectError(await del("us", "keeper", TEST_NODE_TOKEN), 403, "node_identity_mismatch");
    await expectError(await del("us", "keeper", b), 403, "node_identity_mismatch");
    expect(await nodeState("us", "keeper")).toBeDefined();

    const removed = await del("us", "keeper", TEST_ADMIN_TOKEN);
    expect(removed.status).toBe(200);
    expect(await removed.json()).toEqual({ ok: true, node_id: "keeper", region: "us", removed: true });
    expect(await nodeState("us", "keeper")).toBeUndefined();
    // The old secret is revoked: it neither reports nor removes.
    await expectError(await post(body("keeper", "http://keeper.ok.node.test"), a), 401, "invalid_node_token");
    await expectError(await del("us", "keeper", a), 401, "invalid_node_token");
    // The id is free: registering it again gives a new secret.
    const again = await registerNode("keeper", "http://keeper.ok.node.test");
    expect(again).not.toBe(a);
    // A node leaves with its own secret.
    expect((await del("us", "other", b)).status).toBe(200);
    expect((await del("us", "keeper", again)).status).toBe(200);
  });

  it("a node that lost its secret registers again once its entry expires", async () => {
    // Region `ap` expires nodes after 300 ms of silence.
    const lost = await registerNode("amnesiac", "http://amnesiac.ok.node.test", "ap", ["m-ap"]);
    const refused = await post(body("amnesiac", "http://amnesiac.ok.node.test", "ap", ["m-ap"]), TEST_NODE_TOKEN);
    expect(Number(refused.headers.get("retry-after"))).toBe(1);
    await expectError(refused, 403, "node_identity_mismatch");
    await new Promise((r) => setTimeout(r, 400));
    // Whether or not the expiry alarm has run yet, the id is free again.
    const fresh = await registerNode("amnesiac", "http://amnesiac.ok.node.test", "ap", ["m-ap"]);
    expect(fresh).not.toBe(lost);
    await expectError(await post(body("amnesiac", "http://amnesiac.ok.node.test", "ap", ["m-ap"]), lost), 403, "node_identity_mismatch");
    await new Promise((r) => setTimeout(r, 400));
    await runDurableObjectAlarm(env.REGION.getByName("ap"));
    expect(await nodeState("ap", "amnesiac")).toBeUndefined();
    // Expired and gone: its secret is unknown now.
    await expectError(await post(body("amnesiac", "http://amnesiac.ok.node.test", "ap", ["m-ap"]), fresh), 401, "invalid_node_token");
  });

  it("two registrations of one new id at once: exactly one gets the id", async () => {
    const [r1, r2] = await Promise.all([
      post(body("racer", "http://racer-1.ok.node.test"), TEST_NODE_TOKEN),
      post(body("racer", "http://racer-2.ok.node.test"), TEST_NODE_TOKEN),
    ]);
    expect([r1.status, r2.status].sort()).toEqual([200, 403]);
    const winner = r1.status === 200 ? "racer-1" : "racer-2";
    expect((await nodeState("us", "racer"))!.url).toBe(`http://${winner}.ok.node.test`);
    await r1.arrayBuffer();
    await r2.arrayBuffer();
  });

  it("static nodes keep reporting with the region token, at their configured URL only", async () => {
    const ok = await post(body("static-1", "http://static-1.ok.node.test", "rr", ["m-rr"]), TEST_NODE_TOKEN);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ ok: true, node_id: "static-1", region: "rr", expires_after_ms: 15_000, registered: false });
    const moved = await post(body("static-1", "http://static-9.ok.node.test", "rr", ["m-rr"]), TEST_NODE_TOKEN);
    await expectError(moved, 403, "static_node_url", "url");
    expect((await nodeState("rr", "static-1"))!.url).toBe("http://static-1.ok.node.test");
    await expectError(await del("rr", "static-1", TEST_NODE_TOKEN), 403, "node_identity_mismatch");
  });

  it("the test helpers act as an agent: registerAll keeps each node's secret for its later reports", async () => {
    await registerAll([{ id: "helped", region: "eu", models: ["m-eu"] }]);
    const secret = nodeSecret("eu", "helped");
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await registerAll([{ id: "helped", region: "eu", models: ["m-eu"], running: 2 }]);
    expect(nodeSecret("eu", "helped")).toBe(secret);
  });
});

describe("forged node URLs", () => {
  it.each([
    ["a cloud metadata address", "http://169.254.169.254/latest/meta-data", 403, "origin_not_allowed"],
    ["a link-local address", "http://169.254.1.1:8000", 403, "origin_not_allowed"],
    ["IPv6 metadata", "http://[fd00:ec2::254]/", 403, "origin_not_allowed"],
    ["IPv6 link-local", "http://[fe80::1]:8000/", 403, "origin_not_allowed"],
    ["the GCP metadata name", "http://metadata.google.internal/computeMetadata/v1/", 403, "origin_not_allowed"],
    ["metadata as a decimal IPv4", "http://2852039166/", 403, "origin_not_allowed"],
    ["metadata mapped into IPv6", "http://[::ffff:169.254.169.254]/", 403, "origin_not_allowed"],
    ["a private address", "http://10.0.0.5:8000", 403, "origin_not_allowed"],
    ["a private address as a decimal", "http://167772165/", 403, "origin_not_allowed"],
    ["a private /16", "http://192.168.1.20", 403, "origin_not_allowed"],
    ["an unspecified address", "http://0.0.0.0:8000", 403, "origin_not_allowed"],
    ["a public host not listed", "https://attacker.example.net", 403, "origin_not_allowed"],
    ["userinfo", "http://admin:hunter2@forged.ok.node.test/", 400, "invalid_node_url"],
    ["a fragment", "http://forged.ok.node.test/#frag", 400, "invalid_node_url"],
    [
      "a host over 253 characters",
      `http://${"h".repeat(63)}.${"h".repeat(63)}.${"h".repeat(63)}.${"h".repeat(63)}.ok.node.test`,
      400,
      "invalid_node_url",
    ],
    ["a 3,000-character host", `http://${"a".repeat(3000)}.ok.node.test`, 400, "invalid_report"],
    ["another scheme", "gopher://forged.ok.node.test", 400, "invalid_report"],
  ])("%s is refused, naming the field, registering nothing", async (_, url, status, code) => {
    const res = await post(body("forged", url), TEST_NODE_TOKEN);
    const text = await res.clone().text();
    const error = await expectError(res, status, code, "url");
    expect(error.message).toContain("url");
    expect(text).not.toContain("hunter2");
    expect(text).not.toContain("admin:");
    expect(await nodeState("us", "forged")).toBeUndefined();
  });

  it("the router stores and calls the normalised URL it checked", async () => {
    await registerNode("norm", "HTTP://Norm.OK.Node.Test:80");
    expect((await nodeState("us", "norm"))!.url).toBe("http://norm.ok.node.test");
  });
});

describe("secrets stay secret", () => {
  const spies: Array<{ mock: { calls: unknown[][] }; mockRestore(): void }> = [];
  beforeEach(() => {
    for (const m of ["log", "info", "warn", "error", "debug"] as const) spies.push(vi.spyOn(console, m));
  });
  afterEach(() => {
    for (const s of spies.splice(0)) s.mockRestore();
  });

  it("never in a log line, nor in any answer but the registration's", async () => {
    const answers: string[] = [];
    const keep = async (res: Response) => {
      answers.push([...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n") + "\n" + (await res.clone().text()));
      return res;
    };
    const registration = await post(body("quiet", "http://quiet.ok.node.test", "eu", ["m-eu"]), TEST_NODE_TOKEN);
    const secret = (await registration.json<ReportAnswer>()).node_secret!;
    await keep(await post(body("quiet", "http://quiet.ok.node.test", "eu", ["m-eu"]), secret));
    await keep(await post(body("quiet", "http://quiet-2.ok.node.test", "eu", ["m-eu"]), secret));
    await keep(await post(body("quiet", "http://10.1.1.1", "eu", ["m-eu"]), secret));
    await keep(await post(body("quiet", "http://user:" + secret + "@quiet.ok.node.test", "eu", ["m-eu"]), secret));
    await keep(await post(body("quiet", "http://quiet.ok.node.test", "eu", ["m-eu"]), TEST_NODE_TOKEN));
    await keep(await post(body("quiet", "http://quiet.ok.node.test", "us", ["m-us"]), secret));
    await keep(await call("/admin/state/eu", { headers: admin }));
    await keep(await call("/metrics", { headers: admin }));
    await keep(await call("/admin/history", { headers: admin }));
    const res = await chat({ model: "m-eu", messages: [{ role: "user", content: "hello" }] }, { headers: { "x-warmpath-region": "eu" } });
    await keep(res);
    await keep(await del("eu", "quiet", TEST_NODE_TOKEN));
    await keep(await del("eu", "quiet", secret));
    await keep(await del("eu", "quiet", secret));
    for (const a of answers) expect(a).not.toContain(secret);
    const logged = spies.flatMap((s) => s.mock.calls.map((args) => args.map(String).join(" ")));
    expect(logged.some((l) => l.includes("node_request_refused"))).toBe(true);
    for (const line of logged) expect(line).not.toContain(secret);
    // Nor its hash, which the region object keeps.
    const digest = [...new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret)))]
      .map((b) => b.toString(16).padStart(2, "0"))
      .join("");
    for (const a of answers) expect(a).not.toContain(digest);
  });
});

/** The worker with another configuration (and secrets), for production mode and token rotation. */
function workerWith(config: unknown, secrets: Record<string, string>) {
  const app = createApp();
  const e = { ...env, WARMPATH_CONFIG: config, ...secrets } as unknown as Env;
  return async (path: string, init: RequestInit = {}): Promise<Response> => {
    const ctx = createExecutionContext();
    return app.fetch(new Request("http://localhost" + path, init), withRegionService(e, ctx), ctx);
  };
}

describe("configuration", () => {
  it("production mode refuses loopback in every spelling", async () => {
    const cfg = structuredClone(TEST_CONFIG) as unknown as { mode: string };
    cfg.mode = "production";
    const fetcher = workerWith(cfg, {});
    for (const url of [
      "http://127.0.0.1:8000",
      "http://2130706433/",
      "http://0x7f.1/",
      "http://127.1",
      "http://localhost:8000",
      "http://[::1]/",
    ]) {
      const res = await post(body("loop", url, "eu", ["m-eu"]), TEST_NODE_TOKEN, fetcher);
      const error = await expectError(res, 403, "origin_not_allowed", "url");
      expect(error.message, url).toMatch(/loopback/);
    }
  });

  it("node token rotation: old and new accepted while both are listed; registered nodes keep their secrets throughout", async () => {
    const base = structuredClone(TEST_CONFIG) as unknown as { regions: Array<Record<string, unknown>> };
    const phase = (secretNames: string[]) => {
      const cfg = structuredClone(base);
      const node_token_secret = secretNames.length === 1 ? secretNames[0] : secretNames;
      cfg.regions.push({ ...base.regions[0]!, name: "rot", models: ["m-eu"], node_token_secret });
      return workerWith(cfg, { NODE_TOKEN_ROT_OLD: "rot-old-token", NODE_TOKEN_ROT_NEW: "rot-new-token" });
    };
    const rot = (id: string) => body(id, `http://${id}.ok.node.test`, "rot", ["m-eu"]);

    // Before: the old token registers a node.
    const before = phase(["NODE_TOKEN_ROT_OLD"]);
    const first = await post(rot("rot-1"), "rot-old-token", before);
    const secret1 = (await first.json<ReportAnswer>()).node_secret!;
    await expectError(await post(rot("rot-x"), "rot-new-token", before), 401, "invalid_node_token");

    // During: both tokens register.
    const during = phase(["NODE_TOKEN_ROT_NEW", "NODE_TOKEN_ROT_OLD"]);
    expect((await post(rot("rot-2"), "rot-old-token", during)).status).toBe(200);
    const third = await post(rot("rot-3"), "rot-new-token", during);
    expect(third.status).toBe(200);
    const secret3 = (await third.json<ReportAnswer>()).node_secret!;
    expect((await post(rot("rot-1"), secret1, during)).status).toBe(200);

    // After: only the new token registers; nodes registered with the old one keep reporting.
    const after = phase(["NODE_TOKEN_ROT_NEW"]);
    await expectError(await post(rot("rot-4"), "rot-old-token", after), 401, "invalid_node_token");
    expect((await post(rot("rot-4"), "rot-new-token", after)).status).toBe(200);
    expect((await post(rot("rot-1"), secret1, after)).status).toBe(200);
    expect((await post(rot("rot-3"), secret3, after)).status).toBe(200);
  });

  it("a region's token is refused for another region (403 wrong_region_token)", async () => {
    const cfg = structuredClone(TEST_CONFIG) as unknown as { regions: Array<Record<string, unknown>> };
    cfg.regions[1]!.node_token_secret = "NODE_TOKEN_US_ONLY";
    const fetcher = workerWith(cfg, { NODE_TOKEN_US_ONLY: "us-only-token" });
    await expectError(
      await post(body("cross", "http://cross.ok.node.test", "eu", ["m-eu"]), "us-only-token", fetcher),
      403,
      "wrong_region_token",
    );
    await expectError(
      await fetcher("/v1/nodes/eu/cross", { method: "DELETE", headers: { authorization: "Bearer us-only-token" } }),
      403,
      "wrong_region_token",
    );
  });
});
