/** Configuration: validated at the boundary, loud and specific when wrong, never half-read. */
import { describe, expect, it, vi } from "vitest";
import { createApp } from "../../src/edge/app.ts";
import { ConfigError, loadConfig } from "../../src/config/load.ts";
import { MAX_INDEX_ENTRIES_LIMIT, MAX_REGION_MODELS, REQUEST_TIMEOUT_MARGIN_MS } from "../../src/config/schema.ts";
import { MAX_DURATION_MS, RESERVED_BINDING_NAMES } from "../../src/config/schema-names.ts";
import { MAX_BODY_BYTES_LIMIT } from "../../src/config/limits-schema.ts";
import { indexMemoryBound } from "../../src/core/prefix-index.ts";
import { MAX_SHARDS } from "../../src/core/shard.ts";
import { VERSION_METADATA_BINDING } from "../../src/contracts/topology.ts";
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

  it("orders a region's init by its worker version's upload time (version metadata), outside its fingerprint", () => {
    const plain = loadConfig(envWith(clone())).regionByName.get("us")!.init;
    expect(plain.generation).toBeUndefined();
    const metadata = { id: "v", tag: "", timestamp: "2026-12-08T01:02:03.004Z" };
    const versioned = loadConfig(envWith(clone(), { ...secrets, [VERSION_METADATA_BINDING]: metadata })).regionByName.get("us")!.init;
    expect(versioned.generation).toBe(Date.parse(metadata.timestamp));
    // A version that changed only code sends the same init: the object need not rebuild for it.
    expect(versioned.fingerprint).toBe(plain.fingerprint);
    const garbled = { ...metadata, timestamp: "not a time" };
    expect(
      loadConfig(envWith(clone(), { ...secrets, [VERSION_METADATA_BINDING]: garbled })).regionByName.get("us")!.init.generation,
    ).toBeUndefined();
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

describe("secrets: each names a secret of its own, for one role", () => {
  type Doc = { admin_token_secret: string; regions: Array<Record<string, unknown>> };
  const doc = () => clone() as unknown as Doc;

  it("refuses a secret field naming a binding or secret the workers use themselves, naming the field", () => {
    for (const reserved of [...RESERVED_BINDING_NAMES, "REGION_WORKER_EU"]) {
      const admin = doc();
      admin.admin_token_secret = reserved;
      expect(configError(envWith(JSON.stringify(admin)))).toMatch(
        /^WARMPATH_CONFIG is invalid: admin_token_secret: must not name a binding/,
      );
    }
    // The reviewer's case: the internal signing secret sent as Bearer to every node of a region.
    const origin = doc();
    origin.regions[3]!.origin_token_secret = "INTERNAL_SECRET";
    expect(configError(envWith(origin))).toMatch(/regions\.3\.origin_token_secret: must not name a binding/);
    const node = doc();
    node.regions[0]!.node_token_secret = ["NODE_TOKEN_TEST", "INTERNAL_SECRET_PREVIOUS"];
    expect(configError(envWith(node))).toMatch(/regions\.0\.node_token_secret\.1: must not name a binding/);
    const config = doc();
    config.regions[1]!.node_token_secret = "WARMPATH_CONFIG";
    expect(configError(envWith(config))).toMatch(/regions\.1\.node_token_secret: must not name a binding/);
  });

  it("refuses one secret in two roles, naming both fields and never the secret, and lets regions share one within a role", () => {
    // A node's token would open /admin/*.
    const admin = doc();
    admin.admin_token_secret = "NODE_TOKEN_TEST";
    const adminError = configError(envWith(admin));
    expect(adminError).toContain("regions.0.node_token_secret: names the same secret as admin_token_secret: a secret serves one role");
    expect(adminError).not.toContain("NODE_TOKEN_TEST");
    // A node handed the origin token as Bearer could register nodes with it.
    const origin = doc();
    origin.regions[3]!.origin_token_secret = "NODE_TOKEN_TEST";
    const originError = configError(envWith(origin));
    expect(originError).toContain("regions.3.origin_token_secret: names the same secret as regions.0.node_token_secret");
    expect(originError).not.toContain("NODE_TOKEN_TEST");
    // In a rotation list too, and in another region than the first use.
    const rotation = doc();
    rotation.regions[2]!.node_token_secret = ["NODE_TOKEN_TEST", "ORIGIN_TOKEN_TEST"];
    expect(configError(envWith(rotation))).toContain(
      "regions.3.origin_token_secret: names the same secret as regions.2.node_token_secret.1",
    );
    const adminOrigin = doc();
    adminOrigin.regions[3]!.origin_token_secret = "ADMIN_TOKEN_TEST";
    expect(configError(envWith(adminOrigin))).toContain("regions.3.origin_token_secret: names the same secret as admin_token_secret");
    // Within a role a secret may be shared: the fixture's regions share a node token; two regions one origin token.
    const shared = doc();
    shared.regions[0]!.origin_token_secret = "ORIGIN_TOKEN_TEST";
    const loaded = loadConfig(envWith(shared));
    expect([loaded.regions[0]!.originToken, loaded.regions[3]!.originToken]).toEqual(["o", "o"]);
    expect(new Set(loaded.regions.map((r) => r.nodeToken))).toEqual(new Set(["t"]));
  });
});

describe("a region's request timeout follows the request deadline", () => {
  type Doc = { limits: Record<string, unknown>; regions: Array<Record<string, unknown>> };
  const doc = () => clone() as unknown as Doc;

  it("defaults to the deadline plus the margin, so a stream the deadline allows keeps its ticket and budget hold", () => {
    expect(REQUEST_TIMEOUT_MARGIN_MS).toBe(60_000);
    const loaded = loadConfig(envWith(clone()));
    expect(loaded.raw.limits.request_deadline_ms).toBe(900_000);
    for (const r of loaded.regions) expect(r.init.settings.requestTimeoutMs).toBe(960_000);
    const long = doc();
    long.limits.request_deadline_ms = 1_800_000;
    expect(loadConfig(envWith(long)).regions.map((r) => r.init.settings.requestTimeoutMs)).toEqual(
      loadConfig(envWith(long)).regions.map(() => 1_860_000),
    );
    // One set explicitly, at or past the deadline plus the margin, is kept.
    const set = doc();
    set.regions[0]!.request_timeout_ms = 960_000;
    set.regions[1]!.request_timeout_ms = 3_600_000;
    const kept = loadConfig(envWith(set));
    expect(kept.regions.slice(0, 3).map((r) => r.init.settings.requestTimeoutMs)).toEqual([960_000, 3_600_000, 960_000]);
  });

  it("refuses a request_timeout_ms below the deadline plus the margin, naming the field", () => {
    const old = doc();
    old.regions[1]!.request_timeout_ms = 600_000; // the former default
    expect(configError(envWith(old))).toContain(
      "regions.1.request_timeout_ms: must be at least limits.request_deadline_ms + 60000 (960000)",
    );
    const tight = doc();
    tight.limits.request_deadline_ms = 60_000;
    tight.regions[0]!.request_timeout_ms = 119_999;
    expect(configError(envWith(tight))).toContain("regions.0.request_timeout_ms: must be at least");
    tight.regions[0]!.request_timeout_ms = 120_000;
    expect(loadConfig(envWith(JSON.stringify(tight))).regions[0]!.init.settings.requestTimeoutMs).toBe(120_000);
  });
});

describe("dedicated nodes", () => {
  it("refuses a node dedicated to a tenant barred from the region, naming the field (the node would serve no one)", () => {
    const barred = clone() as unknown as { regions: Array<Record<string, unknown>> };
    // Region 1 is `us`; tenant euonly may use `eu` only.
    barred.regions[1]!.node_tenants = { "ded-eu": ["acme", "euonly"] };
    expect(configError(envWith(barred))).toContain(
      "regions.1.node_tenants.ded-eu: tenant 'euonly' may not use region 'us' (its regions: eu)",
    );
    // A tenant whose regions include this one, or that names none (every region), is accepted.
    barred.regions[1]!.node_tenants = { "ded-us": ["hooli", "acme"] };
    expect(loadConfig(envWith(JSON.stringify(barred))).regions[1]!.init.settings.nodeTenants).toEqual({ "ded-us": ["hooli", "acme"] });
  });
});

describe("limits that contradict each other or exceed a timer", () => {
  type Doc = { limits: Record<string, unknown>; regions: Array<Record<string, unknown>> };
  const doc = () => clone() as unknown as Doc;

  it("refuses a first-byte floor above the first-byte timeout (the floor would be silently ignored)", () => {
    const bad = doc();
    bad.limits.first_byte_timeout_floor_ms = 500_000;
    bad.limits.first_byte_timeout_ms = 1_000;
    expect(configError(envWith(bad))).toContain("limits.first_byte_timeout_floor_ms: must be at most first_byte_timeout_ms (1000)");
    bad.limits.first_byte_timeout_floor_ms = 1_000;
    expect(loadConfig(envWith(JSON.stringify(bad))).raw.limits.first_byte_timeout_floor_ms).toBe(1_000);
  });

  it("bounds every duration at a day (a timer fires at once past 2^31-1 ms), naming the field", () => {
    expect(MAX_DURATION_MS).toBe(86_400_000);
    // The longest a field may configure, the request timeout past the longest deadline, is a timer's.
    expect(MAX_DURATION_MS + REQUEST_TIMEOUT_MARGIN_MS).toBeLessThan(2 ** 31 - 1);
    const limits = ["first_byte_timeout_ms", "stream_idle_timeout_ms", "request_deadline_ms"];
    for (const field of limits) {
      const over = doc();
      over.limits[field] = 2 ** 31;
      expect(configError(envWith(over))).toContain(`limits.${field}:`);
      over.limits[field] = MAX_DURATION_MS + 1;
      expect(configError(envWith(JSON.stringify(over)))).toContain(`limits.${field}:`);
    }
    const floor = doc();
    floor.limits.first_byte_timeout_floor_ms = MAX_DURATION_MS + 1;
    floor.limits.first_byte_timeout_ms = MAX_DURATION_MS;
    expect(configError(envWith(floor))).toContain("limits.first_byte_timeout_floor_ms: Too big");
    const regionOver: Array<[string, number]> = [
      ["node_silence_ms", MAX_DURATION_MS + 1],
      ["max_queue_seconds", MAX_DURATION_MS / 1000 + 1],
      ["fair_share_wait_seconds", MAX_DURATION_MS / 1000 + 1],
      // Its documented bound: the breaker's cool-down never exceeds 60 s.
      ["failure_cooldown_ms", 60_001],
      ["request_timeout_ms", MAX_DURATION_MS + REQUEST_TIMEOUT_MARGIN_MS + 1],
    ];
    for (const [field, value] of regionOver) {
      const over = doc();
      over.regions[2]![field] = value;
      expect(configError(envWith(over))).toContain(`regions.2.${field}:`);
    }
    // At the bounds: a day's deadline, its region timeout following it.
    const longest = doc();
    longest.limits = { ...longest.limits, request_deadline_ms: MAX_DURATION_MS, stream_idle_timeout_ms: MAX_DURATION_MS };
    longest.regions[2]!.node_silence_ms = MAX_DURATION_MS;
    const loaded = loadConfig(envWith(longest));
    expect(loaded.regions[2]!.init.settings.requestTimeoutMs).toBe(MAX_DURATION_MS + REQUEST_TIMEOUT_MARGIN_MS);
  });

  it("bounds the request body at 8 MiB (a continuation at the bound holds ~13x it in a 128 MB isolate), naming the field", () => {
    expect(MAX_BODY_BYTES_LIMIT).toBe(8 * 1024 * 1024);
    const over = doc();
    over.limits.max_body_bytes = MAX_BODY_BYTES_LIMIT + 1;
    expect(configError(envWith(over))).toContain("limits.max_body_bytes: Too big");
    // Workers' own body limit on Free and Pro: the platform's bound is not this one.
    over.limits.max_body_bytes = 100 * 1000 * 1000;
    expect(configError(envWith(JSON.stringify(over)))).toContain("limits.max_body_bytes:");
    over.limits.max_body_bytes = MAX_BODY_BYTES_LIMIT;
    expect(loadConfig(envWith(over)).raw.limits.max_body_bytes).toBe(MAX_BODY_BYTES_LIMIT);
  });

  it("bounds a region's model names as nodes and requests do, and its catalogue", () => {
    const long = doc();
    long.regions[0]!.models = ["m-eu", "x".repeat(257)];
    expect(configError(envWith(long))).toContain("regions.0.models.1:");
    long.regions[0]!.models = ["m-eu", "x".repeat(256)];
    expect(loadConfig(envWith(JSON.stringify(long))).models).toContain("x".repeat(256));
    const many = doc();
    many.regions[0]!.models = Array.from({ length: MAX_REGION_MODELS + 1 }, (_, i) => `m-${i}`);
    expect(configError(envWith(many))).toContain("regions.0.models:");
    many.regions[0]!.models = Array.from({ length: MAX_REGION_MODELS }, (_, i) => `m-${i}`);
    expect(loadConfig(envWith(JSON.stringify(many))).regions[0]!.config.models).toHaveLength(MAX_REGION_MODELS);
  });
});
