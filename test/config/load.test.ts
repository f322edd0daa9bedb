/** Configuration: validated at the boundary, loud and specific when wrong, never half-read. */
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/app.ts";
import { guardDevCredential } from "../../src/auth/bearer.ts";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { ConfigError, loadConfig, type LoadedConfig } from "../../src/config/load.ts";
import { ApiError } from "../../src/http/errors.ts";
import { TEST_CONFIG } from "../fixtures/config.ts";
import type { Env } from "../../src/env.ts";

const secrets = { NODE_TOKEN_TEST: "t", ADMIN_TOKEN_TEST: "a" };
const envWith = (config: unknown, extra: Record<string, unknown> = secrets) => ({ WARMPATH_CONFIG: config, ...extra }) as unknown as Env;
const clone = () => JSON.parse(JSON.stringify(TEST_CONFIG)) as typeof TEST_CONFIG & Record<string, unknown>;

function configError(env: Env): string {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error("expected a ConfigError");
}

describe("loadConfig", () => {
  it("accepts the document as a TOML table (object) or as a JSON string, with defaults filled in", () => {
    const a = loadConfig(envWith(clone()));
    const b = loadConfig(envWith(JSON.stringify(clone())));
    expect(a.regions.map((r) => r.config.name)).toEqual(b.regions.map((r) => r.config.name));
    expect(a.prefix).toEqual({ blockChars: 512, maxBlocks: 512, charsPerToken: 4 });
    expect(a.raw.limits.first_byte_timeout_ms).toBe(120_000);
    expect(a.regions[0]!.init.settings.policy.name).toBe("warmpath");
    expect(a.regions[3]!.init.settings.policy.name).toBe("round-robin");
  });

  it("names the bad field", () => {
    const bad = clone();
    (bad.regions[1] as Record<string, unknown>).location = { lat: 123, lon: 0 };
    expect(configError(envWith(bad))).toContain("regions.1.location.lat");
    const badPolicy = clone();
    (badPolicy.regions[0] as Record<string, unknown>).policy = { name: "fastest" };
    expect(configError(envWith(badPolicy))).toContain("regions.0.policy.name");
    const badKey = clone();
    badKey.tenants[0]!.api_key_sha256 = ["not-a-hash"];
    expect(configError(envWith(badKey))).toContain("tenants.0.api_key_sha256.0");
  });

  it("rejects duplicates and missing secrets by name", () => {
    const dup = clone();
    dup.regions[1]!.name = "eu";
    expect(configError(envWith(dup))).toContain("regions.1.name: duplicate region eu");
    expect(configError(envWith(clone(), { ADMIN_TOKEN_TEST: "a" }))).toContain(
      "regions.0.node_token_secret: secret NODE_TOKEN_TEST is not set",
    );
  });

  it("explains a missing or unparsable document", () => {
    expect(configError(envWith(undefined))).toContain("WARMPATH_CONFIG is not set");
    expect(configError(envWith("{nope"))).toContain("not valid JSON");
  });
});

describe("an invalid configuration", () => {
  it("fails every request with a 500 naming the field, and routes nothing", async () => {
    const bad = clone();
    delete (bad as Record<string, unknown>).tenants;
    const app = createApp();
    const ctx = { waitUntil() {}, passThroughOnException() {}, props: {} } as unknown as ExecutionContext;
    for (const path of ["/v1/models", "/v1/chat/completions"]) {
      const res = await app.fetch(
        new Request("http://localhost" + path, { method: path === "/v1/models" ? "GET" : "POST" }),
        envWith(bad),
        ctx,
      );
      expect(res.status).toBe(500);
      const body = await res.json<{ error: { code: string; message: string } }>();
      expect(body.error.code).toBe("invalid_configuration");
      expect(body.error.message).toContain("tenants");
    }
  });
});

describe("development credentials", () => {
  const request = (host: string) => new Request(`http://${host}/v1/models`);
  const config = (mode: "development" | "production") => ({ raw: { mode } }) as unknown as LoadedConfig;

  it("are accepted only in development mode on a loopback host", () => {
    expect(() => guardDevCredential(DEV_API_KEY, request("localhost:8787"), config("development"))).not.toThrow();
    expect(() => guardDevCredential(DEV_API_KEY, request("127.0.0.1:8787"), config("development"))).not.toThrow();
    expect(() => guardDevCredential(DEV_API_KEY, request("localhost:8787"), config("production"))).toThrow(ApiError);
    expect(() => guardDevCredential(DEV_API_KEY, request("warmpath.example.workers.dev"), config("development"))).toThrow(ApiError);
  });

  it("do not affect other credentials", () => {
    expect(() => guardDevCredential("sk-real", request("api.example.com"), config("production"))).not.toThrow();
  });
});
