/**
 * One wrangler configuration per worker, generated from the one description of a deployment in
 * wrangler.toml (an environment's WARMPATH_CONFIG and bindings): the edge worker, and one worker
 * per region placed by that region's GPUs (src/contracts/topology.ts names them all).
 *
 *     edge    <name>                 src/edge/index.ts    assets, rate limiter, analytics,
 *                                                          REGION_WORKER_<REGION> -> each region worker
 *     region  <name>-region-<region> src/region/index.ts  placement from regions[].placement,
 *                                                          the REGION Durable Object, analytics,
 *                                                          WARMPATH_REGION = <region>, no public address,
 *                                                          BUDGET_LEDGER -> the ledger home's worker
 *                                                          (every region but budget_ledger_region)
 *
 * What the operator wrote in the environment is carried, not dropped: `routes` (custom domains
 * included) and `workers_dev` to the edge, the only worker with a public address; `limits` and
 * `observability` to every worker (each is a Worker of its own, billed and logged as one).
 * Checked before anything is written (./checks.ts): WARMPATH_CONFIG within Cloudflare's 5 KB per
 * variable, each region's placement in its Durable Object's location hint area, the budget
 * ledger's home named when budgets span several regions, no `mode = "development"`, no var named
 * as one of the configuration's secrets (its value would be written here in plaintext, and go to
 * workers that must not hold it), and no placeholder key (refused for a real deploy, a warning for
 * a dry run).
 *
 * Every worker needs the secret INTERNAL_SECRET (the same value on all of them: the edge signs
 * what it sends a region worker with it, a region object its spend batches; docs/DEPLOY.md).
 *
 * The warmpath configuration is validated first with the worker's own schema; an invalid one
 * throws a {@link DeployConfigError} naming the field, before anything is written or uploaded.
 * Used by `npm run deploy` (scripts/deploy.ts), `npm start` (scripts/system.ts: the top level,
 * `environment: undefined`, as separate local workers) and bench:wan.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { parse } from "smol-toml";
import { EDGE_CEILING_PERIOD_SECONDS, edgeCeilingPerMinute } from "../../src/config/edge-ceiling.ts";
import { budgetLedgerRegion } from "../../src/config/ledger-home.ts";
import { configSchema, describeIssues, type WarmpathConfig } from "../../src/config/schema.ts";
import {
  BUDGET_LEDGER_BINDING,
  MAX_WORKER_NAME_LENGTH,
  REGION_VAR,
  regionBindingName,
  regionWorkerName,
  VERSION_METADATA_BINDING,
} from "../../src/contracts/topology.ts";
import { INTERNAL_SECRET_VAR } from "../../src/core/internal-auth.ts";
import {
  checkConfigSize,
  checkDevelopmentMode,
  checkLedgerHome,
  checkPlaceholderKeys,
  checkPlacementHints,
  checkSecretVars,
  type Findings,
} from "./checks.ts";
import { atJsonError } from "./json-position.ts";
import { checkLimits, checkRoutes, type Route } from "./routes.ts";

export class DeployConfigError extends Error {}

/** What wrangler.toml says of one environment (or the top level), as far as generation reads it. */
interface TomlEnvironment {
  name?: string;
  compatibility_date?: string;
  compatibility_flags?: string[];
  observability?: Record<string, unknown>;
  routes?: Route[];
  workers_dev?: boolean;
  limits?: Record<string, unknown>;
  assets?: { directory?: string; run_worker_first?: boolean | string[] };
  vars?: Record<string, unknown>;
  analytics_engine_datasets?: Array<{ binding: string; dataset: string }>;
  ratelimits?: Array<Record<string, unknown>>;
  migrations?: Array<Record<string, unknown>>;
  env?: Record<string, TomlEnvironment>;
}

export interface GeneratedWorker {
  kind: "edge" | "region";
  /** The region a region worker serves. */
  region?: string;
  /** The Worker's name on Cloudflare. */
  name: string;
  /** The generated configuration file (JSON, which wrangler reads as it reads TOML). */
  file: string;
  /** Secrets the worker needs (`wrangler secret put NAME --config FILE`). */
  secrets: string[];
  config: Record<string, unknown>;
}

