/**
 * `npm run deploy -- --env production [--dry-run]` (or `--env staging`): deploys one environment of
 * wrangler.toml as its workers (docs/DEPLOY.md).
 *
 *  1. generate one wrangler configuration per worker into dist/deploy/<env>/ (scripts/deploy/generate.ts);
 *     an invalid configuration stops here, naming the field, before anything is uploaded (exit 1);
 *  2. `wrangler deploy --config <file>` for every region worker, then for the edge (`--dry-run
 *     --outdir dist/deploy/<env>/bundles/<worker>` with --dry-run: bundled and checked, nothing
 *     uploaded, no account needed);
 *  3. stop at the first failure, saying which workers are deployed and which are not, and what to do;
 *  4. print the secrets each worker needs (`wrangler secret put NAME --config <file>`).
 *
 * Region workers go first: a region worker serves every edge contract version from
 * MIN_REGION_CONTRACT_VERSION to its own (src/contracts/region-service.ts), so the old edge keeps
 * working with new region workers, and the edge is deployed only once all of them are.
 *
 * The pure part (arguments, plan, reports, {@link deploy} with an injected runner) is tested in
 * scripts/test/deploy.test.ts; {@link spawnWrangler} is the only part that runs wrangler.
 */
import { spawnSync } from "node:child_process";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { CONTRACT_HEADER, MIN_REGION_CONTRACT_VERSION, REGION_CONTRACT_VERSION } from "../src/contracts/region-service.ts";
import { DeployConfigError, generateDeployment, type Deployment, type GeneratedWorker } from "./deploy/generate.ts";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
/** wrangler's own entry, run with this Node (the `node_modules/.bin` shim would take the first `node` on PATH). */
const WRANGLER = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");

export const USAGE = "usage: npm run deploy -- --env <production|staging> [--dry-run]";

export class UsageError extends Error {}

export interface DeployArgs {
  /** An environment of wrangler.toml. */
  environment: string;
  /** Bundle and check every worker, upload nothing. */
  dryRun: boolean;
}

