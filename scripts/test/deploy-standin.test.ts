/**
 * `npm run deploy` for real, not --dry-run: every generated configuration of staging and
 * production deployed with the real `wrangler deploy` against the stand-in Cloudflare API
 * (scripts/deploy/standin/), on a fresh account and then again (an update), and the account read
 * back: scripts, secrets, bindings, migrations, placement, routes, limits. Also what the stand-in
 * refuses, so it is shown to enforce the rules the deploy relies on (the old order, deploy then
 * secrets, among them).
 *
 * The environments are wrangler.toml's, with the placeholder tenant keys replaced (a real deploy
 * refuses them) and, for production, a custom domain and a CPU limit added to show they reach the
 * workers. Each wrangler run is ~2 s of CPU (startup and bundling; docs/DEPLOY.md has the figures).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { deploy, ROOT, spawnWrangler } from "../deploy.ts";
import { generateDeployment, type Deployment } from "../deploy/generate.ts";
import { startStandin, wranglerEnv, type Standin } from "../deploy/standin/server.ts";
import { rootWith } from "./deploy-root.ts";

type Json = Record<string, any>;

/** A root of its own: wrangler.toml edited, everything else (sources, node_modules) linked from the project. */
function deployRoot(editToml?: (toml: Json) => void): string {
  const root = rootWith(() => {}, { editToml });
  for (const entry of readdirSync(ROOT))
    if (!["wrangler.toml", "dist", ".git", ".wrangler"].includes(entry)) symlinkSync(join(ROOT, entry), join(root, entry));
  return root;
}

/** Production with a custom domain on the edge and a CPU limit for every worker. */
const withIntent = (toml: Json) => {
  toml.env.production.routes = [{ pattern: "api.example.com", custom_domain: true }];
  toml.env.production.limits = { cpu_ms: 30_000 };
};

/** A secrets file with every secret an environment's workers need (a name no worker needs is refused). */
function secretsFile(root: string, d: Deployment): string {
  const names = new Set(d.workers.flatMap((w) => w.secrets));
  const file = join(root, `secrets-${d.environment}.json`);
  writeFileSync(file, JSON.stringify(Object.fromEntries([...names].map((n) => [n, `${d.environment}-${n}-`.padEnd(48, "x")]))), {
    mode: 0o600,
  });
  return file;
}

async function run(standin: Standin, root: string, environment: string, secretsFile?: string): Promise<{ code: number; errors: string }> {
  const errors: string[] = [];
  const code = await deploy(
    { environment, dryRun: false, ...(secretsFile ? { secretsFile } : {}) },
    {
      root,
      run: (step) => spawnWrangler(step, { root, quiet: true, env: wranglerEnv(standin) }),
      log: () => {},
      error: (l) => errors.push(l),
    },
  );
  return { code, errors: errors.join("\n") };
}

