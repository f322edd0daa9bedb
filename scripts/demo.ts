/**
 * `npm run demo`: the same multi-tenant workload (scripts/workload.ts) through the whole running
 * system twice, once with the sticky-session policy and once with warmpath's default policy, and
 * a side-by-side table of what the nodes measured.
 *
 * Each run boots a fresh system (scripts/system.ts: `wrangler dev` + the simulated fleet, empty
 * caches) whose configuration is wrangler.toml's development WARMPATH_CONFIG with every region's
 * `policy` set to the policy under test. That configuration is the only difference between the
 * runs: the demo has no routing code of its own.
 *
 * Replay: requests are sent at their arrival times (model time divided by the time factor), open
 * loop, with at most `concurrency` in flight; a conversation's next turn also waits for the
 * previous turn's answer. Tenant t authenticates with development key t mod 2 and is pinned to
 * region floor(t / 2) mod regions (x-warmpath-region); the user is the x-session-id.
 *
 *   npm run demo [-- --quick] [-- --requests 1000] [-- --seed 1] [-- --rate 8] [-- --time-factor 5]
 *                [-- --concurrency 64] [-- --policies sticky,warmpath] [-- --fleet FILE] [-- --json [--json-requests]] [-- --verbose]
 *
 * Exits 1 if any request failed, 2 (and prints no table) if the machine was too busy for the timings
 * to hold (scripts/demo/harness.ts). docs/demo.md explains the knobs and how to read the table.
 *
 * This file is the entry point only. The parts, under scripts/demo/: args.ts (flags),
 * policy-config.ts (the policy switch), run.ts (one system per policy), replay.ts and
 * send-request.ts (the client), admin-state.ts (the nodes' usage), summarize.ts (statistics),
 * format.ts (the table and JSON).
 */
import { DemoArgsError, HELP, parseDemoArgs } from "./demo/args.ts";
import { formatJson, formatRefusal, formatResult } from "./demo/format.ts";
import { runDemo, stopCurrent } from "./demo/run.ts";

/** The machine was too busy for the timings to hold (scripts/demo/harness.ts): no table printed. */
const EXIT_UNTRUSTED = 2;

async function main(): Promise<void> {
  const args = parseDemoArgs();
  if (args.help) {
    console.log(HELP);
    return;
  }
  let interrupted = false;
  const interrupt = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\n${signal}: stopping the router and the fleet...`);
    void stopCurrent().finally(() => process.exit(130));
  };
  process.on("SIGINT", interrupt);
  process.on("SIGTERM", interrupt);
  const result = await runDemo({
    ...args.options,
    progress: (line) => console.error(line),
    routerOutput: args.verbose ? (line) => console.error(`[router] ${line}`) : undefined,
  });
  if (args.json) console.log(formatJson(result, args.jsonRequests));
  else if (result.verdict.trusted) console.log("\n" + formatResult(result));
  // Not on stdout: nothing a script reading the table could take for one.
  else console.error("\n" + formatRefusal(result));
  if (!result.verdict.trusted) {
    if (args.json) console.error(`\nThe timings do not hold: ${result.verdict.reason}\n${result.verdict.remedy}`);
    process.exitCode = EXIT_UNTRUSTED;
  }
  const failed = result.policies.reduce((n, p) => n + p.errors, 0);
  if (failed > 0) {
    console.error(`\n${failed} requests failed`);
    process.exitCode = 1;
  }
}

main()
  .catch((e) => {
    if (e instanceof DemoArgsError) console.error(`${e.message} (npm run demo -- --help lists the options)`);
    else console.error(e instanceof Error ? (e.stack ?? e.message) : e);
    process.exitCode = 1;
  })
  // Keep-alive sockets would hold the process open for a few seconds after the last request.
  .finally(() => process.exit());
