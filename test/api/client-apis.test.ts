/**
 * The API surface real clients use beyond chat completions: `GET /v1/models/{id}` (the OpenAI SDK's
 * `models.retrieve`), the Responses API with `previous_response_id` sent to the node that stores
 * the response (its tenant's only: another tenant's, or an unknown id, is 400
 * `previous_response_not_found` and never reaches a node), Anthropic's Messages API (`x-api-key`), CORS for allowed browser origins, and
 * multi-model nodes (LoRA adapters are models: only nodes serving one are considered, and no two
 * models share index entries).
 */
import { describe, expect, it } from "vitest";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { ACME_KEY, EUONLY_KEY, GLOBEX_KEY, TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { call, CF_VIRGINIA, nodeUrl, readChunks, registerAll } from "../helpers.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  return call(path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}`, "x-warmpath-region": "us", ...headers },
    body: JSON.stringify(body),
    cf: CF_VIRGINIA,
  });
}

const nodeState = async (id: string) => {
  const state = await (await call("/admin/state/us", { headers: admin })).json<RegionSnapshot>();
  return state.nodes.find((n) => n.id === id)!;
};

describe("GET /v1/models/{id}", () => {
  it("answers a served model, slashes in its id included, and 404 in OpenAI's shape otherwise", async () => {
    const auth = { headers: { authorization: `Bearer ${ACME_KEY}` } };
    const found = await call("/v1/models/org/base-7b", auth);
    expect(found.status).toBe(200);
    expect(await found.json()).toMatchObject({ id: "org/base-7b", object: "model", regions: ["us"] });
    const missing = await call("/v1/models/nope", auth);
    expect(missing.status).toBe(404);
    // One type wherever the model is unknown (the inference endpoints answer the same).
    expect(await missing.json()).toMatchObject({ error: { code: "model_not_found", type: "invalid_request_error" } });
    expect((await call("/v1/models/org/base-7b")).status).toBe(401);
  });
});

describe("GET /v1/models for a tenant restricted to some regions", () => {
  it("lists and retrieves only the models it may use, with only its regions", async () => {
    const auth = { headers: { authorization: `Bearer ${EUONLY_KEY}` } };
    const list = await (await call("/v1/models", auth)).json<{ data: { id: string; regions: string[] }[] }>();
    const ids = list.data.map((m) => m.id);
    expect(ids).toContain("m-eu");
    expect(ids).not.toContain("m-us");
    expect(ids).not.toContain("m-ap");
    expect(list.data.every((m) => m.regions.length === 1 && m.regions[0] === "eu")).toBe(true);
    // Served in eu and us: listed, with eu alone.
    expect(list.data.find((m) => m.id === "m-shared")!.regions).toEqual(["eu"]);
    expect(await (await call("/v1/models/m-shared", auth)).json()).toMatchObject({ id: "m-shared", regions: ["eu"] });
    // Served in us alone: not found for this key, as an unknown model (the inference endpoints answer the same).
    const closed = await call("/v1/models/m-us", auth);
    expect(closed.status).toBe(404);
    const unknown = await call("/v1/models/nope", auth);
    expect(await closed.json()).toEqual(await unknown.json());
    // A tenant without a region list still sees both.
    const all = await call("/v1/models/m-shared", { headers: { authorization: `Bearer ${ACME_KEY}` } });
    expect(await all.json()).toMatchObject({ regions: ["eu", "us"] });
  });
});

