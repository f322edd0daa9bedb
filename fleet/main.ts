/**
 * CLI: starts a fleet of simulated inference nodes and prints one JSON line per event
 * (node_listening with its URL, report_failing/report_ok, crashes, ...).
 *
 *   npx node fleet/main.ts [--fleet fleet/fleet.default.json] [--router http://127.0.0.1:8787]
 *                          [--token-<region> TOKEN ...] [--time-factor N]
 *
 * Stops cleanly on SIGINT/SIGTERM: every node deregisters (best effort) and closes its sockets.
 */
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { ConfigError, loadFleet } from "./config.ts";
import { startFleet } from "./fleet.ts";

const USAGE = `usage: npx node fleet/main.ts [--fleet FILE] [--router URL] [--token-<region> TOKEN ...] [--time-factor N]
  --fleet FILE          fleet file (default fleet/fleet.default.json)
  --router URL          router base URL; nodes POST load reports to URL/v1/nodes/report
  --token-<region> TOK  bearer token for that region's reports (or env WARMPATH_NODE_TOKEN_<REGION>)
  --time-factor N       multiply every node's time_factor (10 = everything 10x faster)`;

interface Args {
  fleet: string;
  router: string | undefined;
  tokens: Record<string, string>;
  timeFactor: number | undefined;
}

function parseArgs(argv: string[]): Args {
  const args: Args = {
    fleet: join(dirname(fileURLToPath(import.meta.url)), "fleet.default.json"),
    router: undefined,
    tokens: {},
    timeFactor: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const raw = argv[i]!;
    if (raw === "-h" || raw === "--help") {
      console.log(USAGE);
      process.exit(0);
    }
    // Accept both "--flag value" and "--flag=value".
    const eq = raw.indexOf("=");
    const flag = eq >= 0 ? raw.slice(0, eq) : raw;
    const value = () => {
      const v = eq >= 0 ? raw.slice(eq + 1) : argv[++i];
      if (v === undefined || v === "") throw new ConfigError(`${flag} needs a value\n${USAGE}`);
      return v;
    };
    if (flag === "--fleet") args.fleet = value();
    else if (flag === "--router") args.router = value();
    else if (flag === "--time-factor") {
      const n = Number(value());
      if (!(n > 0)) throw new ConfigError("--time-factor must be a positive number");
      args.timeFactor = n;
    } else if (flag.startsWith("--token-") && flag.length > 8) args.tokens[flag.slice(8)] = value();
    else throw new ConfigError(`unknown argument ${raw}\n${USAGE}`);
  }
  return args;
}

const print = (event: Record<string, unknown>) => process.stdout.write(JSON.stringify(event) + "\n");

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const config = loadFleet(args.fleet);
  const unknown = Object.keys(args.tokens).filter((r) => !config.regions.some((c) => c.name === r));
  if (unknown.length > 0) throw new ConfigError(`--token-${unknown[0]}: no region "${unknown[0]}" in ${args.fleet}`);
  const fleet = await startFleet(config, { routerUrl: args.router, tokens: args.tokens, timeFactorScale: args.timeFactor, log: print });
  print({ event: "fleet_ready", nodes: fleet.nodes.length, router: args.router ?? null });

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    fleet
      .stop()
      .then(() => print({ event: "fleet_stopped", signal }))
      .catch((err: unknown) => {
        console.error(err);
        process.exitCode = 1;
      });
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

main().catch((err: unknown) => {
  console.error(err instanceof ConfigError ? err.message : err);
  process.exit(2);
});
