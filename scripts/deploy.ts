/**
 * `npm run deploy -- --env production [--secrets-file FILE] [--dry-run]` (or `--env staging`):
 * deploys one environment of wrangler.toml as its workers (docs/DEPLOY.md).
 *
 *  1. generate one wrangler configuration per worker into dist/deploy/<env>/ (scripts/deploy/generate.ts);
 *     an invalid configuration stops here, naming the field, before anything is uploaded (exit 1);
 *     so does a placeholder tenant key, except in a dry run (a warning);
 *  2. `wrangler deploy --config <file> [--secrets-file <that worker's secrets>]` for the budget
 *     ledger's home region worker, the other region workers, then the edge (`--dry-run --outdir
 *     dist/deploy/<env>/bundles/<worker>` with --dry-run: bundled and checked, nothing uploaded, no
 *     account needed);
 *  3. stop at the first failure, saying which workers are deployed and which are not, and what to do;
 *  4. say which secrets went with the deploy and which each worker keeps from before.
 *
 * The order is what a fresh account needs (checked against a stand-in of the Cloudflare API by
 * scripts/test/deploy-standin.test.ts): a worker is created with its secrets (wrangler refuses to
 * create one whose `secrets.required` are not set: scripts/deploy/secrets.ts), and a service
 * binding's target exists before the worker that binds it (the ledger home before the other
 * region workers, every region worker before the edge). Region workers first also suits updates: a
 * region worker serves every edge contract version from MIN_REGION_CONTRACT_VERSION to its own
 * (src/contracts/region-service.ts), so the old edge keeps working with new region workers.
 *
 * The pure part (arguments, plan, reports, {@link deploy} with an injected runner) is tested in
 * scripts/test/deploy.test.ts; {@link spawnWrangler} is the only part that runs wrangler.
 */
import { spawn } from "node:child_process";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { CONTRACT_HEADER, MIN_REGION_CONTRACT_VERSION, REGION_CONTRACT_VERSION } from "../src/contracts/region-service.ts";
import { DeployConfigError, generateDeployment, type Deployment, type GeneratedWorker } from "./deploy/generate.ts";
import { checkSecrets, missingFor, readSecretsFile, SecretsFileError, writeWorkerSecrets } from "./deploy/secrets.ts";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
/** wrangler's own entry, run with this Node (the `node_modules/.bin` shim would take the first `node` on PATH). */
const WRANGLER = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");

export const USAGE = "usage: npm run deploy -- --env <production|staging> [--secrets-file FILE] [--dry-run]";

export class UsageError extends Error {}

export interface DeployArgs {
  /** An environment of wrangler.toml. */
  environment: string;
  /** Bundle and check every worker, upload nothing. */
  dryRun: boolean;
  /** The secrets' values (JSON or dotenv), uploaded with each worker that needs them. */
  secretsFile?: string;
}

export function parseDeployArgs(argv: string[]): DeployArgs {
  let values: { env?: string; "dry-run"?: boolean; "secrets-file"?: string };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { env: { type: "string" }, "dry-run": { type: "boolean" }, "secrets-file": { type: "string" } },
      strict: true,
    }));
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (!values.env) throw new UsageError("--env is required (an environment of wrangler.toml, e.g. production or staging)");
  return {
    environment: values.env,
    dryRun: values["dry-run"] ?? false,
    ...(values["secrets-file"] ? { secretsFile: values["secrets-file"] } : {}),
  };
}

/**
 * One `wrangler` run: its worker and its arguments (run from the root: the configuration's path is
 * relative to it; --outdir is absolute, as wrangler resolves it against the configuration's directory).
 */
export interface Step {
  worker: GeneratedWorker;
  args: string[];
}

/**
 * Every region worker (the generator lists the ledger home first), then the edge: the edge never
 * goes before every region worker succeeded. `secretFiles`: each worker's own secrets file.
 */
export function planDeploy(deployment: Deployment, dryRun: boolean, root: string = ROOT, secretFiles = new Map<string, string>()): Step[] {
  const ordered = [...deployment.workers.filter((w) => w.kind === "region"), ...deployment.workers.filter((w) => w.kind === "edge")];
  return ordered.map((worker) => ({
    worker,
    args: [
      "deploy",
      "--config",
      relative(root, worker.file),
      ...(dryRun ? ["--dry-run", "--outdir", resolve(deployment.dir, "bundles", worker.name)] : []),
      ...(!dryRun && secretFiles.has(worker.name) ? ["--secrets-file", secretFiles.get(worker.name)!] : []),
    ],
  }));
}