export interface Deployment {
  /** The environment (undefined: wrangler.toml's top level, the local development configuration). */
  environment: string | undefined;
  config: WarmpathConfig;
  /** Region workers first (they deploy first), the edge last. */
  workers: GeneratedWorker[];
  dir: string;
  /** What was checked and is worth saying but not refused (printed by the deploy). */
  warnings: string[];
}

export interface GenerateOptions {
  root: string;
  /** An environment of wrangler.toml (`production`, `staging`), or undefined for its top level. */
  environment: string | undefined;
  /** Where the files go. Default: `<root>/dist/deploy/<environment or "local">`. */
  outDir?: string;
  /** Require every region to name its placement (a deploy does; local runs do not). Default: true for an environment. */
  requirePlacement?: boolean;
  /** Replaces the environment's WARMPATH_CONFIG (local runs with another policy or fleet). */
  warmpathConfig?: unknown;
  /**
   * Tenants with a placeholder key (`replace-me`): `refuse` (a real deploy), `warn` (a dry run).
   * Default: `warn` (local runs use the public development keys on purpose).
   */
  placeholderKeys?: "refuse" | "warn";
}

const EDGE_MAIN = "src/edge/index.ts";
const REGION_MAIN = "src/region/index.ts";

/** Reads wrangler.toml and the environment's section (named environments do not inherit vars or bindings). */
function section(root: string, environment: string | undefined): { top: TomlEnvironment; env: TomlEnvironment } {
  const top = parse(readFileSync(join(root, "wrangler.toml"), "utf8")) as TomlEnvironment;
  if (environment === undefined) return { top, env: top };
  const env = top.env?.[environment];
  if (!env)
    throw new DeployConfigError(`wrangler.toml has no [env.${environment}] (environments: ${Object.keys(top.env ?? {}).join(", ")})`);
  return { top, env };
}

/**
 * The environment's WARMPATH_CONFIG as the worker reads it (src/config/load.ts): a table, or a JSON
 * string (parsed here). A parse error says where only: the string may hold anything.
 */
function warmpathConfigDocument(raw: unknown, where: string): unknown {
  // The generator reads wrangler.toml only: a configuration kept as a secret (docs/CONFIGURATION.md)
  // cannot be read, and every worker's bindings, placement and secrets are derived from it.
  if (raw === undefined)
    throw new DeployConfigError(
      `${where}: vars.WARMPATH_CONFIG is missing: a deploy needs the configuration in the environment's vars (a table, or a JSON string); one kept as a secret cannot be read, and every worker is generated from it (docs/DEPLOY.md)`,
    );
  if (typeof raw !== "string") return raw;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    throw new DeployConfigError(
      `${where}: vars.WARMPATH_CONFIG is a string but not valid JSON${atJsonError(raw)} (its content is not shown)`,
    );
  }
}

/** Validates the warmpath configuration (a table or a JSON string) with the worker's own schema, naming every bad field. */
export function validateWarmpathConfig(raw: unknown, where: string): WarmpathConfig {
  const doc = warmpathConfigDocument(raw, where);
  const parsed = configSchema.safeParse(doc);
  if (!parsed.success) throw new DeployConfigError(`${where}: WARMPATH_CONFIG is invalid: ${describeIssues(parsed.error)}`);
  const cfg = parsed.data;
  const problems: string[] = [];
  for (const [i, t] of cfg.tenants.entries())
    for (const r of t.regions ?? [])
      if (!cfg.regions.some((region) => region.name === r)) problems.push(`tenants.${i}.regions: unknown region '${r}'`);
  for (const [i, r] of cfg.regions.entries())
    for (const [node, ids] of Object.entries(r.node_tenants))
      for (const id of ids)
        if (!cfg.tenants.some((t) => t.id === id)) problems.push(`regions.${i}.node_tenants.${node}: unknown tenant '${id}'`);
  if (problems.length) throw new DeployConfigError(`${where}: WARMPATH_CONFIG is incomplete: ${problems.join("; ")}`);
  return cfg;
}

/** The edge's rate limiting binding (src/edge/api/inference.ts). */
const EDGE_RATE_LIMITER = "RATE_LIMITER";

/**
 * The edge's `RATE_LIMITER` binding with its limit derived from the configuration
 * (src/config/edge-ceiling.ts); wrangler.toml gives its name and namespace only. No tenant with a
 * request limit: no binding (the edge then counts nobody).
 */