export function parseDeployArgs(argv: string[]): DeployArgs {
  let values: { env?: string; "dry-run"?: boolean };
  try {
    ({ values } = parseArgs({ args: argv, options: { env: { type: "string" }, "dry-run": { type: "boolean" } }, strict: true }));
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (!values.env) throw new UsageError("--env is required (an environment of wrangler.toml, e.g. production or staging)");
  return { environment: values.env, dryRun: values["dry-run"] ?? false };
}

/**
 * One `wrangler` run: its worker and its arguments (run from the root: the configuration's path is
 * relative to it; --outdir is absolute, as wrangler resolves it against the configuration's directory).
 */
export interface Step {
  worker: GeneratedWorker;
  args: string[];
}

/** Every region worker, then the edge: the edge never goes before every region worker succeeded. */
export function planDeploy(deployment: Deployment, dryRun: boolean, root: string = ROOT): Step[] {
  const ordered = [...deployment.workers.filter((w) => w.kind === "region"), ...deployment.workers.filter((w) => w.kind === "edge")];
  return ordered.map((worker) => ({
    worker,
    args: [
      "deploy",
      "--config",
      relative(root, worker.file),
      ...(dryRun ? ["--dry-run", "--outdir", resolve(deployment.dir, "bundles", worker.name)] : []),
    ],
  }));
}

/** Runs one step: whether it succeeded, and if not how it ended (`exit 1`). */
export type Runner = (step: Step) => { ok: true } | { ok: false; detail: string };

export interface Outcome {
  /** Deployed (or, in a dry run, checked), in order. */
  done: GeneratedWorker[];
  failed?: { worker: GeneratedWorker; detail: string };
  /** Not attempted, in order. */
  notAttempted: GeneratedWorker[];
}

/** Runs the steps in order and stops at the first failure. */
export function runPlan(steps: Step[], run: Runner): Outcome {
  const done: GeneratedWorker[] = [];
  for (const [i, step] of steps.entries()) {
    const result = run(step);
    if (!result.ok)
      return { done, failed: { worker: step.worker, detail: result.detail }, notAttempted: steps.slice(i + 1).map((s) => s.worker) };
    done.push(step.worker);
  }
  return { done, notAttempted: [] };
}

const label = (w: GeneratedWorker) => (w.kind === "edge" ? `${w.name} (edge)` : `${w.name} (region ${w.region})`);
const list = (ws: GeneratedWorker[]) => (ws.length ? ws.map(label).join(", ") : "none");
const command = (args: DeployArgs) => `npm run deploy -- --env ${args.environment}${args.dryRun ? " --dry-run" : ""}`;

export function planReport(args: DeployArgs, steps: Step[]): string {
  const what = args.dryRun ? "Dry run (bundle and check, upload nothing)" : "Deploying";
  return [
    `${what}: ${args.environment}, region workers first, the edge last:`,
    ...steps.map((s, i) => `  ${i + 1}. ${label(s.worker)}`),
  ].join("\n");
}

/** The `wrangler secret put` commands, per worker (secrets are per worker: two workers using ORIGIN_TOKEN each need it). */
export function secretsReport(steps: Step[], root: string = ROOT): string {
  const commands = steps.flatMap((s) =>
    s.worker.secrets.map((name) => [`npx wrangler secret put ${name} --config ${relative(root, s.worker.file)}`, s.worker.name] as const),
  );
  if (!commands.length) return "Secrets: none needed.";
  const width = Math.max(...commands.map(([c]) => c.length));
  const lines = commands.map(([c, worker]) => `  ${c.padEnd(width)}  # ${worker}`);
  return [
    "Secrets each worker needs (set once per worker; they persist across deploys; a new secret name goes in before the deploy that uses it):",
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
export function deploy(args: DeployArgs, options: DeployOptions): number {
  const root = options.root ?? ROOT;
  const log = options.log ?? console.log;
  const error = options.error ?? console.error;
  let deployment: Deployment;
  try {
    deployment = generateDeployment({ root, environment: args.environment, outDir: options.outDir });
  } catch (e) {
    if (!(e instanceof DeployConfigError)) throw e;
    error(`deploy: ${e.message}`);
    error("Nothing was generated or uploaded: fix wrangler.toml and run it again.");
    return 1;
  }
  log(`Generated ${relative(root, deployment.dir)}/ (deployment.json: the order and each worker's secrets).`);
  const steps = planDeploy(deployment, args.dryRun, root);
  log(planReport(args, steps));
  const outcome = runPlan(steps, options.run);
  if (outcome.failed) {
    error(failureReport(args, outcome, root));
    return 1;
  }
  log(
    args.dryRun
      ? `Dry run of ${args.environment} passed: ${list(outcome.done)}; bundles in ${relative(root, join(deployment.dir, "bundles"))}/.`
      : `Deployed ${args.environment}: ${list(outcome.done)}.`,
  );
  log(secretsReport(steps, root));
  return 0;
}

/** Runs `wrangler <args>` from the root with this Node, its output on the terminal (`quiet`: only a failure's, in its detail). */
export function spawnWrangler(step: Step, options: { root?: string; quiet?: boolean } = {}): ReturnType<Runner> {
  if (!options.quiet) console.log(`\n$ wrangler ${step.args.join(" ")}`);
  const r = spawnSync(process.execPath, [WRANGLER, ...step.args], {
    cwd: options.root ?? ROOT,
    stdio: options.quiet ? "pipe" : "inherit",
    encoding: "utf8",
  });
  if (r.status === 0) return { ok: true };
  const how = r.error ? r.error.message : r.signal ? `signal ${r.signal}` : `exit ${r.status}`;
  return { ok: false, detail: options.quiet ? `${how}: ${r.stdout}${r.stderr}`.trim() : how };
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
  process.exitCode = deploy(args, { run: (step) => spawnWrangler(step) });
}
