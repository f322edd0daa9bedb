/** Every bad input gets its status and an OpenAI-shaped error naming what is wrong. */
import { describe, expect, it } from "vitest";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { ACME_KEY } from "../fixtures/config.ts";
import { call, chat, registerAll } from "../helpers.ts";

interface ErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}

async function expectError(res: Response, status: number, code: string, type: string): Promise<ErrorBody["error"]> {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toContain("application/json");
  expect(res.headers.get("x-request-id")).toBeTruthy();
  const body = await res.json<ErrorBody>();
  expect(Object.keys(body)).toEqual(["error"]);
  expect(body.error.code).toBe(code);
  expect(body.error.type).toBe(type);
  expect(typeof body.error.message).toBe("string");
  return body.error;
}

describe("client errors", () => {
  it("401 without an API key", async () => {
    const res = await call("/v1/chat/completions", { method: "POST", body: "{}", headers: { "content-type": "application/json" } });
    await expectError(res, 401, "missing_api_key", "authentication_error");
  });

  it("401 with a wrong API key, without echoing it", async () => {
    const res = await chat({ model: "m-eu", messages: [{ role: "user", content: "hi" }] }, { key: "sk-wrong-secret-123" });
    const error = await expectError(res, 401, "invalid_api_key", "authentication_error");
    expect(error.message).not.toContain("sk-wrong-secret-123");
  });

  it("401 for a development key on a non-loopback host", async () => {
    const res = await (
      await import("cloudflare:workers")
    ).exports.default.fetch(new Request("https://router.example.com/v1/models", { headers: { authorization: `Bearer ${DEV_API_KEY}` } }));
    await expectError(res, 401, "development_credential_refused", "authentication_error");
  });

  it("400 for malformed JSON", async () => {
    const error = await expectError(await chat('{"model": "m-eu", "messages": ['), 400, "invalid_json", "invalid_request_error");
    expect(error.message).toMatch(/not valid JSON/);
  });

  it("400 for a JSON body that is not an object", async () => {
    await expectError(await chat("[1,2,3]"), 400, "invalid_request", "invalid_request_error");
  });

  it("400 naming the missing model field", async () => {
    const error = await expectError(
      await chat({ messages: [{ role: "user", content: "hi" }] }),
      400,
      "invalid_request",
      "invalid_request_error",
    );
    expect(error.param).toBe("model");
    expect(error.message).toContain("model");
  });

  it("400 naming a bad message role", async () => {
    const error = await expectError(
      await chat({
        model: "m-eu",
        messages: [
          { role: "user", content: "a" },
          { role: "robot", content: "b" },
        ],
      }),
      400,
      "invalid_request",
      "invalid_request_error",
    );
    expect(error.param).toBe("messages.1.role");
  });

  it("400 for empty messages", async () => {
    const error = await expectError(await chat({ model: "m-eu", messages: [] }), 400, "invalid_request", "invalid_request_error");
    expect(error.param).toBe("messages");
  });

  it("400 for a completion without a usable prompt", async () => {
    const res = await call("/v1/completions", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}` },
      body: JSON.stringify({ model: "m-eu", prompt: { not: "a prompt" } }),
    });
    const error = await expectError(res, 400, "invalid_request", "invalid_request_error");
    expect(error.param).toBe("prompt");
  });

  it("404 for an unknown model", async () => {
    const error = await expectError(
      await chat({ model: "gpt-nope", messages: [{ role: "user", content: "hi" }] }),
      404,
      "model_not_found",
      "invalid_request_error",
    );
    expect(error.message).toContain("gpt-nope");
  });

  it("413 for a body over the limit (declared length)", async () => {
    const big = JSON.stringify({ model: "m-eu", messages: [{ role: "user", content: "x".repeat(300_000) }] });
    await expectError(await chat(big), 413, "request_too_large", "invalid_request_error");
  });

  it("413 for a streamed body over the limit (no length declared)", async () => {
    const chunk = new TextEncoder().encode("x".repeat(65_536));
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 8) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const res = await call("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}` },
      body,
    });
    await expectError(res, 413, "request_too_large", "invalid_request_error");
  });

  it("415 for a non-JSON content type", async () => {
    const res = await call("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "text/plain", authorization: `Bearer ${ACME_KEY}` },
      body: "hi",
    });
    await expectError(res, 415, "unsupported_media_type", "invalid_request_error");
  });

  it("403 for a cache namespace the tenant may not use", async () => {
    const res = await chat(
      { model: "m-eu", messages: [{ role: "user", content: "hi" }] },
      { headers: { "x-warmpath-namespace": "someone-else" } },
    );
    await expectError(res, 403, "namespace_not_allowed", "permission_error");
  });

  it("400 for an unknown pinned region, and for a region that does not serve the model", async () => {
    const unknown = await chat(
      { model: "m-eu", messages: [{ role: "user", content: "hi" }] },
      { headers: { "x-warmpath-region": "mars" } },
    );
    expect((await expectError(unknown, 400, "unknown_region", "invalid_request_error")).param).toBe("x-warmpath-region");
    const wrong = await chat({ model: "m-eu", messages: [{ role: "user", content: "hi" }] }, { headers: { "x-warmpath-region": "us" } });
    await expectError(wrong, 400, "model_not_in_region", "invalid_request_error");
  });

  it("404 in OpenAI's shape for an unknown route", async () => {
    await expectError(await call("/v2/everything"), 404, "route_not_found", "not_found_error");
  });

  it("does not lose the request id the client sent", async () => {
    await registerAll([{ id: "e1", region: "eu", models: ["m-eu"] }]);
    const res = await chat({ model: "m-eu", messages: [{ role: "user", content: "hi" }] }, { headers: { "x-request-id": "client-id-42" } });
    expect(res.headers.get("x-request-id")).toBe("client-id-42");
    await res.arrayBuffer();
  });
});