describe("POST /v1/responses", () => {
  it("sends a follow-up (previous_response_id) to the node that stores the response, whatever its prompt", async () => {
    await registerAll(["resp-a", "resp-b", "resp-c"].map((id) => ({ id, region: "us", models: ["m-api"] })));
    for (let i = 0; i < 6; i++) {
      const first = await post("/v1/responses", { model: "m-api", input: `Conversation ${i}: ` + "context ".repeat(300) });
      expect(first.status).toBe(200);
      const { id } = await first.json<{ id: string }>();
      const holder = first.headers.get("x-warmpath-node");
      await new Promise((r) => setTimeout(r, 20)); // the region learns the id with the first byte (waitUntil)
      // Nothing in common with the first prompt: only the stored response ties it to its node.
      const next = await post("/v1/responses", { model: "m-api", input: `An unrelated question ${i}`, previous_response_id: id });
      expect(next.status).toBe(200);
      expect(next.headers.get("x-warmpath-node")).toBe(holder);
      expect(next.headers.get("x-warmpath-decision")).toBe("pinned");
    }
  });

  it("answers another tenant's response id as OpenAI answers an unknown one, 4 times of 4, and never sends it to a node", async () => {
    const nodes = ["resp-a", "resp-b", "resp-c"].map((id) => ({ id, region: "us", models: ["m-api"] }));
    await registerAll(nodes);
    const seenBy = async (requestId: string) =>
      (await Promise.all(nodes.map(async (n) => await (await fetch(`${nodeUrl(n)}/_traces`)).json<Array<{ request_id: string }>>())))
        .flat()
        .filter((r) => r.request_id === requestId).length;
    // In a cache namespace both tenants share: the same prompt has the same blocks for both.
    const shared = { "x-warmpath-namespace": "commons" };
    const prompt = "a shared conversation " + "context ".repeat(300);
    const first = await post("/v1/responses", { model: "m-api", input: prompt }, shared);
    expect(first.status).toBe(200);
    const { id } = await first.json<{ id: string }>();
    const holder = first.headers.get("x-warmpath-node");
    await new Promise((r) => setTimeout(r, 20)); // the region learns the id with the first byte (waitUntil)
    for (let i = 0; i < 4; i++) {
      // The same prompt as the owner's: affinity alone sent it to the node storing the response, which continued it.
      const other = await post(
        "/v1/responses",
        { model: "m-api", input: prompt, previous_response_id: id, stream: i % 2 === 1 },
        { ...shared, authorization: `Bearer ${GLOBEX_KEY}` },
      );
      expect(other.status).toBe(400);
      expect(other.headers.get("x-warmpath-node")).toBeNull();
      expect(await other.json()).toEqual({
        error: {
          message: `Previous response with id '${id}' not found.`,
          type: "invalid_request_error",
          param: "previous_response_id",
          code: "previous_response_not_found",
        },
      });
      expect(await seenBy(other.headers.get("x-request-id")!)).toBe(0);
    }
    // An id no tenant stored through the router is not sent to a node either.
    const unknown = await post("/v1/responses", { model: "m-api", input: "x", previous_response_id: "resp_never_stored" });
    expect(unknown.status).toBe(400);
    expect((await unknown.json<{ error: { code: string } }>()).error.code).toBe("previous_response_not_found");
    expect(await seenBy(unknown.headers.get("x-request-id")!)).toBe(0);
    // Its owner still continues it, on the node that stores it.
    const mine = await post("/v1/responses", { model: "m-api", input: "and then?", previous_response_id: id });
    expect(mine.status).toBe(200);
    expect(mine.headers.get("x-warmpath-node")).toBe(holder);
    expect(mine.headers.get("x-warmpath-decision")).toBe("pinned");
    await mine.arrayBuffer();
  });

  it("streams a Responses API answer to its end (no [DONE] in this API) and records its usage", async () => {
    await registerAll([{ id: "resp-s", region: "us", models: ["m-api"] }]);
    const before = (await nodeState("resp-s")).metrics;
    const res = await post("/v1/responses", {
      model: "m-api",
      stream: true,
      instructions: "Be brief.",
      input: [{ role: "user", content: "hi" }],
    });
    expect(res.status).toBe(200);
    const text = (await readChunks(res)).map((c) => c.text).join("");
    expect(text).toContain("event: response.completed");
    expect(text).not.toContain("upstream_stream_error");
    await new Promise((r) => setTimeout(r, 50));
    const after = (await nodeState("resp-s")).metrics;
    expect(after.completed - before.completed).toBe(1);
    expect(after.streamErrors).toBe(before.streamErrors);
    expect(after.measuredRequests - before.measuredRequests).toBe(1);
  });

  it("validates the body: input is required, in OpenAI's error shape", async () => {
    const res = await post("/v1/responses", { model: "m-api" });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: "invalid_request", param: "input" } });
  });
});

