/**
 * The proxy path: SSE passes through chunk by chunk, the client's body is forwarded byte for
 * byte (but for the tenant's `cache_salt` and usage asked on a stream that did not), every stream is measured, failures before
 * the first byte are retried elsewhere, failures after it end the stream with an error event.
 */
import { describe, expect, it, vi } from "vitest";
import { FAKE_CHUNK_DELAY_MS, handleFakeNode } from "../fixtures/fake-node.ts";
import { ACME_KEY, TEST_ADMIN_TOKEN, TEST_ORIGIN_TOKEN } from "../fixtures/config.ts";
import { call, chat, readChunks, registerAll } from "../helpers.ts";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { engineCacheSalt } from "../../src/region/cache-salt.ts";
import { sha256Hex } from "../../src/core/hex.ts";

/** The body as a region with `engine_cache_isolation = "cache_salt"` forwards it for tenant acme. */
const salted = async (raw: string) => raw.replace("{", `{"cache_salt":"${await engineCacheSalt("tenant:acme", undefined)}",`);

describe("streaming", () => {
  it("passes SSE through with chunks arriving separately, as the node emits them", async () => {
    await registerAll([{ id: "s1", region: "us", models: ["m-us"] }]);
    const res = await chat(
      { model: "m-us", stream: true, messages: [{ role: "user", content: "stream please" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const chunks = await readChunks(res);
    // The fake node emits 8 content events, each after a pause: they must not be coalesced.
    const contentChunks = chunks.filter((c) => c.text.includes('"content"'));
    expect(contentChunks.length).toBeGreaterThanOrEqual(8);
    const span = chunks.at(-1)!.at - chunks[0]!.at;
    expect(span).toBeGreaterThanOrEqual(FAKE_CHUNK_DELAY_MS * 6);
    const text = chunks.map((c) => c.text).join("");
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
    expect(text).toContain('"content":" s1"');
  });

  it("forwards the client's body byte for byte, unknown fields included, and never the client's key", async () => {
    // Odd spacing, key order and fields the schema does not know must all survive; the one change
    // is the tenant's cache salt, right after the opening brace.
    const raw = `{ "messages":[{"role":"user","content":"hi"}],  "model":"m-us", "tools":[{"type":"function","function":{"name":"f","parameters":{}}}],
      "response_format":{"type":"json_object"}, "prompt_cache_key":"k", "x_vendor":{"a":[1,2,3]} }`;
    const res = await chat(raw, { headers: { "x-warmpath-region": "us" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-fake-body-sha256")).toBe(await sha256Hex(await salted(raw)));
    expect(res.headers.get("x-fake-authorization")).toBe("none");
    await res.arrayBuffer();
  });

  it("replaces a client's own cache_salt with its namespace's salt of it, so no client can name another's", async () => {
    const parsed = { model: "m-us", messages: [{ role: "user", content: "salted" }], cache_salt: "s1" };
    const res = await chat(JSON.stringify(parsed), { headers: { "x-warmpath-region": "us" } });
    const expected = JSON.stringify({ ...parsed, cache_salt: await engineCacheSalt("tenant:acme", "s1") });
    expect(res.headers.get("x-fake-body-sha256")).toBe(await sha256Hex(expected));
    expect(expected).not.toContain('"s1"');
    await res.arrayBuffer();
  });

  it("forwards the body untouched in a region whose engines take no salt (engine_cache_isolation = none)", async () => {
    const raw = `{"model":"m-rr",  "messages":[{"role":"user","content":"as sent"}], "cache_salt":"s1"}`;
    const res = await chat(raw);
    expect(res.headers.get("x-warmpath-region")).toBe("rr");
    expect(res.headers.get("x-fake-body-sha256")).toBe(await sha256Hex(raw));
    // A node inside the region's allowed origins gets the region's origin token, never the client's key.
    expect(res.headers.get("x-fake-authorization")).toBe(`Bearer ${TEST_ORIGIN_TOKEN}`);
    await res.arrayBuffer();
  });
});

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

describe("every stream measured", () => {
  const measured = async (nodeId: string) => {
    const state = await (await call("/admin/state", { headers: admin })).json<{ regions: RegionSnapshot[] }>();
    return state.regions.flatMap((r) => r.nodes).find((n) => n.id === nodeId)!.metrics.measuredRequests;
  };
  const normalise = (text: string) => text.replace(/"created":\d+/g, '"created":0');

  it("asks the node for usage on a stream that did not, and the client sees exactly the stream it asked for", async () => {
    await registerAll([{ id: "meter-s", region: "us", models: ["m-learn"] }]);
    const raw = `{"model":"m-learn","stream":true,"messages":[{"role":"user","content":"measure me"}]}`;
    const res = await chat(raw, { headers: { "x-warmpath-region": "us" } });
    expect(res.status).toBe(200);
    // The node was sent the client's bytes with usage asked for, and nothing else changed.
    const sent = (await salted(raw)).replace("{", '{"stream_options":{"include_usage":true},');
    expect(res.headers.get("x-fake-body-sha256")).toBe(await sha256Hex(sent));
    const client = (await readChunks(res)).map((c) => c.text).join("");
    // What the node answers the client's own request (no usage asked): byte for byte the same.
    const direct = await (
      await handleFakeNode(new Request("http://meter-s.ok.node.test/v1/chat/completions", { method: "POST", body: raw }))
    ).text();
    expect(normalise(client)).toBe(normalise(direct));
    expect(client).not.toContain('"usage"');
    await new Promise((r) => setTimeout(r, 50)); // the completion is recorded after the stream ends
    expect(await measured("meter-s")).toBe(1);
  });

  it("logs one decision line per request, with the candidates considered, and never a prompt or a key", async () => {
    await registerAll([
      { id: "log-a", region: "us", models: ["m-learn"] },
      { id: "log-b", region: "us", models: ["m-learn"] },
    ]);
    const secretPrompt = "the customer's confidential prompt 7f3a9c";
    const spy = vi.spyOn(console, "log");
    try {
      const res = await chat(
        { model: "m-learn", stream: true, messages: [{ role: "user", content: secretPrompt }] },
        { key: ACME_KEY, headers: { "x-warmpath-region": "us" } },
      );
      await readChunks(res);
      await new Promise((r) => setTimeout(r, 50));
      const lines = spy.mock.calls.map((c) => String(c[0]));
      const line = lines
        .map((l) => {
          try {
            return JSON.parse(l) as Record<string, unknown>;
          } catch {
            return {};
          }
        })
        .find((l) => l.event === "request" && l.request_id === res.headers.get("x-request-id"))!;
      expect(line).toMatchObject({ tenant: "acme", model: "m-learn", region: "us", node: res.headers.get("x-warmpath-node"), status: 200 });
      expect(line.decision).toBe(res.headers.get("x-warmpath-decision"));
      const considered = line.considered as Array<{ node: string; estimatedTtftMs: number; reportAgeMs: number | null }>;
      expect(considered.length).toBeGreaterThanOrEqual(1);
      expect(considered.some((c) => c.node === line.node)).toBe(true);
      expect(typeof line.measured_cached_tokens).toBe("number");
      for (const l of lines) {
        expect(l).not.toContain("confidential prompt");
        expect(l).not.toContain(ACME_KEY);
      }
    } finally {
      spy.mockRestore();
    }
  });

  it("leaves a stream that asked for usage as the node sent it", async () => {
    await registerAll([{ id: "meter-t", region: "us", models: ["m-learn"] }]);
    const raw = `{"model":"m-learn","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"with usage"}]}`;
    const res = await chat(raw, { headers: { "x-warmpath-region": "us", "x-session-id": "usage-t" } });
    expect(res.headers.get("x-fake-body-sha256")).toBe(await sha256Hex(await salted(raw)));
    const client = (await readChunks(res)).map((c) => c.text).join("");
    expect(client).toContain('"choices":[],"usage"');
  });
});

describe("failures", () => {
  it("retries a node that fails before the first byte on another node", async () => {
    // ap has one node answering 503 and one healthy node; each failure also cools the node down.
    await registerAll([
      { id: "bad-a", region: "eu", mode: "fail", models: ["m-shared"] },
      { id: "bad-b", region: "eu", mode: "refuse", models: ["m-shared"] },
      { id: "good", region: "eu", models: ["m-shared"] },
    ]);
    const seen = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const res = await chat(
        { model: "m-shared", messages: [{ role: "user", content: `retry me ${i} ` + "x".repeat(600) }] },
        { headers: { "x-warmpath-region": "eu" } },
      );
      expect(res.status).toBe(200);
      expect(res.headers.get("x-warmpath-node")).toBe("good");
      seen.add(res.headers.get("x-warmpath-decision")!);
      await res.arrayBuffer();
    }
    // At least one request met a failing node first and was retried.
    expect(seen.has("retry")).toBe(true);
    // Each failure is counted by its reason, with its cool-down.
    await new Promise((r) => setTimeout(r, 50));
    const state = await (await call("/admin/state/eu", { headers: admin })).json<RegionSnapshot>();
    const metrics = (id: string) => state.nodes.find((n) => n.id === id)!.metrics;
    const [fail, refuse] = [metrics("bad-a"), metrics("bad-b")];
    expect(fail.failures).toMatchObject({ "http-5xx": fail.failed, connection: 0, timeout: 0 });
    // (Through miniflare's outbound service a refused connection reaches the worker as a 5xx answer.)
    expect(Object.values(refuse.failures).reduce((a, b) => a + b, 0)).toBe(refuse.failed);
    expect(fail.failed + refuse.failed).toBeGreaterThanOrEqual(1);
    expect(fail.cooldowns + refuse.cooldowns).toBe(fail.failed + refuse.failed);
    expect(state.retries).toBe(fail.failed + refuse.failed);
  });

  it("passes a node's client error (4xx) through without retrying", async () => {
    await registerAll([{ id: "strict", region: "us", mode: "bad", models: ["m-strict"] }]);
    const res = await chat(
      { model: "m-strict", messages: [{ role: "user", content: "too long" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    expect(res.status).toBe(400);
    expect(res.headers.get("x-warmpath-node")).toBe("strict");
    expect(res.headers.get("x-warmpath-attempts")).toBe("1");
    const body = await res.json<{ error: { code: string } }>();
    expect(body.error.code).toBe("context_length");
  });

  it("ends a stream that breaks after the first byte with an SSE error event", async () => {
    await registerAll([{ id: "flaky", region: "ap", mode: "midfail", models: ["m-ap"] }]);
    const res = await chat(
      { model: "m-ap", stream: true, messages: [{ role: "user", content: "go" }] },
      { headers: { "x-warmpath-region": "ap" } },
    );
    expect(res.status).toBe(200);
    const text = (await readChunks(res)).map((c) => c.text).join("");
    expect(text).toContain('"content":"Hello"');
    const last = text.trim().split("\n\n").at(-1)!;
    const event = JSON.parse(last.replace(/^data: /, "")) as { error: { type: string; code: string; message: string } };
    // Its only node failed, and no other node of the region can continue the stream: the error says so.
    expect(event.error.code).toBe("upstream_stream_error");
    expect(event.error.message).toContain("no other node in the region runs an engine that can continue");
    expect(event.error.type).toBe("server_error");
    expect(text).not.toContain("[DONE]");
  });

  it("answers 503 with Retry-After when every node fails", async () => {
    await registerAll([{ id: "down-1", region: "ap", mode: "fail", models: ["m-down"] }]);
    const res = await chat({ model: "m-down", messages: [{ role: "user", content: "nobody home" }] });
    expect(res.status).toBe(503);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const body = await res.json<{ error: { type: string; code: string; message: string } }>();
    expect(body.error.code).toBe("no_capacity");
    expect(body.error.type).toBe("server_error");
    expect(body.error.message).toContain("down-1");
  });

  it("answers 503 with Retry-After when no node serves a catalogued model", async () => {
    const res = await chat({ model: "m-none", messages: [{ role: "user", content: "anyone?" }] });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).not.toBeNull();
    const body = await res.json<{ error: { message: string } }>();
    expect(body.error.message).toContain("no node serving model m-none");
  });
});
