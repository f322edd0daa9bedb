/** The bearer guard: one factory, the same answers for every credential, development credentials fenced. */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import type { AppEnv } from "../../../src/edge/app-types.ts";
import { DEV_API_KEY } from "../../../src/config/dev-credentials.ts";
import type { LoadedConfig } from "../../../src/config/load.ts";
import { ApiError } from "../../../src/http/errors.ts";
import { bearerGuard } from "../../../src/edge/middleware/bearer-guard/index.ts";
import { isLoopbackAddress } from "../../../src/config/dev-credentials.ts";
import { isLocalDevelopment, refusesDevCredential, timingSafeEqual } from "../../../src/edge/middleware/bearer-guard/credentials.ts";

const config = (mode: "development" | "production") => ({ raw: { mode } }) as unknown as LoadedConfig;

/** A tiny app behind one guard that accepts "good" (and, when `tokenless`, no token at all). */
function guarded(mode: "development" | "production", tokenless = false) {
  const app = new Hono<AppEnv>();
  app.use("*", async (c, next) => {
    c.set("config", config(mode));
    await next();
  });
  app.use(
    "*",
    bearerGuard({
      credential: "widget_token",
      label: "widget token",
      verifyToken: (token) => timingSafeEqual(token, "good") || token === DEV_API_KEY,
      tokenless: tokenless ? () => true : undefined,
    }),
  );
  app.get("/", (c) => c.text("in"));
  app.onError((e) => (e instanceof ApiError ? e.toResponse() : new Response("bug", { status: 500 })));
  return (host: string, authorization?: string) => app.request(`http://${host}/`, { headers: authorization ? { authorization } : {} });
}

const code = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

describe("bearerGuard", () => {
  it("admits a verified token, and names the credential when it is missing or wrong", async () => {
    const get = guarded("production");
    expect(await (await get("api.example.com", "Bearer good")).text()).toBe("in");
    const missing = await get("api.example.com");
    expect(missing.status).toBe(401);
    expect(await code(missing)).toBe("missing_widget_token");
    const wrong = await get("api.example.com", "Bearer bad");
    expect(wrong.status).toBe(401);
    expect(await code(wrong)).toBe("invalid_widget_token");
    expect(await code(await get("api.example.com", "Basic Z29vZA=="))).toBe("unsupported_authorization_scheme");
  });

  it("answers Bearer with more than one word as a wrong token, not a missing one", async () => {
    for (const tokenless of [false, true]) {
      const get = guarded("production", tokenless);
      for (const authorization of ["Bearer a b", "Bearer good extra", "bearer\tgood\tgood", "Bearer  good  x  "]) {
        const res = await get("api.example.com", authorization);
        expect(res.status, authorization).toBe(401);
        expect(await code(res), authorization).toBe("invalid_widget_token");
      }
      // Nothing after Bearer: missing, as before.
      for (const authorization of ["Bearer", "Bearer   "])
        expect(await code(await get("api.example.com", authorization))).toBe("missing_widget_token");
    }
    const res = await guarded("production")("api.example.com", "Bearer sk-secret-one sk-secret-two");
    expect(await res.text()).not.toContain("sk-secret");
  });

  it("never echoes the token it refused", async () => {
    const res = await guarded("production")("api.example.com", "Bearer sk-secret-value-123");
    expect(await res.text()).not.toContain("sk-secret-value-123");
  });

  it("refuses a development credential outside a local development server, before verifying it", async () => {
    const prod = guarded("production");
    expect(await code(await prod("localhost", `Bearer ${DEV_API_KEY}`))).toBe("development_credential_refused");
    const dev = guarded("development");
    expect(await code(await dev("warmpath.example.workers.dev", `Bearer ${DEV_API_KEY}`))).toBe("development_credential_refused");
    expect(await (await dev("127.0.0.1:8787", `Bearer ${DEV_API_KEY}`)).text()).toBe("in");
  });

  it("admits a request without a token only where the guard allows it", async () => {
    expect(await (await guarded("production", true)("api.example.com")).text()).toBe("in");
    expect((await guarded("production", false)("api.example.com")).status).toBe(401);
  });
});

