/**
 * `npm run deploy` (scripts/deploy.ts, scripts/deploy/generate.ts): the configurations it generates
 * from wrangler.toml's environments, what it refuses (before writing or uploading anything), and the
 * order it deploys in (region workers, then the edge), with the report of a partial failure. One
 * real `wrangler deploy --dry-run` (staging, a few seconds); no test uploads anything.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parse, stringify } from "smol-toml";
import { DeployConfigError, generateDeployment } from "../deploy/generate.ts";
import { rootWith } from "./deploy-root.ts";
import {
  deploy,
  failureReport,
  parseDeployArgs,
  planDeploy,
  ROOT,
  runPlan,
  secretsReport,
  spawnWrangler,
  UsageError,
  type Runner,
  type Step,
} from "../deploy.ts";
import { CONTRACT_HEADER } from "../../src/contracts/region-service.ts";

// Generated JSON, read as wrangler reads it.
type Json = Record<string, any>;

const tmp = (prefix: string) => mkdtempSync(join(tmpdir(), `warmpath-deploy-${prefix}-`));
const readJson = (file: string): Json => JSON.parse(readFileSync(file, "utf8")) as Json;

/** A runner that deploys nothing and records the order (and fails the worker named `failOn`). */
function recorder(failOn?: string): { run: Runner; ran: string[] } {
  const ran: string[] = [];
  return {
    ran,
    run: (step: Step) => {
      ran.push(step.worker.name);
      return step.worker.name === failOn ? { ok: false, detail: "exit 1" } : { ok: true };
    },
  };
}

test("arguments: --env is required, --dry-run optional, nothing else accepted", () => {
  assert.deepEqual(parseDeployArgs(["--env", "production"]), { environment: "production", dryRun: false });
  assert.deepEqual(parseDeployArgs(["--dry-run", "--env", "staging"]), { environment: "staging", dryRun: true });
  assert.deepEqual(parseDeployArgs(["--env", "production", "--secrets-file", "s.json"]), {
    environment: "production",
    dryRun: false,
    secretsFile: "s.json",
  });
  assert.throws(() => parseDeployArgs([]), UsageError);
  assert.throws(() => parseDeployArgs(["--env", "production", "--force"]), UsageError);
  assert.throws(() => parseDeployArgs(["--env", "production", "extra"]), UsageError);
});

