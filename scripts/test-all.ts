/**
 * `npm test`: everything CI runs, in order, with one summary line at the end.
 *
 *  1. format (Prettier), generated files up to date (docs/CONFIGURATION.md configuration table, `wrangler types`),
 *     `npm run deploy -- --dry-run` for staging and production (every worker's generated
 *     configuration bundled by `wrangler deploy --dry-run`), and strict typecheck of every part
 *     (worker, fleet, bench, scripts);
 *  2. the worker's tests in workerd (vitest + the Cloudflare plugin);
 *  3. the Node-side tests: node agent, fleet, bench, scripts (`npm start`, the demo end to end,
 *     the dashboard in headless chromium);
 *  4. the benchmark's quick mode (into .tmp/, leaving the committed results alone).
 *
 * Every stage runs even if an earlier one failed, so one run shows every problem. The last line
 * is `N passed, M failed` (tests plus one per check stage); the exit code is non-zero on any failure.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./system.ts";
import { tapFailures, vitestFailures, type VitestReport } from "./test-report.ts";

const TMP = join(ROOT, ".tmp");
mkdirSync(TMP, { recursive: true });
const bin = (name: string) => join(ROOT, "node_modules", ".bin", name);

let passed = 0;
let failed = 0;
const failures: string[] = [];
/** Each failed test's name and the first lines of its error, repeated at the end: CI keeps only the output's tail. */
const failedTests: string[] = [];

function run(title: string, command: string, args: string[]): boolean {
  console.log(`\n── ${title} ──`);
  const started = Date.now();
  const result = spawnSync(command, args, { cwd: ROOT, stdio: "inherit", env: process.env });
  const ok = result.status === 0;
  console.log(
    `── ${title}: ${ok ? "ok" : `FAILED (exit ${result.status ?? result.signal})`} in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  return ok;
}

function check(title: string, command: string, args: string[]): void {
  if (run(title, command, args)) passed++;
  else {
    failed++;
    failures.push(title);
  }
}

/** Runs a test stage and adds its own counts; a stage that fails without counts counts as one failure. */
function tests(title: string, command: string, args: string[], counts: () => { passed: number; failed: number } | undefined): void {
  const ok = run(title, command, args);
  const c = counts();
  if (c) {
    passed += c.passed;
    failed += c.failed;
  }
  if (!ok) {
    failures.push(title);
    if (!c || c.failed === 0) failed++;
  }
}

check("format (prettier --check)", bin("prettier"), ["--check", "."]);
check("docs/CONFIGURATION.md configuration table up to date (config:docs --check)", process.execPath, [
  "scripts/config-docs.ts",
  "--check",
]);
check("worker-configuration.d.ts up to date (wrangler types --check)", bin("wrangler"), [
  "types",
  "--include-runtime=false",
  "--strict-vars=false",
  "--check",
]);
// Deployable: each deployed environment's configuration is valid, and every worker generated from it
// (region workers, then the edge) bundles and binds: `wrangler deploy --dry-run`, no account needed.
for (const environment of ["staging", "production"]) {
  check(`deployable: node scripts/deploy.ts --dry-run --env ${environment}`, process.execPath, [
    "scripts/deploy.ts",
    "--dry-run",
    "--env",
    environment,
  ]);
}
for (const project of [
  "tsconfig.json",
  "fleet/tsconfig.json",
  "bench/tsconfig.json",
  "bench/workerd/tsconfig.json",
  "scripts/tsconfig.json",
  "agent/tsconfig.json",
]) {
  check(`typecheck ${project}`, bin("tsc"), ["--noEmit", "-p", project]);
}

const vitestJson = join(TMP, "vitest.json");
tests(
  "worker tests in workerd (vitest)",
  bin("vitest"),
  ["run", "--reporter=default", "--reporter=json", `--outputFile=${vitestJson}`],
  () => {
    if (!existsSync(vitestJson)) return undefined;
    const r = JSON.parse(readFileSync(vitestJson, "utf8")) as VitestReport;
    failedTests.push(...vitestFailures(r));
    return { passed: r.numPassedTests, failed: r.numFailedTests };
  },
);

const tap = join(TMP, "node-tests.tap");
tests(
  "fleet, bench and scripts tests (node --test)",
  process.execPath,
  [
    "--test",
    "--test-reporter=spec",
    "--test-reporter-destination=stdout",
    "--test-reporter=tap",
    `--test-reporter-destination=${tap}`,
    "fleet/test/*.test.ts",
    "bench/test/*.test.ts",
    "scripts/test/*.test.ts",
    "agent/test/*.test.ts",
  ],
  () => {
    if (!existsSync(tap)) return undefined;
    const text = readFileSync(tap, "utf8");
    const count = (key: string) => Number(new RegExp(`^# ${key} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
    failedTests.push(...tapFailures(text));
    return { passed: count("pass"), failed: count("fail") + count("cancelled") };
  },
);

check("benchmark, quick mode", process.execPath, ["bench/run.ts", "--quick", "--out", join(TMP, "bench-quick")]);
check("shard benchmark, quick mode", process.execPath, ["bench/shards.ts", "--quick", "--out", join(TMP, "shards-quick.md")]);
check("cross-region benchmark, quick mode", process.execPath, ["bench/regions.ts", "--quick", "--out", join(TMP, "regions-quick.md")]);
check("workerd cost benchmark, quick mode", process.execPath, ["bench/workerd/run.ts", "--quick"]);

if (failedTests.length) console.log(`\nFailed tests:\n${failedTests.map((t) => `- ${t}`).join("\n")}`);
console.log(failures.length ? `\nFailed: ${failures.join("; ")}` : "\nAll stages passed.");
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 ? 1 : 0);