/** Runs one step: whether it succeeded, and if not how it ended (`exit 1`). */
export type Result = { ok: true } | { ok: false; detail: string };
export type Runner = (step: Step) => Result | Promise<Result>;

export interface Outcome {
  /** Deployed (or, in a dry run, checked), in order. */
  done: GeneratedWorker[];
  failed?: { worker: GeneratedWorker; detail: string };
  /** Not attempted, in order. */
  notAttempted: GeneratedWorker[];
}

/** Runs the steps in order and stops at the first failure. */
export async function runPlan(steps: Step[], run: Runner): Promise<Outcome> {
  const done: GeneratedWorker[] = [];
  for (const [i, step] of steps.entries()) {
    const result = await run(step);
    if (!result.ok)
      return { done, failed: { worker: step.worker, detail: result.detail }, notAttempted: steps.slice(i + 1).map((s) => s.worker) };
    done.push(step.worker);
  }
  return { done, notAttempted: [] };
}

const label = (w: GeneratedWorker) => (w.kind === "edge" ? `${w.name} (edge)` : `${w.name} (region ${w.region})`);
const list = (ws: GeneratedWorker[]) => (ws.length ? ws.map(label).join(", ") : "none");
const command = (args: DeployArgs) =>
  `npm run deploy -- --env ${args.environment}${args.secretsFile ? ` --secrets-file ${args.secretsFile}` : ""}${args.dryRun ? " --dry-run" : ""}`;

export function planReport(args: DeployArgs, steps: Step[]): string {
  const what = args.dryRun ? "Dry run (bundle and check, upload nothing)" : "Deploying";
  return [
    `${what}: ${args.environment}, region workers first (the budget ledger's home first of all), the edge last:`,
    ...steps.map((s, i) => `  ${i + 1}. ${label(s.worker)}`),
  ].join("\n");
}

/**
 * The secrets each worker needs (secrets are per worker: two workers using ORIGIN_TOKEN each need
 * it): which went with this deploy (`given`: the secrets file's names), which each worker keeps
 * from its previous version, and the command that changes one later.
 */
export function secretsReport(steps: Step[], root: string = ROOT, given: ReadonlySet<string> = new Set()): string {
  const rows = steps.flatMap((s) =>
    s.worker.secrets.map(
      (name) => [`npx wrangler secret put ${name} --config ${relative(root, s.worker.file)}`, s.worker.name, given.has(name)] as const,
    ),
  );
  if (!rows.length) return "Secrets: none needed.";
  const width = Math.max(...rows.map(([c]) => c.length));
  const lines = rows.map(([c, worker, sent]) => `  ${c.padEnd(width)}  # ${worker}${sent ? ", set by this deploy" : ""}`);
  return [
    "Secrets each worker needs (they persist across deploys). A worker's first deploy needs them all, in --secrets-file FILE",
    "(docs/DEPLOY.md); later, a name the file lacks keeps its value. To change one on its own:",
    ...lines,
  ].join("\n");
}

export function failureReport(args: DeployArgs, outcome: Outcome, root: string = ROOT): string {
  const { failed, done, notAttempted } = outcome;
  if (!failed) return "";
  if (args.dryRun)
    return [
      `Dry run of ${args.environment} failed for ${label(failed.worker)}: ${failed.detail}. Nothing was uploaded.`,
      `Checked: ${list(done)}. Not checked: ${list(notAttempted)}.`,
    ].join("\n");
  const traffic =
    failed.worker.kind === "edge"
      ? "Every region worker is deployed; the old edge keeps serving, with them."
      : done.length
        ? "The edge was not deployed (it never goes before every region worker succeeded): the old edge keeps serving, with region workers new and old."
        : "Nothing was deployed: the old workers keep serving.";
  return [
    `Deploy of ${args.environment} stopped: wrangler deploy failed for ${label(failed.worker)}: ${failed.detail}.`,
    `  deployed:      ${list(done)}`,
    `  failed:        ${label(failed.worker)}: its previous version, if any, should still serve`,
    `                 (npx wrangler deployments list --config ${relative(root, failed.worker.file)})`,
    `  not deployed:  ${list(notAttempted)}`,
    traffic,
    `That is safe: every edge->region request carries the edge's contract version (${CONTRACT_HEADER}), and a region`,
    `worker serves versions MIN..CURRENT (${MIN_REGION_CONTRACT_VERSION}..${REGION_CONTRACT_VERSION} here, src/contracts/region-service.ts), so new region workers serve the old edge.`,
    `What to do: fix the cause (wrangler's output above), then run the same command again: ${command(args)}`,
    "Deploying is idempotent: workers already deployed are deployed again unchanged, and the edge goes last again.",
    ...(args.secretsFile
      ? []
      : [
          "If wrangler said the required secrets have not been set: a worker that does not exist yet is created with its secrets,",
          `so give their values: ${command(args)} --secrets-file FILE (JSON {"NAME":"value"}; docs/DEPLOY.md, "Secrets, per worker").`,
        ]),
    "To go back instead: docs/DEPLOY.md, Rollback (the edge first).",
  ].join("\n");
}

