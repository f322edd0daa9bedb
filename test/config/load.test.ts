/** Configuration: validated at the boundary, loud and specific when wrong, never half-read. */
import { describe, expect, it, vi } from "vitest";
import { createApp } from "../../src/edge/app.ts";
import { ConfigError, loadConfig } from "../../src/config/load.ts";
import { MAX_INDEX_ENTRIES_LIMIT } from "../../src/config/schema.ts";
import { indexMemoryBound } from "../../src/core/prefix-index.ts";
import { MAX_SHARDS } from "../../src/core/shard.ts";
import { ACME_KEY, ACME_KEY_2, TEST_CONFIG } from "../fixtures/config.ts";

const secrets = { NODE_TOKEN_TEST: "t", ADMIN_TOKEN_TEST: "a", ORIGIN_TOKEN_TEST: "o" };
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
    expect(a.prefix).toEqual({ blockChars: 512, maxBlocks: 2048, charsPerToken: 4 });
    expect(a.raw.limits.request_deadline_ms).toBe(900_000);
    expect(a.regions[0]!.init.settings.policy.name).toBe("warmpath");
    expect(a.regions[3]!.init.settings.policy.name).toBe("round-robin");
  });

  it("puts the budget ledger in budget_ledger_region, else the first region, and refuses a region that does not exist", () => {
    const first = loadConfig(envWith(clone()));
    expect(first.regions.map((r) => r.init.usage.ledgerRegion)).toEqual(first.regions.map(() => first.regions[0]!.config.name));
    const named = clone();
    const home = named.regions[1]!.name;
    named.budget_ledger_region = home;
    const loaded = loadConfig(envWith(named));
    expect(loaded.regions.map((r) => r.init.usage.ledgerRegion)).toEqual(loaded.regions.map(() => home));
    const bad = clone();
    bad.budget_ledger_region = "mars-1";
    expect(configError(envWith(bad))).toMatch(/budget_ledger_region: unknown region 'mars-1'/);
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
    // A commitment is a whole number of prompt tokens a minute, above zero.
    for (const committed of [0, -5, 1.5, "1000"]) {
      const badCommitment = clone();
      (badCommitment.tenants[0] as Record<string, unknown>).committed_prompt_tokens_per_minute = committed;
      expect(configError(envWith(badCommitment))).toContain("tenants.0.committed_prompt_tokens_per_minute");
    }
  });

  it("carries a static node's max_running_requests to the region object, and names a bad one", () => {
    const withPlaces = clone();
    const region = withPlaces.regions.findIndex((r) => ((r as { nodes?: unknown[] }).nodes ?? []).length > 0);
    const nodes = (withPlaces.regions[region] as unknown as { nodes: Array<Record<string, unknown>> }).nodes;
    nodes[0]!.max_running_requests = 256;
    const init = loadConfig(envWith(withPlaces)).regions[region]!.init;
    expect(init.staticNodes[0]).toMatchObject({ id: nodes[0]!.id, maxRunning: 256 });
    expect(init.staticNodes.slice(1).every((n) => n.maxRunning === undefined)).toBe(true);
    for (const bad of [0, 1.5, 70_000, "256"]) {
      nodes[0]!.max_running_requests = bad;
      // A new document each time: the loaded configuration is kept by the document it came from.
      expect(configError(envWith(JSON.stringify(withPlaces)))).toContain(`regions.${region}.nodes.0.max_running_requests`);
    }
  });

  it("refuses an unknown key anywhere, naming the key and where it is", () => {
    const top = clone();
    top.limts = { max_retries: 1 };
    expect(configError(envWith(top))).toMatch(/\(root\): Unrecognized key: "limts"/);
    const region = clone();
    (region.regions[1] as Record<string, unknown>).node_silense_ms = 100;
    expect(configError(envWith(region))).toMatch(/regions\.1: Unrecognized key: "node_silense_ms"/);
    const typo = clone();
    (typo.regions[0] as Record<string, unknown>).policy = { name: "warmpath", load_facter: 2 };
    expect(configError(envWith(typo))).toMatch(/regions\.0\.policy: Unrecognized key: "load_facter"/);
    const wrongPolicy = clone();
    (wrongPolicy.regions[0] as Record<string, unknown>).policy = { name: "warmpath", cache_threshold: 0.5 };
    expect(configError(envWith(wrongPolicy))).toMatch(/regions\.0\.policy: Unrecognized key: "cache_threshold"/);
    const tenant = clone();
    (tenant.tenants[1] as Record<string, unknown>).shared_namespace = ["commons"];
    expect(configError(envWith(tenant))).toMatch(/tenants\.1: Unrecognized key: "shared_namespace"/);
    const nested = clone();
    (nested.regions[3]!.nodes![0] as Record<string, unknown>).kv_capacity = 5;
    expect(configError(envWith(nested))).toMatch(/regions\.3\.nodes\.0: Unrecognized key: "kv_capacity"/);
  });

  it("fills each policy's own defaults, and reads a policy table without a name as warmpath's", () => {
    const cfg = clone();
    (cfg.regions[0] as Record<string, unknown>).policy = { tie_tolerance_seconds: 0.1 };
    (cfg.regions[1] as Record<string, unknown>).policy = { name: "sglang-cache-aware" };
    const loaded = loadConfig(envWith(cfg));
    expect(loaded.regions[0]!.init.settings.policy).toEqual({ name: "warmpath", tie_tolerance_seconds: 0.1, kv_pressure_threshold: 0.95 });
    expect(loaded.regions[1]!.init.settings.policy).toEqual({
      name: "sglang-cache-aware",
      cache_threshold: 0.3,
      balance_abs_threshold: 64,
      balance_rel_threshold: 1.5,
      max_tree_size: 2 ** 26,
    });
  });

  it("rejects duplicates and missing secrets by name", () => {
    const dup = clone();
    dup.regions[1]!.name = "eu";
    expect(configError(envWith(dup))).toContain("regions.1.name: duplicate region eu");
    expect(configError(envWith(clone(), { ADMIN_TOKEN_TEST: "a", ORIGIN_TOKEN_TEST: "o" }))).toContain(
      "regions.0.node_token_secret: secret NODE_TOKEN_TEST is not set",
    );
  });

  it("refuses a dedicated node's unknown tenant by name (the node would serve no one)", () => {
    const typo = clone() as unknown as { regions: Array<Record<string, unknown>> };
    typo.regions[0]!.node_tenants = { "gpu-1": ["acme", "acmee"] };
    expect(configError(envWith(typo))).toContain("regions.0.node_tenants.gpu-1: unknown tenant 'acmee'");
  });

  it("explains a missing or unparsable document", () => {
    expect(configError(envWith(undefined))).toContain("WARMPATH_CONFIG is not set");
    expect(configError(envWith("{nope"))).toContain("not valid JSON");
  });
});