test("every generated configuration deploys with real wrangler on a fresh account, then updates", { timeout: 600_000 }, async () => {
  const root = deployRoot(withIntent);
  const standin = await startStandin({ log: () => {} });
  try {
    const deployments = ["staging", "production"].map((environment) =>
      generateDeployment({ root, environment, outDir: join(root, "dist", "plan", environment) }),
    );
    for (const d of deployments) {
      const { code, errors } = await run(standin, root, d.environment!, secretsFile(root, d));
      assert.equal(code, 0, errors);
    }
    assert.deepEqual(standin.unknown, [], "wrangler called nothing the stand-in does not know");
    const first = standin.account.snapshot();
    const expected = deployments.flatMap((d) => d.workers);
    assert.deepEqual(Object.keys(first).sort(), expected.map((w) => w.name).sort());
    for (const d of deployments) {
      const internal = new Set(d.workers.map((w) => first[w.name]!.secretDigests.INTERNAL_SECRET));
      assert.equal(internal.size, 1, `${d.environment}: one INTERNAL_SECRET on every worker`);
      for (const w of d.workers) {
        const s = first[w.name]!;
        assert.equal(s.versions, 1, w.name);
        assert.deepEqual(s.secrets, [...w.secrets].sort(), `${w.name}: its own secrets, no other's`);
        assert.deepEqual(s.observability, { enabled: true, traces: { enabled: true } });
        assert.equal(s.limits?.cpu_ms, d.environment === "production" ? 30_000 : undefined, `${w.name}: limits`);
        if (w.kind === "region") {
          assert.deepEqual(s.classes, { RegionDurableObject: "sqlite" });
          assert.equal(s.migrationTag, "v1");
          assert.deepEqual(s.bindings.REGION, { type: "durable_object_namespace", class_name: "RegionDurableObject" });
          assert.equal(s.placement?.mode, "targeted");
          assert.equal(s.workersDev, false);
          assert.deepEqual(s.domains, []);
        } else {
          assert.deepEqual(s.classes, {});
          assert.equal(s.workersDev, true);
          assert.equal(s.assets, true, "the dashboard's files");
          for (const r of d.workers.filter((x) => x.kind === "region"))
            assert.deepEqual(s.bindings[`REGION_WORKER_${r.region!.toUpperCase().replaceAll("-", "_")}`], {
              type: "service",
              service: r.name,
            });
        }
      }
    }
    assert.deepEqual(first["warmpath-region-eu-west"]!.bindings.BUDGET_LEDGER, { type: "service", service: "warmpath-region-us-east" });
    assert.deepEqual(first.warmpath!.domains, ["api.example.com"], "the custom domain reaches the edge");
    assert.deepEqual(first["warmpath-staging"]!.domains, []);

    // The update: no secrets file, every secret kept; the migration is not applied again.
    for (const environment of ["staging", "production"]) {
      const { code, errors } = await run(standin, root, environment);
      assert.equal(code, 0, errors);
    }
    assert.deepEqual(standin.unknown, []);
    const second = standin.account.snapshot();
    for (const w of expected) {
      assert.equal(second[w.name]!.versions, 2, w.name);
      assert.deepEqual(second[w.name]!.secretDigests, first[w.name]!.secretDigests, `${w.name}: secrets kept`);
      assert.equal(second[w.name]!.migrationTag, first[w.name]!.migrationTag);
    }
  } finally {
    await standin.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test(
  "the old order, deploy and then set the secrets, is refused on a fresh account: nothing is created",
  { timeout: 300_000 },
  async () => {
    const root = deployRoot();
    const standin = await startStandin({ log: () => {} });
    try {
      const { code, errors } = await run(standin, root, "staging");
      assert.equal(code, 1);
      assert.match(errors, /required secrets have not been set: ORIGIN_TOKEN, INTERNAL_SECRET/);
      assert.match(errors, /not deployed: +warmpath-staging \(edge\)/);
      assert.match(errors, /--secrets-file FILE/);
      assert.deepEqual(standin.account.snapshot(), {}, "no worker created");
    } finally {
      await standin.close();
      rmSync(root, { recursive: true, force: true });
    }
  },
);

/** One upload straight to the stand-in: what the API answers, whatever wrangler would have checked first. */
async function upload(
  standin: Standin,
  name: string,
  metadata: Json,
  code = "export default { fetch() {} }",
): Promise<{ status: number; body: Json }> {
  const form = new FormData();
  form.set("metadata", JSON.stringify({ main_module: "index.js", ...metadata }));
  form.set("index.js", new File([code], "index.js", { type: "application/javascript+module" }));
  const res = await fetch(`${standin.url}/accounts/${standin.account.id}/workers/scripts/${name}`, { method: "PUT", body: form });
  return { status: res.status, body: (await res.json()) as Json };
}

test("the stand-in enforces each rule the deploy relies on, with the API's error codes", async () => {
  const standin = await startStandin({ log: () => {} });
  const refused = async (name: string, metadata: Json, code: number, message: RegExp, source?: string) => {
    const r = await upload(standin, name, metadata, source);
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.errors[0].code, code);
    assert.match(r.body.errors[0].message, message);
  };
  const DO = `export class RegionDurableObject {}\nexport default { fetch() {} }`;
  try {
    // A required secret inherited by a worker that does not exist (the old order's upload).
    await refused("r", { bindings: [{ type: "inherit", name: "INTERNAL_SECRET" }] }, 10057, /inherit binding 'INTERNAL_SECRET' is invalid/);
    // A service binding to a worker that does not exist yet (the edge before its region workers).
    await refused(
      "edge",
      { bindings: [{ type: "service", name: "REGION_WORKER_US", service: "r" }] },
      10143,
      /target worker 'r' not found/,
    );
    // A Durable Object binding whose class no migration created; a class not exported.
    const doBinding = { type: "durable_object_namespace", name: "REGION", class_name: "RegionDurableObject" };
    await refused("r", { bindings: [doBinding] }, 10061, /not currently configured to implement Durable Objects/, DO);
    const migrations = { new_tag: "v1", steps: [{ new_sqlite_classes: ["RegionDurableObject"] }] };
    await refused("r", { bindings: [doBinding], migrations }, 10021, /does not export it/);
    // Placement: one target, a cloud region id.
    await refused("r", { placement: { mode: "targeted", region: "us-east-1" } }, 10021, /aws:, gcp: or azure:/);
    await refused("r", { placement: { mode: "targeted", region: "aws:us-east-1", hostname: "a.example.com" } }, 10021, /exactly one/);
    // A var over 5 KB.
    await refused(
      "r",
      { bindings: [{ type: "json", name: "WARMPATH_CONFIG", json: { x: "y".repeat(5200) } }] },
      10021,
      /WARMPATH_CONFIG is \d+ bytes: at most 5120/,
    );

    // Created with its secret and class: then an update must advance from its tag, not recreate the class.
    const created = await upload(
      standin,
      "r",
      { bindings: [doBinding, { type: "secret_text", name: "INTERNAL_SECRET", text: "s".repeat(40) }], migrations },
      DO,
    );
    assert.equal(created.status, 200, JSON.stringify(created.body));
    await refused("r", { bindings: [doBinding], migrations }, 10079, /precondition failed: the script's current migration tag is v1/, DO);
    await refused(
      "r",
      { bindings: [doBinding], migrations: { old_tag: "v1", new_tag: "v2", steps: [{ new_sqlite_classes: ["RegionDurableObject"] }] } },
      10021,
      /already exists/,
      DO,
    );
    await refused("r", { bindings: [doBinding] }, 10021, /RegionDurableObject exists but the upload does not export it/);
    // Now the secret is inherited, and the binding's target exists.
    const update = await upload(
      standin,
      "r",
      { bindings: [doBinding, { type: "inherit", name: "INTERNAL_SECRET" }], keep_bindings: ["secret_text"] },
      DO,
    );
    assert.equal(update.status, 200, JSON.stringify(update.body));
    assert.equal((await upload(standin, "edge", { bindings: [{ type: "service", name: "REGION_WORKER_US", service: "r" }] })).status, 200);
    // A request no handler knows is recorded and fails loudly.
    const res = await fetch(`${standin.url}/accounts/${standin.account.id}/workers/queues`);
    assert.equal(res.status, 501);
    assert.deepEqual(standin.unknown, [`GET /accounts/${standin.account.id}/workers/queues`]);
  } finally {
    await standin.close();
  }
});
