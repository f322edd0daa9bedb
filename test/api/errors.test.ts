/** Every bad input gets its status and an OpenAI-shaped error naming what is wrong. */
import { describe, expect, it } from "vitest";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { MAX_HEADER_BYTES, MAX_HEADER_VALUE_BYTES, MAX_URL_BYTES } from "../../src/edge/middleware/request-bounds.ts";
import { ACME_KEY, EUONLY_KEY, TEST_ADMIN_TOKEN, TEST_NODE_TOKEN } from "../fixtures/config.ts";
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

  it("401 unsupported_authorization_scheme for a key sent with Basic (not taken for a missing one)", async () => {
    const res = await call("/v1/chat/completions", {
      method: "POST",
      body: "{}",
      headers: { "content-type": "application/json", authorization: `Basic ${btoa("user:sk-basic-secret")}` },
    });
    const err = await expectError(res, 401, "unsupported_authorization_scheme", "authentication_error");
    expect(err.message).toContain("Bearer");
  });

  it("401 invalid_api_key, not missing_api_key, for a Bearer header with more than one word, never echoing it", async () => {
    for (const authorization of [
      "Bearer a b",
      `Bearer ${ACME_KEY} sk-SECRET-extra`,
      "Bearer\tsk-SECRET-one\tsk-SECRET-two",
      "bearer  x  y ",
    ]) {
      const res = await call("/v1/models", { headers: { authorization } });
      const error = await expectError(res, 401, "invalid_api_key", "authentication_error");
      expect(error.param).toBeNull();
      expect(JSON.stringify(error)).not.toContain("SECRET");
    }
    // No word after Bearer is still a key missing.
    await expectError(
      await call("/v1/models", { headers: { authorization: "Bearer   " } }),
      401,
      "missing_api_key",
      "authentication_error",
    );
  });

  it("405 with Allow for another method on an API route", async () => {
    const res = await call("/v1/chat/completions", { headers: { authorization: `Bearer ${ACME_KEY}` } });
    expect(res.headers.get("allow")).toBe("POST");
    await expectError(res, 405, "method_not_allowed", "invalid_request_error");
    const models = await call("/v1/models", { method: "DELETE", headers: { authorization: `Bearer ${ACME_KEY}` } });
    expect(models.headers.get("allow")).toBe("GET");
    await expectError(models, 405, "method_not_allowed", "invalid_request_error");
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

  it("401 for a development key, and no token-free admin API, when a header names a client that is not on loopback", async () => {
    for (const forwarded of [
      { "cf-connecting-ip": "203.0.113.9" } as Record<string, string>,
      { "x-forwarded-for": "127.0.0.1, 203.0.113.9" },
      { forwarded: 'for="[2001:db8::1]:4711"' },
      { "x-real-ip": "unknown" },
      { "sec-fetch-site": "cross-site" },
    ]) {
      const res = await call("/v1/models", { headers: { authorization: `Bearer ${DEV_API_KEY}`, ...forwarded } });
      await expectError(res, 401, "development_credential_refused", "authentication_error");
      await expectError(await call("/admin/state", { headers: forwarded }), 401, "missing_admin_token", "authentication_error");
    }
    // Loopback peers, as wrangler dev sets CF-Connecting-IP for a local client: still local.
    expect((await call("/admin/state", { headers: { "cf-connecting-ip": "127.0.0.1" } })).status).toBe(200);
    expect((await call("/admin/state", { headers: { "cf-connecting-ip": "::1", "sec-fetch-site": "same-origin" } })).status).toBe(200);
  });

  it("401 for an Authorization header the guard cannot read, even where no token is needed", async () => {
    for (const authorization of ["Bearer", "Bearer ", "bearer"]) {
      await expectError(await call("/admin/state", { headers: { authorization } }), 401, "missing_admin_token", "authentication_error");
    }
    // Bearer and more than one word: a token was sent, and it is not one.
    await expectError(
      await call("/admin/state", { headers: { authorization: "Bearer a b" } }),
      401,
      "invalid_admin_token",
      "authentication_error",
    );
    // Another scheme is named as such.
    const basic = await call("/admin/state", { headers: { authorization: "Basic YWRtaW46YWRtaW4=" } });
    await expectError(basic, 401, "unsupported_authorization_scheme", "authentication_error");
  });

  it("400 for malformed JSON", async () => {
    const error = await expectError(await chat('{"model": "m-eu", "messages": ['), 400, "invalid_json", "invalid_request_error");
    expect(error.message).toMatch(/not valid JSON/);
  });

  it("400 for malformed JSON says where, never what", async () => {
    // V8's own message quotes the text around the error ("Unexpected token 'S', "SECRET_TEXT"... is not valid JSON").
    const body = '{"model": "m-eu", "messages": [{"role": "user", "content": "SECRET_TEXT"}] SECRET_TAIL}';
    const error = await expectError(await chat(body), 400, "invalid_json", "invalid_request_error");
    const at = body.indexOf("SECRET_TAIL");
    expect(error.message).toBe(`Request body is not valid JSON: expected ',' or '}' at position ${at} (line 1, column ${at + 1})`);
    const bad = await expectError(await chat("SECRET_START and more"), 400, "invalid_json", "invalid_request_error");
    expect(bad.message).not.toContain("SECRET");
    expect(bad.message).toContain("position 0");
  });

  it("400 for a body that is not UTF-8, naming the byte", async () => {
    const bytes = new Uint8Array([...new TextEncoder().encode('{"model":"'), 0xff, ...new TextEncoder().encode('"}')]);
    const res = await call("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}` },
      body: bytes,
    });
    expect((await expectError(res, 400, "invalid_json", "invalid_request_error")).message).toBe(
      "Request body is not valid UTF-8 (at byte 10)",
    );
  });

  it("400 nesting_too_deep for a body nested past the bound, wherever the nesting is (no stack overflow, no 500)", async () => {
    // The attack: ~2,800 levels in a 5.7 KB body overflowed the stack while canonicalising.
    const deep = "[".repeat(2_800) + "]".repeat(2_800);
    const bodies = [
      `{"model":"m-eu","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":${deep}}]}`,
      `{"model":"m-eu","messages":[{"role":"user","content":[{"type":"image_url","image_url":${deep}}]}]}`,
      `{"model":"m-eu","messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"arguments":${deep}}}]}]}`,
      `{"model":"m-eu","messages":[{"role":"user","content":"x"}],"unrelated":${deep}}`,
    ];
    for (const body of bodies) {
      const error = await expectError(await chat(body), 400, "nesting_too_deep", "invalid_request_error");
      expect(error.message).toContain("64");
    }
    const responses = await call("/v1/responses", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}` },
      body: `{"model":"m-eu","input":[{"type":"reasoning","x":${deep}}]}`,
    });
    await expectError(responses, 400, "nesting_too_deep", "invalid_request_error");
    const messages = await call("/v1/messages", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": ACME_KEY },
      body: `{"model":"m-eu","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":${deep}}]}]}`,
    });
    await expectError(messages, 400, "nesting_too_deep", "invalid_request_error");
  });

  it("a body at the depth bound is not refused for its depth", async () => {
    // Level 1 is the body, 2 the messages array, 3 a message, 4 its content array, 5 a part; 59 more inside.
    const inner = "[".repeat(59) + "]".repeat(59);
    const body = `{"model":"gpt-nope","messages":[{"role":"user","content":[{"type":"x","v":${inner}}]}]}`;
    await expectError(await chat(body), 404, "model_not_found", "invalid_request_error");
    const over = `{"model":"gpt-nope","messages":[{"role":"user","content":[{"type":"x","v":[${inner}]}]}]}`;
    await expectError(await chat(over), 400, "nesting_too_deep", "invalid_request_error");
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

  it("no 500 for a Responses input item whose type cannot be turned into text", async () => {
    await registerAll([{ id: "e1", region: "eu", models: ["m-eu"] }]);
    const responses = (body: string) =>
      call("/v1/responses", { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}` }, body });
    // `String()` of these throws (`toString` and `valueOf` are not functions): it did, before the model was checked.
    for (const type of ['{"toString":1}', '[{"toString":1}]', '{"toString":"x","valueOf":[]}', '[[{"toString":[]}]]']) {
      const unknown = await expectError(
        await responses(`{"model":"gpt-nope","input":[{"type":${type}}]}`),
        404,
        "model_not_found",
        "invalid_request_error",
      );
      expect(unknown.param).toBe("model");
      const served = await responses(`{"model":"m-eu","input":[{"type":${type}}]}`);
      expect(served.status, type).toBe(200);
      await served.arrayBuffer();
    }
  });

  it("404 model_not_found, not a 503 to retry, for a model served only in regions the tenant may not use", async () => {
    // `euonly` may use region eu alone; m-us is served in us alone.
    const restricted = await chat({ model: "m-us", messages: [{ role: "user", content: "hi" }] }, { key: EUONLY_KEY });
    expect(restricted.headers.get("retry-after")).toBeNull();
    const error = await expectError(restricted, 404, "model_not_found", "invalid_request_error");
    expect(error.param).toBe("model");
    // The answer to a model no region serves, word for word: it does not say the model exists elsewhere.
    const unknown = await expectError(
      await chat({ model: "gpt-nope", messages: [{ role: "user", content: "hi" }] }, { key: EUONLY_KEY }),
      404,
      "model_not_found",
      "invalid_request_error",
    );
    expect(error).toEqual(unknown);
    const messages = await call("/v1/messages", {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": EUONLY_KEY },
      body: JSON.stringify({ model: "m-us", max_tokens: 5, messages: [{ role: "user", content: "hi" }] }),
    });
    await expectError(messages, 404, "model_not_found", "invalid_request_error");
    // Its models list and retrieve agree: m-us is not there for this key.
    await expectError(
      await call("/v1/models/m-us", { headers: { authorization: `Bearer ${EUONLY_KEY}` } }),
      404,
      "model_not_found",
      "invalid_request_error",
    );
  });

  it("400 for an unknown /admin/usage parameter, with a fixed message that never repeats the name", async () => {
    const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    const key = "SECRET" + "k".repeat(294);
    const long = await call(`/admin/usage?${key}=1`, { headers: admin });
    const body = await long.clone().text();
    const error = await expectError(long, 400, "invalid_usage_query", "invalid_request_error");
    expect(body).not.toContain("SECRET");
    expect(error.param).toBeNull();
    expect(error.message).toBe("Unknown query parameter: use tenant, from, to, format");
    for (const name of [`<script>SECRET`, "SECRET%0d%0aX: y", "9SECRET", "SECRET" + "x".repeat(30)]) {
      const res = await call(`/admin/usage?${name}=1`, { headers: admin });
      const text = await res.clone().text();
      expect((await expectError(res, 400, "invalid_usage_query", "invalid_request_error")).param, name).toBeNull();
      expect(text, name).not.toContain("SECRET");
    }
    // A short, plain name (a typo) is named in `param`, never in the message.
    const typo = await expectError(
      await call("/admin/usage?tenat=x", { headers: admin }),
      400,
      "invalid_usage_query",
      "invalid_request_error",
    );
    expect(typo.param).toBe("tenat");
    expect(typo.message).not.toContain("tenat");
  });

  it("404 for an unknown model, naming the field, not repeating its value", async () => {
    const error = await expectError(
      await chat({ model: "gpt-nope", messages: [{ role: "user", content: "hi" }] }),
      404,
      "model_not_found",
      "invalid_request_error",
    );
    expect(error.param).toBe("model");
    expect(error.message).not.toContain("gpt-nope");
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

  it("415 for a media type that merely contains application/json, on the client and node APIs, without repeating it", async () => {
    const body = JSON.stringify({ model: "gpt-nope", messages: [{ role: "user", content: "hi" }] });
    for (const type of [
      "application/jsonx",
      "text/plain; application/json",
      "application/json-seq",
      "application/json, text/plain",
      "application/json; charset=latin1",
    ]) {
      const res = await call("/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": type, authorization: `Bearer ${ACME_KEY}` },
        body,
      });
      const error = await expectError(res, 415, "unsupported_media_type", "invalid_request_error");
      expect(error.message).not.toContain(type);
      const report = await call("/v1/nodes/report", {
        method: "POST",
        headers: { "content-type": type, authorization: `Bearer ${TEST_NODE_TOKEN}` },
        body: "{}",
      });
      await expectError(report, 415, "unsupported_media_type", "invalid_request_error");
    }
    for (const type of ["application/json", "Application/JSON", "application/json; charset=utf-8", 'application/json;charset="UTF-8"']) {
      const res = await call("/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": type, authorization: `Bearer ${ACME_KEY}` },
        body,
      });
      await expectError(res, 404, "model_not_found", "invalid_request_error");
    }
  });

  it("431 for a header value or all headers over their bound, 414 for a URL over its bound", async () => {
    const headers = (extra: Record<string, string>) => ({ authorization: `Bearer ${ACME_KEY}`, ...extra });
    const one = await call("/v1/models", { headers: headers({ "x-session-id": "s".repeat(MAX_HEADER_VALUE_BYTES + 1) }) });
    const error = await expectError(one, 431, "request_headers_too_large", "invalid_request_error");
    expect(error.param).toBe("x-session-id");
    expect(error.message).toContain(String(MAX_HEADER_VALUE_BYTES));
    const many: Record<string, string> = {};
    for (let i = 0; i < 8; i++) many[`x-filler-${i}`] = "f".repeat(MAX_HEADER_BYTES / 8);
    const total = await expectError(
      await call("/v1/models", { headers: headers(many) }),
      431,
      "request_headers_too_large",
      "invalid_request_error",
    );
    expect(total.param).toBeNull();
    const unknownName = await expectError(
      await call("/v1/models", { headers: headers({ "x-secret-name": "v".repeat(MAX_HEADER_VALUE_BYTES + 1) }) }),
      431,
      "request_headers_too_large",
      "invalid_request_error",
    );
    expect(unknownName.message).not.toContain("x-secret-name");
    await expectError(
      await call(`/v1/models/${"m".repeat(MAX_URL_BYTES)}`, { headers: headers({}) }),
      414,
      "uri_too_long",
      "invalid_request_error",
    );
    expect((await call("/v1/models", { headers: headers({ "x-session-id": "s".repeat(MAX_HEADER_VALUE_BYTES) }) })).status).toBe(200);
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