describe("an invalid configuration", () => {
  it("fails every request with a 500, the field named in the operator's log and never to the client, and routes nothing", async () => {
    const bad = clone();
    delete (bad as Record<string, unknown>).tenants;
    const errors = vi.spyOn(console, "error");
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
      expect(body.error.message).not.toContain("tenants");
      expect(errors.mock.calls.map((c) => String(c[0])).some((l) => l.includes("config_error") && l.includes("tenants"))).toBe(true);
    }
  });
});

describe("API keys: rotation and revocation by configuration", () => {
  const ctx = { waitUntil() {}, passThroughOnException() {}, props: {} } as unknown as ExecutionContext;
  const models = (config: unknown, key: string) =>
    createApp().fetch(new Request("http://localhost/v1/models", { headers: { authorization: `Bearer ${key}` } }), envWith(config), ctx);
  // sha256("sk-acme-carol")
  const CAROL = "f8d16e7359563c016b80501dac517e2e70aeaf0d62daebf295ebfff40890b1ec";

  it("a key whose hash is added works at once; a key whose hash is removed is refused, the tenant's other keys not", async () => {
    expect((await models(clone(), "sk-acme-carol")).status).toBe(401);
    const rotated = clone() as unknown as { tenants: Array<{ id: string; api_key_sha256: string[] }> };
    const acme = rotated.tenants.find((t) => t.id === "acme")!;
    acme.api_key_sha256 = [acme.api_key_sha256[0]!, CAROL]; // bob's key revoked, carol's added
    expect((await models(rotated, "sk-acme-carol")).status).toBe(200);
    expect((await models(rotated, ACME_KEY)).status).toBe(200);
    const revoked = await models(rotated, ACME_KEY_2);
    expect(revoked.status).toBe(401);
    expect((await revoked.json<{ error: { code: string } }>()).error.code).toBe("invalid_api_key");
  });
});

describe("bounds a configuration cannot exceed", () => {
  it("keeps the largest index a region may configure well inside a Durable Object's 128 MB", () => {
    expect(indexMemoryBound(MAX_INDEX_ENTRIES_LIMIT)).toBeLessThan(0.8 * 128 * 1024 * 1024);
    const over = clone();
    (over.regions[0] as Record<string, unknown>).max_index_entries = MAX_INDEX_ENTRIES_LIMIT + 1;
    expect(() => loadConfig(envWith(over))).toThrow(/regions\.0\.max_index_entries/);
  });

  it("refuses a region split over more shards than a report can be passed on to", () => {
    const over = clone();
    (over.regions[0] as Record<string, unknown>).shards = MAX_SHARDS + 1;
    expect(() => loadConfig(envWith(over))).toThrow(/regions\.0\.shards/);
  });
});