export interface DeployOptions {
  root?: string;
  /** Where the configurations (and a dry run's bundles) go. Default: `<root>/dist/deploy/<env>`. */
  outDir?: string;
  run: Runner;
  log?: (line: string) => void;
  error?: (line: string) => void;
}

/** Generates, plans and runs one environment's deployment; returns the exit code. */
export async function deploy(args: DeployArgs, options: DeployOptions): Promise<number> {
  const root = options.root ?? ROOT;
  const log = options.log ?? console.log;
  const error = options.error ?? console.error;
  let deployment: Deployment;
  try {
    deployment = generateDeployment({
      root,
      environment: args.environment,
      outDir: options.outDir,
      placeholderKeys: args.dryRun ? "warn" : "refuse",
    });
  } catch (e) {
    if (!(e instanceof DeployConfigError)) throw e;
    error(`deploy: ${e.message}`);
    error("Nothing was generated or uploaded: fix wrangler.toml and run it again.");
    return 1;
  }
  for (const w of deployment.warnings) error(`deploy: warning: ${w}`);
  let secrets: Record<string, string> = {};
  try {
    if (args.secretsFile)
      for (const w of checkSecrets((secrets = readSecretsFile(resolve(args.secretsFile))), deployment.workers, !args.dryRun))
        error(`deploy: warning: ${w}`);
  } catch (e) {
    if (!(e instanceof SecretsFileError)) throw e;
    error(`deploy: ${e.message}`);
    error("Nothing was uploaded.");
    return 1;
  }
  log(`Generated ${relative(root, deployment.dir)}/ (deployment.json: the order and each worker's secrets).`);
  const written = writeWorkerSecrets(secrets, args.dryRun ? [] : deployment.workers);
  const steps = planDeploy(deployment, args.dryRun, root, written.files);
  log(planReport(args, steps));
  if (args.secretsFile && !args.dryRun)
    for (const s of steps) {
      const inherited = missingFor(s.worker, secrets);
      if (inherited.length)
        log(`  ${s.worker.name} keeps its ${inherited.join(", ")} (not in ${args.secretsFile}: set before, or its deploy fails)`);
    }
  let outcome: Outcome;
  try {
    outcome = await runPlan(steps, options.run);
  } finally {
    written.remove();
  }
  if (outcome.failed) {
    error(failureReport(args, outcome, root));
    return 1;
  }
  log(
    args.dryRun
      ? `Dry run of ${args.environment} passed: ${list(outcome.done)}; bundles in ${relative(root, join(deployment.dir, "bundles"))}/.`
      : `Deployed ${args.environment}: ${list(outcome.done)}.`,
  );
  log(secretsReport(steps, root, new Set(args.dryRun ? [] : Object.keys(secrets))));
  return 0;
}

/**
 * Runs `wrangler <args>` from the root with this Node, its output on the terminal (`quiet`: only a
 * failure's, in its detail). `env`: wrangler's environment (a test's points it at the stand-in API).
 */
export function spawnWrangler(step: Step, options: { root?: string; quiet?: boolean; env?: NodeJS.ProcessEnv } = {}): Promise<Result> {
  if (!options.quiet) console.log(`\n$ wrangler ${step.args.join(" ")}`);
  return new Promise((resolvePromise) => {
    const child = spawn(process.execPath, [WRANGLER, ...step.args], {
      cwd: options.root ?? ROOT,
      stdio: options.quiet ? ["ignore", "pipe", "pipe"] : "inherit",
      env: options.env ?? process.env,
    });
    let output = "";
    child.stdout?.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", (e) => resolvePromise({ ok: false, detail: e.message }));
    child.on("close", (code, signal) => {
      if (code === 0) return resolvePromise({ ok: true });
      const how = signal ? `signal ${signal}` : `exit ${code}`;
      resolvePromise({ ok: false, detail: options.quiet ? `${how}: ${output}`.trim() : how });
    });
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  let args: DeployArgs;
  try {
    args = parseDeployArgs(process.argv.slice(2));
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    console.error(`deploy: ${e.message}\n${USAGE}`);
    process.exit(2);
  }
  process.exitCode = await deploy(args, { run: (step) => spawnWrangler(step) });
}