describe("POST /v1/messages (Anthropic)", () => {
  it("takes the key in x-api-key, routes by prefix, and reads cached tokens from cache_read_input_tokens", async () => {
    await registerAll([
      { id: "anth-a", region: "us", models: ["m-api"] },
      { id: "anth-b", region: "us", models: ["m-api"] },
    ]);
    const system = "You are a contracts assistant. " + "Clause. ".repeat(400);
    const ask = (q: string) =>
      post(
        "/v1/messages",
        { model: "m-api", max_tokens: 16, system, messages: [{ role: "user", content: q }] },
        { authorization: "", "x-api-key": ACME_KEY, "anthropic-version": "2023-06-01" },
      );
    const first = await ask("first question");
    expect(first.status).toBe(200);
    const second = await ask("second question");
    expect(second.headers.get("x-warmpath-node")).toBe(first.headers.get("x-warmpath-node"));
    expect(second.headers.get("x-warmpath-decision")).toBe("prefix-hit");
    await new Promise((r) => setTimeout(r, 50));
    const m = (await nodeState(first.headers.get("x-warmpath-node")!)).metrics;
    expect(m.measuredRequests).toBeGreaterThanOrEqual(2);
    // input_tokens + cache_read_input_tokens is the prompt; the fake node reads half of it from cache.
    expect(m.measuredCachedTokens / m.measuredPromptTokens).toBeCloseTo(0.5, 1);
  });

  it("needs max_tokens, as Anthropic's API does", async () => {
    const res = await post("/v1/messages", { model: "m-api", messages: [{ role: "user", content: "hi" }] });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { param: "max_tokens" } });
  });
});

describe("CORS", () => {
  it("answers a preflight from an allowed origin without credentials, and nothing for other origins", async () => {
    const preflight = (origin: string) =>
      call("/v1/chat/completions", {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" },
      });
    const allowed = await preflight("https://app.example.com");
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://app.example.com");
    expect(allowed.headers.get("access-control-allow-headers")).toContain("authorization");
    // A browser may continue its own trace (W3C Trace Context).
    expect(allowed.headers.get("access-control-allow-headers")).toContain("traceparent");
    expect(allowed.headers.get("access-control-allow-headers")).toContain("tracestate");
    const other = await preflight("https://evil.example.net");
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    // The node and admin APIs are not for browsers.
    const nodes = await call("/v1/nodes/report", { method: "OPTIONS", headers: { origin: "https://app.example.com" } });
    expect(nodes.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("exposes warmpath's explanation headers to an allowed origin's scripts", async () => {
    await registerAll([{ id: "cors-a", region: "us", models: ["m-api"] }]);
    const res = await post(
      "/v1/chat/completions",
      { model: "m-api", messages: [{ role: "user", content: "hi" }] },
      { origin: "https://app.example.com" },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe("https://app.example.com");
    expect(res.headers.get("access-control-expose-headers")).toContain("x-warmpath-decision");
    expect(res.headers.get("access-control-expose-headers")).toContain("x-warmpath-trace-id");
    expect(res.headers.get("x-warmpath-trace-id")).toMatch(/^[0-9a-f]{32}$/);
  });
});

describe("multi-model nodes and LoRA adapters", () => {
  it("considers only nodes serving the model, and never shares index entries between models", async () => {
    await registerAll([
      { id: "lora-a", region: "us", models: ["org/base-7b", "sql-lora"] },
      { id: "lora-b", region: "us", models: ["org/base-7b"] },
    ]);
    const prompt = "Translate to SQL: " + "the customers who ordered twice ".repeat(60);
    const chat = (model: string) => post("/v1/chat/completions", { model, messages: [{ role: "user", content: prompt }] });
    for (let i = 0; i < 3; i++) {
      const adapter = await chat("sql-lora");
      expect(adapter.status).toBe(200);
      expect(adapter.headers.get("x-warmpath-node")).toBe("lora-a");
    }
    // The same prompt on the base model: the adapter's cached prefix is not the base model's.
    const base = await chat("org/base-7b");
    expect(base.status).toBe(200);
    expect(base.headers.get("x-warmpath-prefix-match")).toMatch(/^0\//);
    expect(base.headers.get("x-warmpath-decision")).toBe("cold-spread");
  });
});