function edgeRateLimits(declared: TomlEnvironment["ratelimits"], config: WarmpathConfig): { ratelimits?: Array<Record<string, unknown>> } {
  if (!declared) return {};
  const ceiling = edgeCeilingPerMinute(config);
  const out = declared.flatMap((r) =>
    r.name !== EDGE_RATE_LIMITER
      ? [r]
      : ceiling === undefined
        ? []
        : [{ ...r, simple: { limit: ceiling, period: EDGE_CEILING_PERIOD_SECONDS } }],
  );
  return out.length ? { ratelimits: out } : {};
}

/** Wrangler's targeted placement for a region's configured placement. */
function placementOf(p: NonNullable<WarmpathConfig["regions"][number]["placement"]>): Record<string, string> {
  if ("region" in p) return { mode: "targeted", region: p.region };
  if ("hostname" in p) return { mode: "targeted", hostname: p.hostname };
  return { mode: "targeted", host: p.host };
}

/** Generates (and writes) every worker's configuration of one environment. */
export function generateDeployment(options: GenerateOptions): Deployment {
  const { root, environment } = options;
  const label = environment === undefined ? "wrangler.toml (top level)" : `wrangler.toml [env.${environment}]`;
  const { top, env } = section(root, environment);
  // As written (a table or a JSON string): what is uploaded, and measured against the 5 KB limit.
  const warmpathConfigRaw = options.warmpathConfig ?? env.vars?.WARMPATH_CONFIG;
  const config = validateWarmpathConfig(warmpathConfigRaw, label);
  const requirePlacement = options.requirePlacement ?? environment !== undefined;
  const edgeName = env.name ?? top.name;
  if (!edgeName) throw new DeployConfigError(`${label}: name is missing`);
  const problems: string[] = [];
  config.regions.forEach((r, i) => {
    if (requirePlacement && !r.placement) {
      problems.push(
        `regions.${i}.placement: required to deploy (region '${r.name}'): where its worker runs, by its GPUs, e.g. { region = "aws:us-east-1" }`,
      );
    }
    const name = regionWorkerName(edgeName, r.name);
    if (name.length > MAX_WORKER_NAME_LENGTH)
      problems.push(`regions.${i}.name: worker name '${name}' is over ${MAX_WORKER_NAME_LENGTH} characters`);
  });
  const routes = env.routes;
  const limits = env.limits ?? top.limits;
  // Local runs (`npm start`, benches with fleets of their own) are not on Cloudflare: no 5 KB limit
  // there, and their regions are not placed. Nor are development mode and secrets as plain vars
  // refused: `npm start` runs the top level's, in development mode with the development credentials
  // as vars (ADMIN_TOKEN, NODE_TOKEN_DEV).
  const findings: Findings[] = [
    checkRoutes(routes),
    checkLimits(limits),
    ...(environment === undefined
      ? []
      : [
          checkConfigSize(warmpathConfigRaw, label),
          checkDevelopmentMode(config),
          checkSecretVars(env.vars, config),
          checkPlacementHints(config),
          checkLedgerHome(config),
          checkPlaceholderKeys(config, options.placeholderKeys === "refuse"),
        ]),
  ];
  problems.push(...findings.flatMap((f) => f.problems));
  const warnings = findings.flatMap((f) => f.warnings);
  if (problems.length) throw new DeployConfigError(`${label}: ${problems.join("; ")}`);

  const dir = options.outDir ?? join(root, "dist", "deploy", environment ?? "local");
  const fromDir = (path: string) => relative(dir, join(root, path)) || ".";
  const common = {
    compatibility_date: env.compatibility_date ?? top.compatibility_date,
    ...((env.compatibility_flags ?? top.compatibility_flags)
      ? { compatibility_flags: env.compatibility_flags ?? top.compatibility_flags }
      : {}),
    ...((env.observability ?? top.observability) ? { observability: env.observability ?? top.observability } : {}),
    ...(limits ? { limits } : {}),
  };
  // Every other var goes to the edge; the warmpath configuration to both. A var named as a secret
  // is a development credential of the top level (a deployed environment's is refused above):
  // there it stands in for the secret.
  const otherVars = Object.fromEntries(Object.entries(env.vars ?? {}).filter(([k]) => k !== "WARMPATH_CONFIG"));
  const warmpathConfig = warmpathConfigRaw;

  // The budget ledger lives in its home region's worker's namespace; the others reach it there, so
  // that worker is generated (and deployed) first: a service binding's target must exist.
  const ledgerRegion = budgetLedgerRegion(config);
  const ledgerHome = regionWorkerName(edgeName, ledgerRegion);
  const inOrder = [...config.regions.filter((r) => r.name === ledgerRegion), ...config.regions.filter((r) => r.name !== ledgerRegion)];
  const regions: GeneratedWorker[] = inOrder.map((r) => {
    const name = regionWorkerName(edgeName, r.name);
    return {
      kind: "region",
      region: r.name,
      name,
      file: join(dir, `region-${r.name}.json`),
      // INTERNAL_SECRET: the internal boundary's (docs/SECURITY.md), the same value on every worker.
      secrets: [...(r.origin_token_secret ? [r.origin_token_secret] : []), INTERNAL_SECRET_VAR],
      config: {
        name,
        main: fromDir(REGION_MAIN),
        ...common,
        // Reached only through the edge's service binding: no workers.dev address, no preview URLs.
        workers_dev: false,
        preview_urls: false,
        ...(r.placement ? { placement: placementOf(r.placement) } : {}),
        durable_objects: { bindings: [{ name: "REGION", class_name: "RegionDurableObject" }] },
        // The version's upload time orders two versions' inits in a gradual deployment (durable-objects/init-order.ts).
        version_metadata: { binding: VERSION_METADATA_BINDING },
        ...(name === ledgerHome ? {} : { services: [{ binding: BUDGET_LEDGER_BINDING, service: ledgerHome }] }),
        migrations: env.migrations ?? top.migrations ?? [{ tag: "v1", new_sqlite_classes: ["RegionDurableObject"] }],
        ...(env.analytics_engine_datasets ? { analytics_engine_datasets: env.analytics_engine_datasets } : {}),
        // Of the other vars, only its own origin token (locally: a development value) if it is one.
        vars: {
          ...Object.fromEntries(Object.entries(otherVars).filter(([k]) => k === r.origin_token_secret)),
          WARMPATH_CONFIG: warmpathConfig,
          [REGION_VAR]: r.name,
        },
      },
    };
  });
  const nodeTokenSecrets = [
    ...new Set(config.regions.flatMap((r) => (typeof r.node_token_secret === "string" ? [r.node_token_secret] : r.node_token_secret))),
  ];
  const edge: GeneratedWorker = {
    kind: "edge",
    name: edgeName,
    file: join(dir, "edge.json"),
    secrets: [...nodeTokenSecrets, config.admin_token_secret, INTERNAL_SECRET_VAR].filter((s) => !(s in otherVars)),
    config: {
      name: edgeName,
      main: fromDir(EDGE_MAIN),
      ...common,
      ...(environment === undefined ? {} : { workers_dev: env.workers_dev ?? true }),
      ...(routes?.length ? { routes } : {}),
      assets: {
        directory: fromDir((env.assets ?? top.assets)?.directory ?? "public"),
        ...((env.assets ?? top.assets)?.run_worker_first !== undefined
          ? { run_worker_first: (env.assets ?? top.assets)!.run_worker_first }
          : {}),
      },
      ...(env.analytics_engine_datasets ? { analytics_engine_datasets: env.analytics_engine_datasets } : {}),
      ...edgeRateLimits(env.ratelimits, config),
      services: regions.map((r) => ({ binding: regionBindingName(r.region!), service: r.name })),
      vars: { ...otherVars, WARMPATH_CONFIG: warmpathConfig },
    },
  };
  const workers = [...regions, edge];
  // Deployed: wrangler knows each worker's secrets (its `secrets.required`), so a name that is
  // declared and never set shows before the worker answers 500 for it. Locally they are vars.
  if (environment !== undefined) for (const w of workers) if (w.secrets.length) w.config.secrets = { required: w.secrets };
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const w of workers) writeFileSync(w.file, JSON.stringify(w.config, null, 2) + "\n");
  writeFileSync(
    join(dir, "deployment.json"),
    JSON.stringify(
      {
        generated_from: label,
        note: "Generated by scripts/deploy/generate.ts; edit wrangler.toml, not these files.",
        environment: environment ?? null,
        order: workers.map((w) => ({ kind: w.kind, region: w.region, name: w.name, file: relative(dir, w.file), secrets: w.secrets })),
      },
      null,
      2,
    ) + "\n",
  );
  return { environment, config, workers, dir, warnings };
}