describe("development credentials", () => {
  const request = (host: string) => new Request(`http://${host}/v1/models`);

  it("are accepted only in development mode on a loopback host", () => {
    expect(refusesDevCredential(DEV_API_KEY, request("localhost:8787"), config("development"))).toBe(false);
    expect(refusesDevCredential(DEV_API_KEY, request("127.0.0.1:8787"), config("development"))).toBe(false);
    expect(refusesDevCredential(DEV_API_KEY, request("localhost:8787"), config("production"))).toBe(true);
    expect(refusesDevCredential(DEV_API_KEY, request("warmpath.example.workers.dev"), config("development"))).toBe(true);
  });

  it("do not affect other credentials", () => {
    expect(refusesDevCredential("sk-real", request("api.example.com"), config("production"))).toBe(false);
  });
});

describe("what counts as local development", () => {
  const dev = config("development");
  const local = (url: string, headers: Record<string, string> = {}) => isLocalDevelopment(new Request(url, { headers }), dev);

  it("loopback addresses, however a header or URL writes them", () => {
    for (const a of [
      "127.0.0.1",
      "127.1.2.3",
      "::1",
      "[::1]",
      "[::1]:8787",
      "127.0.0.1:8787",
      '"[::1]:4711"',
      "0:0:0:0:0:0:0:1",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      " 127.0.0.1 ",
    ]) {
      expect(isLoopbackAddress(a), a).toBe(true);
    }
    for (const a of [
      "",
      "unknown",
      "_hidden",
      "localhost",
      "10.0.0.1",
      "128.0.0.1",
      "127.0.0.256",
      "127.0.0",
      "::2",
      "::ffff:10.0.0.1",
      "::",
      "1::1::1",
      "127.0.0.1.evil",
      "[::1",
      "fe80::1",
      "0.0.0.0",
      "203.0.113.7",
    ]) {
      expect(isLoopbackAddress(a), a).toBe(false);
    }
  });

  it("a loopback URL host with no header naming a remote client", () => {
    expect(local("http://localhost:8787/admin/state")).toBe(true);
    expect(local("http://127.0.0.1:8787/", { "cf-connecting-ip": "127.0.0.1" })).toBe(true);
    expect(local("http://[::1]:8787/", { "cf-connecting-ip": "::1", "sec-fetch-site": "same-origin" })).toBe(true);
    expect(local("http://localhost/", { forwarded: 'for="[::1]:4711";proto=http', "x-forwarded-for": "127.0.0.1" })).toBe(true);
    expect(local("http://localhost/", { "sec-fetch-site": "none" })).toBe(true);
  });

  it("not when the Host is not loopback, or a header says the client is elsewhere (wrangler dev on 0.0.0.0, a tunnel, a proxy, a page)", () => {
    expect(local("http://192.0.2.2:8787/")).toBe(false);
    expect(local("http://localhost.evil.example/")).toBe(false);
    // What wrangler dev sets for a LAN client that forged only `Host: localhost`.
    expect(local("http://localhost/", { "cf-connecting-ip": "192.0.2.77" })).toBe(false);
    expect(local("http://localhost/", { "x-forwarded-for": "127.0.0.1, 198.51.100.4" })).toBe(false);
    expect(local("http://localhost/", { "x-real-ip": "198.51.100.4" })).toBe(false);
    expect(local("http://localhost/", { "true-client-ip": "198.51.100.4" })).toBe(false);
    expect(local("http://localhost/", { forwarded: "for=198.51.100.4" })).toBe(false);
    expect(local("http://localhost/", { forwarded: "proto=https" })).toBe(false);
    expect(local("http://localhost/", { "sec-fetch-site": "cross-site" })).toBe(false);
    expect(local("http://localhost/", { "sec-fetch-site": "same-site" })).toBe(false);
    expect(isLocalDevelopment(new Request("http://localhost/"), config("production"))).toBe(false);
  });

  it("is not airtight under wrangler dev: a client that forges both Host and CF-Connecting-IP looks local (the socket is the boundary)", () => {
    // Documented in isLocalDevelopment: only listening on loopback keeps such a client out.
    expect(local("http://localhost/", { "cf-connecting-ip": "127.0.0.1" })).toBe(true);
  });
});