test("production generates the edge and one placed worker per region, as wrangler will read them", () => {
  const dir = tmp("production");
  try {
    const deployment = generateDeployment({ root: ROOT, environment: "production", outDir: dir });
    assert.deepEqual(readdirSync(dir).sort(), ["deployment.json", "edge.json", "region-eu-west.json", "region-us-east.json"]);
    const edge = readJson(join(dir, "edge.json"));
    const regions = { "us-east": readJson(join(dir, "region-us-east.json")), "eu-west": readJson(join(dir, "region-eu-west.json")) };

    assert.equal(edge.name, "warmpath");
    assert.equal(resolve(dir, edge.main), join(ROOT, "src/edge/index.ts"));
    assert.equal(edge.durable_objects, undefined, "the edge owns no Durable Object");
    assert.equal(edge.migrations, undefined);
    assert.equal(edge.placement, undefined, "the edge runs where the client is");
    assert.deepEqual(edge.services, [
      { binding: "REGION_WORKER_US_EAST", service: "warmpath-region-us-east" },
      { binding: "REGION_WORKER_EU_WEST", service: "warmpath-region-eu-west" },
    ]);
    assert.equal(edge.vars.WARMPATH_REGION, undefined);
    // Its one tenant has no request limit: no edge ceiling (src/config/edge-ceiling.ts).
    assert.equal(edge.ratelimits, undefined);
    assert.equal(resolve(dir, edge.assets.directory), join(ROOT, "public"));

    const placement = { "us-east": "aws:us-east-1", "eu-west": "aws:eu-west-1" };
    for (const [region, config] of Object.entries(regions)) {
      assert.equal(config.name, `warmpath-region-${region}`);
      assert.equal(resolve(dir, config.main), join(ROOT, "src/region/index.ts"));
      assert.deepEqual(config.placement, { mode: "targeted", region: placement[region as keyof typeof placement] });
      assert.deepEqual(config.durable_objects, { bindings: [{ name: "REGION", class_name: "RegionDurableObject" }] });
      // Its version's upload time orders two versions' inits in a gradual deployment (durable-objects/init-order.ts).
      assert.deepEqual(config.version_metadata, { binding: "CF_VERSION_METADATA" });
      assert.deepEqual(config.migrations, [{ tag: "v1", new_sqlite_classes: ["RegionDurableObject"] }]);
      assert.equal(config.workers_dev, false, "reached only through the edge's service binding");
      // The budget ledger lives in the first region's worker's namespace: the others reach it over a binding.
      if (region === "us-east") assert.equal(config.services, undefined);
      else assert.deepEqual(config.services, [{ binding: "BUDGET_LEDGER", service: "warmpath-region-us-east" }]);
      assert.equal(config.vars.WARMPATH_REGION, region);
      assert.equal(config.vars.WARMPATH_CONFIG.mode, "production");
    }

    const secrets = Object.fromEntries(deployment.workers.map((w) => [w.name, w.secrets]));
    assert.deepEqual(secrets, {
      "warmpath-region-us-east": ["ORIGIN_TOKEN", "INTERNAL_SECRET"],
      "warmpath-region-eu-west": ["ORIGIN_TOKEN", "INTERNAL_SECRET"],
      warmpath: ["NODE_TOKEN_US_EAST", "NODE_TOKEN_EU_WEST", "ADMIN_TOKEN", "INTERNAL_SECRET"],
    });
    const manifest = readJson(join(dir, "deployment.json"));
    assert.deepEqual(
      manifest.order.map((w: Json) => [w.name, w.file]),
      [
        ["warmpath-region-us-east", "region-us-east.json"],
        ["warmpath-region-eu-west", "region-eu-west.json"],
        ["warmpath", "edge.json"],
      ],
    );
    const report = secretsReport(planDeploy(deployment, false));
    assert.match(report, /npx wrangler secret put ORIGIN_TOKEN --config \S+region-eu-west\.json/);
    assert.match(report, /npx wrangler secret put ADMIN_TOKEN --config \S+edge\.json/);
    // The internal boundary's secret, on the edge and on every region worker.
    for (const file of ["edge", "region-us-east", "region-eu-west"])
      assert.match(report, new RegExp(`npx wrangler secret put INTERNAL_SECRET --config \\S+${file}\\.json`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the edge's rate limiting binding gets the ceiling derived from the tenants' request limits", () => {
  const root = rootWith((config) => {
    config.tenants[0].rate_limits = { requests_per_minute: 100 };
    config.tenants.push({ id: "other", api_key_sha256: ["b".repeat(64)], regions: ["eu-west"], rate_limits: { requests_per_minute: 150 } });
  });
  const dir = tmp("ceiling");
  try {
    generateDeployment({ root, environment: "production", outDir: dir });
    const edge = readJson(join(dir, "edge.json"));
    // Twice the most one tenant may be granted: 100 a minute in each of two regions beats 150 in one.
    assert.deepEqual(edge.ratelimits, [{ name: "RATE_LIMITER", namespace_id: "1001", simple: { limit: 400, period: 60 } }]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  }
});

test("staging generates its region worker, placed, then its edge", () => {
  const dir = tmp("staging");
  try {
    const deployment = generateDeployment({ root: ROOT, environment: "staging", outDir: dir });
    assert.deepEqual(
      deployment.workers.map((w) => [w.kind, w.name]),
      [
        ["region", "warmpath-staging-region-us-east"],
        ["edge", "warmpath-staging"],
      ],
    );
    for (const w of deployment.workers.filter((w) => w.kind === "region")) assert.equal((w.config.placement as Json).mode, "targeted");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const [what, edit, field] of [
  ["a region without placement", (c: Json) => delete c.regions[0].placement, /regions\.0\.placement: required to deploy/],
  ["an unknown key", (c: Json) => (c.regions[1].placment = c.regions[1].placement), /regions\.1: Unrecognized key: "placment"/],
  [
    "a bad placement",
    (c: Json) => (c.regions[1].placement = { region: "us-east-1" }),
    /regions\.1\.placement\.region: must be provider:region/,
  ],
  ["a bad field", (c: Json) => (c.regions[0].models = []), /regions\.0\.models/],
] as const) {
  test(`${what} is refused, naming the field, and nothing is written or deployed`, async () => {
    const root = rootWith(edit);
    try {
      const { run, ran } = recorder();
      const errors: string[] = [];
      const code = await deploy({ environment: "production", dryRun: false }, { root, run, log: () => {}, error: (l) => errors.push(l) });
      assert.equal(code, 1);
      assert.match(errors.join("\n"), field);
      assert.match(errors.join("\n"), /wrangler\.toml \[env\.production\]/);
      assert.deepEqual(ran, [], "no wrangler run");
      assert.equal(existsSync(join(root, "dist")), false, "nothing generated");
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
}

test("the plan runs every region worker before the edge, with --dry-run into bundles/<worker>", async () => {
  const dir = tmp("plan");
  try {
    const deployment = generateDeployment({ root: ROOT, environment: "production", outDir: dir });
    // Whatever order the workers come in, the edge goes last.
    const steps = planDeploy({ ...deployment, workers: [...deployment.workers].reverse() }, true);
    assert.deepEqual(
      steps.map((s) => s.worker.kind),
      ["region", "region", "edge"],
    );
    for (const s of steps) {
      assert.deepEqual(s.args.slice(0, 3), ["deploy", "--config", s.args[2]]);
      assert.equal(resolve(ROOT, s.args[2]!), s.worker.file);
      assert.deepEqual(s.args.slice(3), ["--dry-run", "--outdir", join(dir, "bundles", s.worker.name)]);
    }
    assert.deepEqual(
      planDeploy(deployment, false).map((s) => s.args.length),
      [3, 3, 3],
      "a real deploy: `deploy --config <file>` only",
    );

    const { run, ran } = recorder();
    const log: string[] = [];
    const errors: string[] = [];
    assert.equal(
      await deploy(
        { environment: "production", dryRun: true },
        { outDir: dir, run, log: (l) => log.push(l), error: (l) => errors.push(l) },
      ),
      0,
    );
    // The placeholder tenant key: a dry run warns, naming the tenant.
    assert.match(
      errors.join("\n"),
      /warning: tenants\.0\.api_key_sha256\.0: tenant 'example' has the hash of the placeholder key "replace-me"/,
    );
    assert.deepEqual(ran, ["warmpath-region-us-east", "warmpath-region-eu-west", "warmpath"]);
    assert.match(log.join("\n"), /wrangler secret put NODE_TOKEN_US_EAST --config/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a failed region worker stops the deploy before the edge, saying what is deployed and what to do", async () => {
  const dir = tmp("failure");
  const root = rootWith(() => {});
  try {
    const { run, ran } = recorder("warmpath-region-eu-west");
    const errors: string[] = [];
    const args = { environment: "production", dryRun: false };
    assert.equal(await deploy(args, { root, outDir: dir, run, log: () => {}, error: (l) => errors.push(l) }), 1);
    assert.deepEqual(ran, ["warmpath-region-us-east", "warmpath-region-eu-west"], "the edge is never deployed");
    const report = errors.join("\n");
    assert.match(report, /deployed: +warmpath-region-us-east \(region us-east\)\n/);
    assert.match(report, /failed: +warmpath-region-eu-west \(region eu-west\)/);
    assert.match(report, /not deployed: +warmpath \(edge\)\n/);
    assert.match(report, /old edge keeps serving/);
    assert.ok(report.includes(CONTRACT_HEADER), "names the contract version header");
    assert.match(report, /run the same command again: npm run deploy -- --env production\n/);
    assert.match(report, /idempotent/);
    assert.match(report, /--secrets-file FILE/, "says how a worker that does not exist yet gets its secrets");

    // The edge itself failing: every region worker is deployed.
    const deployment = generateDeployment({ root: ROOT, environment: "production", outDir: dir });
    const outcome = await runPlan(planDeploy(deployment, false), recorder("warmpath").run);
    assert.deepEqual(
      outcome.done.map((w) => w.name),
      ["warmpath-region-us-east", "warmpath-region-eu-west"],
    );
    assert.deepEqual(outcome.notAttempted, []);
    assert.match(failureReport(args, outcome), /Every region worker is deployed; the old edge keeps serving/);
    assert.match(failureReport({ ...args, dryRun: true }, outcome), /Nothing was uploaded/);
    // The first region worker failing: nothing changed.
    const first = await runPlan(planDeploy(deployment, false), recorder("warmpath-region-us-east").run);
    assert.match(
      failureReport(args, first),
      /deployed: +none\n[^]*not deployed: +warmpath-region-eu-west \(region eu-west\), warmpath \(edge\)\n/,
    );
    assert.match(failureReport(args, first), /Nothing was deployed: the old workers keep serving/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  }
});

test(
  "staging's dry run bundles every worker with wrangler, region worker first (no account, nothing uploaded)",
  { timeout: 60_000 },
  async () => {
    const dir = tmp("dry-run");
    mkdirSync(dir, { recursive: true });
    try {
      const ran: string[] = [];
      const run: Runner = (step) => {
        ran.push(step.worker.name);
        return spawnWrangler(step, { quiet: true });
      };
      const errors: string[] = [];
      const code = await deploy(
        { environment: "staging", dryRun: true },
        { outDir: dir, run, log: () => {}, error: (l) => errors.push(l) },
      );
      assert.equal(code, 0, errors.join("\n"));
      assert.deepEqual(ran, ["warmpath-staging-region-us-east", "warmpath-staging"]);
      for (const name of ran) assert.ok(existsSync(join(dir, "bundles", name, "index.js")), `${name} bundled`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test("the operator's routes reach the edge, limits and observability every worker", () => {
  const root = rootWith(() => {}, {
    editToml: (toml) => {
      toml.env.production.routes = [
        { pattern: "api.example.com", custom_domain: true },
        { pattern: "example.com/v1/*", zone_name: "example.com" },
      ];
      toml.env.production.limits = { cpu_ms: 30_000 };
      toml.env.production.workers_dev = false;
    },
  });
  const dir = tmp("intent");
  try {
    const deployment = generateDeployment({ root, environment: "production", outDir: dir });
    const edge = readJson(join(dir, "edge.json"));
    assert.deepEqual(edge.routes, [
      { pattern: "api.example.com", custom_domain: true },
      { pattern: "example.com/v1/*", zone_name: "example.com" },
    ]);
    assert.equal(edge.workers_dev, false, "the operator's workers_dev");
    for (const w of deployment.workers) {
      // As wrangler reads them: the generated file's JSON.
      const written = readJson(w.file);
      assert.deepEqual(written.limits, { cpu_ms: 30_000 }, w.name);
      assert.deepEqual(written.observability, { enabled: true, traces: { enabled: true } }, w.name);
      if (w.kind === "region") assert.equal(w.config.routes, undefined, "a region worker has no public address");
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  }
});

test("the budget ledger's home is deployed first and bound by every other region worker", () => {
  const root = rootWith((c) => (c.budget_ledger_region = "eu-west"));
  const dir = tmp("ledger");
  try {
    const deployment = generateDeployment({ root, environment: "production", outDir: dir });
    assert.deepEqual(
      deployment.workers.map((w) => w.name),
      ["warmpath-region-eu-west", "warmpath-region-us-east", "warmpath"],
    );
    assert.equal(deployment.workers[0]!.config.services, undefined);
    assert.deepEqual(deployment.workers[1]!.config.services, [{ binding: "BUDGET_LEDGER", service: "warmpath-region-eu-west" }]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  }
});

for (const [what, edit, field, editToml] of [
  [
    "budgets over several regions without budget_ledger_region",
    (c: Json) => (c.tenants[0].budget = { tokens_per_day: 1000 }),
    /budget_ledger_region: required to deploy when a tenant has a budget and there are 2 regions[^]*reordering the regions would silently start an empty ledger/,
  ],
  [
    "an unknown budget_ledger_region",
    (c: Json) => (c.budget_ledger_region = "ap-south"),
    /budget_ledger_region: unknown region 'ap-south'/,
  ],
  [
    "a placement in another area than the object's location hint",
    (c: Json) => (c.regions[1].placement = { region: "aws:us-west-2" }),
    /regions\.1\.placement: region 'eu-west''s worker is placed in aws:us-west-2 \(area "wnam"\) but its Durable Object's location_hint "weur"/,
  ],
  [
    "a configuration over Cloudflare's 5 KB per variable",
    (c: Json) =>
      c.tenants.push(
        ...Array.from({ length: 80 }, (_, i) => ({ id: `t-${i}`, api_key_sha256: [createHash("sha256").update(`k${i}`).digest("hex")] })),
      ),
    /vars\.WARMPATH_CONFIG is [\d,]+ bytes as uploaded, over Cloudflare's 5,120-byte \(5 KB\) limit on one environment variable/,
  ],
  [
    "a custom domain with a path",
    () => {},
    /routes\.0\.pattern: a custom domain is a host name, without wildcard, scheme or path/,
    (t: Json) => (t.env.production.routes = [{ pattern: "api.example.com/v1", custom_domain: true }]),
  ],
  [
    "development mode in a deployed environment",
    (c: Json) => (c.mode = "development"),
    /wrangler\.toml \[env\.production\]: mode: "development" cannot be deployed \(it accepts the public development credentials and allows loopback node origins\)/,
  ],
  [
    "a CPU limit over 5 minutes",
    () => {},
    /limits\.cpu_ms: an integer from 1 to 300000/,
    (t: Json) => (t.env.production.limits = { cpu_ms: 400_000 }),
  ],
] as const) {
  test(`${what} is refused before anything is written`, async () => {
    const root = rootWith(edit, { editToml });
    try {
      const { run, ran } = recorder();
      const errors: string[] = [];
      const code = await deploy({ environment: "production", dryRun: true }, { root, run, log: () => {}, error: (l) => errors.push(l) });
      assert.equal(code, 1);
      assert.match(errors.join("\n"), field);
      assert.deepEqual(ran, []);
      assert.equal(existsSync(join(root, "dist")), false);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
}

test("a placeholder tenant key: refused by a real deploy, a warning in a dry run", async () => {
  const root = rootWith(() => {}, { keepPlaceholders: true });
  try {
    const { run, ran } = recorder();
    const errors: string[] = [];
    assert.equal(await deploy({ environment: "production", dryRun: false }, { root, run, log: () => {}, error: (l) => errors.push(l) }), 1);
    assert.match(errors.join("\n"), /tenants\.0\.api_key_sha256\.0: tenant 'example' has the hash of the placeholder key "replace-me"/);
    assert.deepEqual(ran, []);
    const warned: string[] = [];
    assert.equal(await deploy({ environment: "staging", dryRun: true }, { root, run, log: () => {}, error: (l) => warned.push(l) }), 0);
    assert.match(warned.join("\n"), /warning: tenants\.0\.api_key_sha256\.0: tenant 'staging'[^]*a real deploy refuses a placeholder key/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("--secrets-file: each worker gets only its own secrets; a name no worker needs, or a short internal secret, is refused", async () => {
  const root = rootWith(() => {});
  const files = tmp("secrets");
  try {
    const seen = new Map<string, Record<string, string>>();
    const run: Runner = (step) => {
      const i = step.args.indexOf("--secrets-file");
      seen.set(step.worker.name, i < 0 ? {} : (JSON.parse(readFileSync(step.args[i + 1]!, "utf8")) as Record<string, string>));
      return { ok: true };
    };
    const good = join(files, "good.env");
    writeFileSync(good, `INTERNAL_SECRET=${"i".repeat(40)}\nORIGIN_TOKEN=origin\nADMIN_TOKEN=admin\n`);
    const log: string[] = [];
    assert.equal(
      await deploy(
        { environment: "production", dryRun: false, secretsFile: good },
        { root, run, log: (l) => log.push(l), error: () => {} },
      ),
      0,
    );
    assert.deepEqual(seen.get("warmpath-region-us-east"), { ORIGIN_TOKEN: "origin", INTERNAL_SECRET: "i".repeat(40) });
    assert.deepEqual(seen.get("warmpath"), { ADMIN_TOKEN: "admin", INTERNAL_SECRET: "i".repeat(40) });
    assert.match(log.join("\n"), /warmpath keeps its NODE_TOKEN_US_EAST, NODE_TOKEN_EU_WEST \(not in/);
    assert.doesNotMatch(log.join("\n"), /i{40}|origin"/, "no value printed");
    for (const [content, message] of [
      [`{"INTERNAL_SECRET":"${"i".repeat(40)}","ORIGN_TOKEN":"x"}`, /names ORIGN_TOKEN, which no worker of this environment needs/],
      [`{"INTERNAL_SECRET":"short"}`, /INTERNAL_SECRET is 5 characters, at least 32/],
    ] as const) {
      const bad = join(files, "bad.json");
      writeFileSync(bad, content);
      const errors: string[] = [];
      const { run: r, ran } = recorder();
      assert.equal(
        await deploy(
          { environment: "production", dryRun: false, secretsFile: bad },
          { root, run: r, log: () => {}, error: (l) => errors.push(l) },
        ),
        1,
      );
      assert.match(errors.join("\n"), message);
      assert.deepEqual(ran, []);
    }
  } finally {
    rmSync(files, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  }
});

test("--secrets-file: one value under two names is refused by a real deploy and a warning in a dry run, naming the names, never the value", async () => {
  const root = rootWith(() => {});
  const files = tmp("secrets-reuse");
  // A node token that is also the admin token; and the internal secret reused as a node and an origin token.
  const shared = "node-and-admin-9f3c1a7be2d84c6f0a5e";
  const internal = "k2J9xQv7TzR8wLpY3mN5bH0cXfA6sD1eGiKoUq4jE";
  const reused = join(files, "reused.json");
  writeFileSync(
    reused,
    JSON.stringify({
      INTERNAL_SECRET: internal,
      ADMIN_TOKEN: shared,
      NODE_TOKEN_US_EAST: shared,
      NODE_TOKEN_EU_WEST: internal,
      ORIGIN_TOKEN: internal,
    }),
  );
  const noValue = (output: string) => {
    for (const value of [shared, internal])
      for (let i = 0; i + 6 <= value.length; i++)
        assert.ok(!output.includes(value.slice(i, i + 6)), `part of a value (${i}..${i + 6}) in: ${output}`);
  };
  try {
    const { run, ran } = recorder();
    const lines: string[] = [];
    const out = { log: (l: string) => lines.push(l), error: (l: string) => lines.push(l) };
    assert.equal(await deploy({ environment: "production", dryRun: false, secretsFile: reused }, { root, run, ...out }), 1);
    const refused = lines.join("\n");
    assert.match(refused, /ADMIN_TOKEN and NODE_TOKEN_US_EAST hold the same value/);
    assert.match(refused, /INTERNAL_SECRET, NODE_TOKEN_EU_WEST and ORIGIN_TOKEN hold the same value/);
    assert.match(refused, /Nothing was uploaded/);
    assert.deepEqual(ran, []);
    noValue(refused);

    lines.length = 0;
    assert.equal(await deploy({ environment: "production", dryRun: true, secretsFile: reused }, { root, run, ...out }), 0);
    const warned = lines.join("\n");
    assert.match(
      warned,
      /warning: --secrets-file: ADMIN_TOKEN and NODE_TOKEN_US_EAST hold the same value[^\n]*\(a real deploy refuses a value under two names\)/,
    );
    assert.match(warned, /warning: --secrets-file: INTERNAL_SECRET, NODE_TOKEN_EU_WEST and ORIGIN_TOKEN hold the same value/);
    assert.equal(ran.length, 3, "the dry run went on");
    noValue(warned);
  } finally {
    rmSync(files, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  }
});

test("a deployed environment's var named as a secret is refused by a deploy and a dry run, naming the var, never its value", async () => {
  const origin = "origin-9f3c1a7be2d84c6f0a5e";
  const admin = "admin-Zm9vYmFyYmF6cXV4UXdl";
  const root = rootWith(() => {}, {
    editToml: (t) => Object.assign(t.env.production.vars, { ORIGIN_TOKEN: origin, ADMIN_TOKEN: admin, LOG_FORMAT: "json" }),
  });
  try {
    for (const dryRun of [false, true]) {
      const { run, ran } = recorder();
      const errors: string[] = [];
      assert.equal(await deploy({ environment: "production", dryRun }, { root, run, log: () => {}, error: (l) => errors.push(l) }), 1);
      const message = errors.join("\n");
      assert.match(message, /vars\.ORIGIN_TOKEN: named as a secret \(regions\.0\.origin_token_secret\), so it must not be a var/);
      assert.match(message, /vars\.ADMIN_TOKEN: named as a secret \(admin_token_secret\)/);
      assert.doesNotMatch(message, /LOG_FORMAT/, "a var that is no secret's name is carried");
      assert.ok(!message.includes(origin) && !message.includes(admin), `no value: ${message}`);
      for (const part of [origin.slice(-8), admin.slice(-8)]) assert.ok(!message.includes(part), "no part of a value");
      assert.deepEqual(ran, []);
      assert.equal(existsSync(join(root, "dist")), false, "nothing written: the values are in no generated file");
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  // The top level (`npm start`) keeps its development credentials as vars, standing in for the secrets.
  const dir = tmp("local");
  try {
    const local = generateDeployment({ root: ROOT, environment: undefined, outDir: dir });
    const edge = local.workers.find((w) => w.kind === "edge")!;
    assert.equal((edge.config.vars as Json).ADMIN_TOKEN, "wp-dev-admin-token-local-only");
    assert.ok(!edge.secrets.includes("ADMIN_TOKEN"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("WARMPATH_CONFIG as a JSON string is generated as a table is; a string that is not JSON is refused by its position", () => {
  const asString = (t: Json) => (t.env.production.vars.WARMPATH_CONFIG = JSON.stringify(t.env.production.vars.WARMPATH_CONFIG, null, 2));
  const root = rootWith(() => {}, { editToml: asString });
  const table = rootWith(() => {});
  const dir = tmp("string-config");
  const tableDir = tmp("table-config");
  try {
    const deployment = generateDeployment({ root, environment: "production", outDir: dir, placeholderKeys: "refuse" });
    const expected = generateDeployment({ root: table, environment: "production", outDir: tableDir, placeholderKeys: "refuse" });
    assert.deepEqual(deployment.config, expected.config);
    assert.deepEqual(
      deployment.workers.map((w) => [w.name, w.secrets]),
      expected.workers.map((w) => [w.name, w.secrets]),
    );
    // Uploaded as written (a plain-text var; the worker parses it: src/config/load.ts).
    const edge = readJson(join(dir, "edge.json"));
    assert.equal(typeof edge.vars.WARMPATH_CONFIG, "string");
    assert.deepEqual(JSON.parse(edge.vars.WARMPATH_CONFIG), readJson(join(tableDir, "edge.json")).vars.WARMPATH_CONFIG);
    assert.equal(readJson(join(dir, "region-us-east.json")).vars.WARMPATH_CONFIG, edge.vars.WARMPATH_CONFIG);
  } finally {
    for (const d of [dir, tableDir, root, table]) rmSync(d, { recursive: true, force: true });
  }

  const secret = "tok-7Hq2Lm9Xv4";
  const broken = rootWith(() => {}, {
    editToml: (t) => (t.env.production.vars.WARMPATH_CONFIG = `{\n  "mode": "production",\n  "admin_token_secret": ${secret}\n}`),
  });
  try {
    assert.throws(
      () => generateDeployment({ root: broken, environment: "production", outDir: join(broken, "out") }),
      (e: Error) =>
        e instanceof DeployConfigError &&
        /^wrangler\.toml \[env\.production\]: vars\.WARMPATH_CONFIG is a string but not valid JSON at line 3, column 25 /.test(e.message) &&
        !e.message.includes(secret.slice(0, 6)),
    );
  } finally {
    rmSync(broken, { recursive: true, force: true });
  }
});

test("an environment without vars.WARMPATH_CONFIG is refused, saying a deploy needs it in vars (not a secret)", () => {
  const root = rootWith(() => {}, { editToml: (t) => delete t.env.production.vars.WARMPATH_CONFIG });
  try {
    assert.throws(
      () => generateDeployment({ root, environment: "production", outDir: join(root, "out") }),
      (e: Error) =>
        e instanceof DeployConfigError &&
        /vars\.WARMPATH_CONFIG is missing: a deploy needs the configuration in the environment's vars \(a table, or a JSON string\); one kept as a secret cannot be read/.test(
          e.message,
        ),
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("development mode is refused by a real deploy too, and stays the top level's for `npm start`", async () => {
  const root = rootWith((c) => (c.mode = "development"));
  try {
    const { run, ran } = recorder();
    const errors: string[] = [];
    assert.equal(await deploy({ environment: "production", dryRun: false }, { root, run, log: () => {}, error: (l) => errors.push(l) }), 1);
    assert.match(errors.join("\n"), /mode: "development" cannot be deployed/);
    assert.deepEqual(ran, []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  const dir = tmp("local-mode");
  try {
    assert.equal(generateDeployment({ root: ROOT, environment: undefined, outDir: dir }).config.mode, "development");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
