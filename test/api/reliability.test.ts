/**
 * Time and integrity: a node that hangs before or after its first byte, a node that redirects, a
 * stream sent with the wrong Content-Type or followed by a keep-alive. The test configuration's
 * waits are short (first byte 1.5 s at least, 5 s at most; 1 s of silence mid-stream).
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { firstByteTimeoutMs } from "../../src/region/dispatch.ts";
import { ACME_KEY, GLOBEX_KEY, TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { call, chat, readChunks, registerAll } from "../helpers.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
const metrics = async (region: string, id: string) =>
  (await (await call(`/admin/state/${region}`, { headers: admin })).json<RegionSnapshot>()).nodes.find((n) => n.id === id)!.metrics;

describe("first-byte timeout", () => {
  it("follows the estimate for this request on this node, between the floor and the bound, never past the deadline", () => {
    const limits = { first_byte_timeout_ms: 120_000, first_byte_timeout_floor_ms: 10_000 };
    expect(firstByteTimeoutMs(5, limits, Infinity)).toBe(10_000); // a cached prompt: the floor
    expect(firstByteTimeoutMs(8_000, limits, Infinity)).toBe(32_000); // a long cold prefill: 4x its estimate
    expect(firstByteTimeoutMs(60_000, limits, Infinity)).toBe(120_000); // the bound
    expect(firstByteTimeoutMs(8_000, limits, 3_000)).toBe(3_000); // the request's deadline comes first
  });

  it("retries elsewhere when a node hangs before its first byte", async () => {
    await registerAll([
      { id: "hang-a", region: "us", mode: "hangfirst", models: ["m-hang"] },
      { id: "hang-b", region: "us", models: ["m-hang"] },
    ]);
    const hung = { before: (await metrics("us", "hang-a")).failures.timeout };
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      const res = await chat(
        { model: "m-hang", messages: [{ role: "user", content: `question ${i}` }] },
        { headers: { "x-warmpath-region": "us" } },
      );
      expect(res.status).toBe(200);
      expect(res.headers.get("x-warmpath-node")).toBe("hang-b");
      await res.arrayBuffer();
      // At most one wait for the hung node (then it cools down), far below the 5 s bound.
      expect(Date.now() - started).toBeLessThan(4_500);
    }
    await new Promise((r) => setTimeout(r, 50));
    expect((await metrics("us", "hang-a")).failures.timeout).toBeGreaterThan(hung.before);
  });
});

describe("mid-stream silence", () => {
  it("ends a stream whose node goes silent after its first chunk with an error event, and counts it", async () => {
    await registerAll([{ id: "hang-mid", region: "us", mode: "hangmid", models: ["m-mid"] }]);
    const started = Date.now();
    const res = await chat(
      { model: "m-mid", stream: true, messages: [{ role: "user", content: "go" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    expect(res.status).toBe(200);
    const text = (await readChunks(res)).map((c) => c.text).join("");
    expect(Date.now() - started).toBeLessThan(4_000); // the 1 s idle timeout, not the node's 8 s
    const last = JSON.parse(
      text
        .trim()
        .split("\n\n")
        .at(-1)!
        .replace(/^data: /, ""),
    ) as { error: { code: string } };
    expect(last.error.code).toBe("upstream_stream_timeout");
    await new Promise((r) => setTimeout(r, 50));
    expect((await metrics("us", "hang-mid")).streamErrors).toBeGreaterThanOrEqual(1);
  });
});

describe("redirects", () => {
  it("never follows a node's redirect: it is a node failure, retried elsewhere, and its target is never shown", async () => {
    await registerAll([
      { id: "redir-a", region: "us", mode: "redirect", models: ["m-redirect"] },
      { id: "redir-b", region: "us", models: ["m-redirect"] },
    ]);
    // Enough different prompts that placement meets the redirecting node.
    for (let i = 0; i < 8; i++) {
      const res = await chat(
        { model: "m-redirect", messages: [{ role: "user", content: `question ${i} ` + "x".repeat(600) }] },
        { headers: { "x-warmpath-region": "us" } },
      );
      expect(res.status).toBe(200);
      expect(res.headers.get("x-warmpath-node")).toBe("redir-b");
      expect(await res.text()).not.toContain("internal-secret");
    }
    await new Promise((r) => setTimeout(r, 50));
    expect((await metrics("us", "redir-a")).failures.redirect).toBeGreaterThanOrEqual(1);
  });

  it("a region whose only node redirects answers 503 without the redirect's target", async () => {
    await registerAll([{ id: "redir-only", region: "eu", mode: "redirect", models: ["m-eu"] }]);
    const res = await chat({ model: "m-eu", messages: [{ role: "user", content: "q" }] }, { headers: { "x-warmpath-region": "eu" } });
    expect(res.status).toBe(503);
    const body = await res.text();
    expect(body).toContain("redirect");
    expect(body).not.toContain("internal-secret");
  });
});

describe("stream integrity by content", () => {
  it("checks a streamed answer for its end even when the node calls it text/plain: cut after its finish reason, it is ended with [DONE]", async () => {
    await registerAll([{ id: "plain-a", region: "us", mode: "plain", models: ["m-plain"] }]);
    const res = await chat(
      { model: "m-plain", stream: true, messages: [{ role: "user", content: "go" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    const text = (await readChunks(res)).map((c) => c.text).join("");
    expect(text).toContain('"content":"Hello"');
    // The node had sent its finish reason: only the terminator was lost, and the router adds it
    // (src/region/continue.ts, outcome `finished`) rather than fail a complete answer.
    expect(text).not.toContain("upstream_stream_error");
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
  });

  it("passes a keep-alive comment after [DONE] through, as a clean end", async () => {
    await registerAll([{ id: "keep-a", region: "us", mode: "keepalive", models: ["m-keep"] }]);
    const before = await metrics("us", "keep-a");
    const res = await chat(
      { model: "m-keep", stream: true, messages: [{ role: "user", content: "go" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    const text = (await readChunks(res)).map((c) => c.text).join("");
    expect(text.trimEnd().endsWith(": keepalive")).toBe(true);
    expect(text).not.toContain("upstream_stream_error");
    await new Promise((r) => setTimeout(r, 50));
    const after = await metrics("us", "keep-a");
    expect(after.completed - before.completed).toBe(1);
    expect(after.streamErrors).toBe(before.streamErrors);
  });
});

describe("in-flight credits", () => {
  it("are released however a request ends: answered, refused, failed, cut mid-stream, timed out, or abandoned by its client", async () => {
    await registerAll([
      { id: "credit-ok", region: "us", models: ["m-credit"] },
      { id: "credit-bad", region: "us", mode: "bad", models: ["m-credit-bad"] },
      { id: "credit-mid", region: "us", mode: "hangmid", models: ["m-credit-mid"] },
    ]);
    const ask = (model: string, stream = false) =>
      chat({ model, stream, messages: [{ role: "user", content: "credit" }] }, { headers: { "x-warmpath-region": "us" } });
    await (await ask("m-credit")).arrayBuffer(); // answered
    await (await ask("m-credit-bad")).arrayBuffer(); // refused (400)
    await readChunks(await ask("m-credit-mid", true)); // timed out mid-stream (idle timeout)
    // The client goes away after the first chunk.
    const cut = await ask("m-credit", true);
    const reader = cut.body!.getReader();
    await reader.read();
    await reader.cancel();
    // Completions are recorded after each answer ends (waitUntil): wait for them, not for a fixed time.
    const ids = ["credit-ok", "credit-bad", "credit-mid"];
    let state!: RegionSnapshot;
    for (let i = 0; i < 100; i++) {
      state = await (await call("/admin/state/us", { headers: admin })).json<RegionSnapshot>();
      if (state.nodes.filter((n) => ids.includes(n.id)).every((n) => n.load.inflight === 0)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const id of ids) {
      const n = state.nodes.find((x) => x.id === id)!;
      expect(`${id}: ${n.load.inflight} in flight, ${n.load.prefilling} prefilling`).toBe(`${id}: 0 in flight, 0 prefilling`);
    }
    const ok = state.nodes.find((x) => x.id === "credit-ok")!.metrics;
    expect(ok.cancelled).toBe(1);
    expect(ok.completed).toBe(1);
  });
});

describe("a client that goes mid-answer", () => {
  it("lets go of the node at once, though the node sends nothing more: cancelled, not timed out", async () => {
    // The node streams its first chunk, then nothing: only the client's going can end it before the idle wait.
    await registerAll([{ id: "gone-a", region: "us", mode: "hangmid", models: ["m-gone"] }]);
    const before = await metrics("us", "gone-a");
    const res = await chat(
      { model: "m-gone", stream: true, messages: [{ role: "user", content: "go" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    let after = before;
    for (let i = 0; i < 100 && after.cancelled === before.cancelled && after.streamErrors === before.streamErrors; i++) {
      await new Promise((r) => setTimeout(r, 20));
      after = await metrics("us", "gone-a");
    }
    // The edge let go of the region's answer, whose request signal told the relay (src/proxy/relay.ts):
    // without it, the silent node would have been cut by the idle wait, a stream error.
    expect({ cancelled: after.cancelled - before.cancelled, streamErrors: after.streamErrors - before.streamErrors }).toEqual({
      cancelled: 1,
      streamErrors: 0,
    });
  });
});

describe("the region's object restarted", () => {
  it("never cuts a stream in flight (the stream is the worker's), and the next request routes as before", async () => {
    await registerAll([{ id: "evict-a", region: "us", models: ["m-evict"] }]);
    const res = await chat(
      { model: "m-evict", stream: true, messages: [{ role: "user", content: "long answer" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    const reader = res.body!.getReader();
    await reader.read(); // streaming has begun
    // A deploy or an eviction resets the object; the request's session with it breaks, its stream does not.
    const restart = await call("/admin/regions/us/restart", { method: "POST", headers: admin });
    expect(restart.status).toBe(200);
    let text = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toContain("data: [DONE]");
    expect(text).not.toContain("upstream_stream_error");
    // The node table survived in SQLite: the next request is routed without a new report.
    const next = await chat(
      { model: "m-evict", messages: [{ role: "user", content: "after the reset" }] },
      { headers: { "x-warmpath-region": "us" } },
    );
    expect(next.status).toBe(200);
    expect(next.headers.get("x-warmpath-node")).toBe("evict-a");
    expect(next.headers.get("x-warmpath-decision")).not.toBe("stateless");
  });
});

describe("fair share between tenants", () => {
  it("answers 429 with Retry-After to a tenant over its share of a contended region, and never refuses a light tenant for its share", async () => {
    // One node that takes long to start answering: whatever is sent stays queued in the load model.
    await registerAll([{ id: "fair-a", region: "us", mode: "hangfirst", models: ["m-fair"] }]);
    const big = "x".repeat(100_000); // ~25,000 tokens: ~2.5 s of modelled prefill, past the 2 s fair-share wait
    const send = (key: string, content: string) =>
      chat({ model: "m-fair", messages: [{ role: "user", content }] }, { key, headers: { "x-warmpath-region": "us" } });
    // Each request is placed before the next is sent (wait for the region to count it, not for a fixed time).
    const placed = async (n: number) => {
      for (let i = 0; i < 200; i++) {
        const state = await (await call("/admin/state/us", { headers: admin })).json<RegionSnapshot>();
        if (state.nodes.find((x) => x.id === "fair-a")!.load.inflight >= n) return;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error(`fair-a never had ${n} requests in flight`);
    };
    const flood1 = send(ACME_KEY, "flood 1 " + big);
    await placed(1);
    // The light tenant is active, and not over its share: but behind the flood's 2.5 s its 1 s
    // objective cannot be met, so it is shed at once (docs/ADMISSION.md), not refused for its share.
    const light = await send(GLOBEX_KEY, "light");
    expect(light.status).toBe(429);
    expect((await light.json<{ error: { code: string } }>()).error.code).toBe("objective_unreachable");
    const flood2 = await send(ACME_KEY, "flood 2 " + big);
    expect(flood2.status).toBe(429);
    expect(Number(flood2.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const body = await flood2.json<{ error: { code: string; type: string; message: string } }>();
    expect(body.error).toMatchObject({ code: "tenant_over_share", type: "rate_limit_error" });
    expect(body.error.message).not.toContain("node.test");
    const first = await flood1;
    expect(first.status).not.toBe(429);
    await first.arrayBuffer();
  }, 30_000);
});
