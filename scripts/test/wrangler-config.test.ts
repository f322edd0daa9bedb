/**
 * wrangler.toml's configurations are valid before anyone deploys them: each environment's
 * WARMPATH_CONFIG (development, staging, production) passes the worker's own schema, and each
 * environment declares the bindings the worker needs (Durable Objects are not inherited by named
 * environments), and each deployed region says where its worker runs. `npm test` also runs
 * `node scripts/deploy.ts --dry-run` for staging and production (scripts/test/deploy.test.ts: what
 * it generates from them).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "smol-toml";
import { configSchema } from "../../src/config/schema.ts";
import { ROOT } from "../system.ts";
import { checkConfigSize, checkLedgerHome, checkPlacementHints, MAX_VAR_BYTES, varBytes } from "../deploy/checks.ts";

interface Env {
  vars?: { WARMPATH_CONFIG?: unknown };
  durable_objects?: { bindings?: Array<{ name: string; class_name: string }> };
  analytics_engine_datasets?: Array<{ binding: string; dataset: string }>;
}

const toml = parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as Env & { env?: Record<string, Env> };
const environments: Array<[string, Env]> = [["development (top level)", toml], ...Object.entries(toml.env ?? {})];

test("every environment's WARMPATH_CONFIG passes the worker's schema", () => {
  assert.ok(environments.length >= 3, "development, staging and production");
  for (const [name, env] of environments) {
    const r = configSchema.safeParse(env.vars?.WARMPATH_CONFIG);
    assert.ok(r.success, `${name}: ${r.success ? "" : JSON.stringify(r.error.issues)}`);
  }
});

test("every environment binds the region Durable Object and the analytics dataset, each its own", () => {
  const datasets = new Set<string>();
  for (const [name, env] of environments) {
    assert.deepEqual(
      env.durable_objects?.bindings?.map((b) => ({ ...b })),
      [{ name: "REGION", class_name: "RegionDurableObject" }],
      name,
    );
    const ae = env.analytics_engine_datasets?.[0];
    assert.equal(ae?.binding, "ANALYTICS", name);
    datasets.add(ae!.dataset);
  }
  assert.equal(datasets.size, environments.length - 1, "staging has its own dataset (development's is local)");
});

test("deployed environments refuse development credentials", () => {
  for (const [name, env] of environments.slice(1)) {
    const config = configSchema.parse(env.vars?.WARMPATH_CONFIG);
    assert.equal(config.mode, "production", `${name} must not be in development mode`);
  }
});

test("deployed environments keep every token out of plain vars (wrangler prints vars at startup; secrets it does not)", () => {
  for (const [name, env] of environments.slice(1)) {
    const vars = Object.keys(env.vars ?? {});
    assert.deepEqual(vars, ["WARMPATH_CONFIG"], `${name}: only the configuration is a var; tokens are \`wrangler secret put\``);
    // Every secret the configuration names must not be defined as a var either.
    const config = configSchema.parse(env.vars?.WARMPATH_CONFIG);
    const named = [config.admin_token_secret, ...config.regions.flatMap((r) => [r.node_token_secret, r.origin_token_secret].flat())];
    for (const secret of named) if (secret) assert.ok(!vars.includes(secret), `${name}: ${secret} is a plain var`);
  }
});

test("every environment binds the edge rate limiter, deployed ones each their own namespace", () => {
  const namespaces = new Map<string, string>();
  for (const [name, env] of environments) {
    const rl = (env as { ratelimits?: Array<{ name: string; namespace_id: string }> }).ratelimits?.[0];
    assert.equal(rl?.name, "RATE_LIMITER", name);
    namespaces.set(name, rl!.namespace_id);
  }
  assert.notEqual(namespaces.get("staging"), namespaces.get("production"), "staging's counters are not production's");
});

test("every deployed region says where its nodes may be (without allowed_origins or static nodes, every registration is refused)", () => {
  for (const [name, env] of environments.slice(1)) {
    for (const r of configSchema.parse(env.vars?.WARMPATH_CONFIG).regions) {
      assert.ok((r.allowed_origins?.length ?? 0) > 0 || r.nodes.length > 0, `${name}: region ${r.name}`);
    }
  }
});

test("every deployed region names its worker's placement, by its GPUs (npm run deploy refuses a region without one)", () => {
  for (const [name, env] of environments.slice(1)) {
    for (const r of configSchema.parse(env.vars?.WARMPATH_CONFIG).regions) {
      assert.ok(r.placement, `${name}: region ${r.name} has no placement`);
    }
  }
});

test("every deployed environment fits Cloudflare's 5 KB per variable, and places each region's worker where its object is", () => {
  for (const [name, env] of Object.entries(toml.env ?? {})) {
    const raw = env.vars?.WARMPATH_CONFIG;
    const config = configSchema.parse(raw);
    assert.deepEqual(checkConfigSize(raw, name).problems, [], name);
    assert.ok(varBytes(raw) < MAX_VAR_BYTES / 2, `${name}: ${varBytes(raw)} bytes, room to grow`);
    assert.deepEqual(checkPlacementHints(config), { problems: [], warnings: [] }, name);
    assert.deepEqual(checkLedgerHome(config).problems, [], name);
  }
});
