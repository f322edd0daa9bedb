/**
 * The demo's command line: flags, their validation and the --help text, kept apart from the run
 * so that runDemo takes plain options (the end-to-end test calls it directly) and every default
 * named in the help is the one the code uses.
 */
import { parseArgs } from "node:util";
import { DEFAULT_WORKLOAD, type WorkloadOptions } from "../workload.ts";
import { configSchema } from "../../src/config/schema.ts";
import { devConfigWithPolicy } from "./policy-config.ts";
import type { DemoOptions } from "./run.ts";

/** --quick: a smaller, faster run (well under a minute). */
export const QUICK_WORKLOAD: Partial<WorkloadOptions> = { requests: 400 };

export const HELP = `npm run demo [-- options]

  --quick              ${QUICK_WORKLOAD.requests} requests instead of ${DEFAULT_WORKLOAD.requests} (about half a minute in all)
  --requests N         total requests (default ${DEFAULT_WORKLOAD.requests})
  --seed N             workload seed (default ${DEFAULT_WORKLOAD.seed})
  --rate R             mean arrivals per second of model time (default ${DEFAULT_WORKLOAD.requestsPerSecond})
  --time-factor F      run the fleet and the schedule F times faster than real time (default 5);
                       the router's objectives and waits are scaled to match (docs/demo.md, "Time")
  --concurrency N      most requests in flight (default 64)
  --policies A,B       policies to compare (default sticky,warmpath)
  --fleet FILE         fleet file (default fleet/fleet.default.json)
  --prefill-rate R     every region's configured prefill_tokens_per_second (default: wrangler.toml's);
                       the nodes' real rate in wall time is their fleet rate x the time factor
  --json               machine-readable result on stdout (--json-requests: with every request)
  --verbose            wrangler dev's output on stderr
Exits 1 if a request failed; 2, with no table, if the machine was too busy for the timings to hold
(docs/demo.md, "A machine too busy to measure"). Other workload knobs: scripts/workload.ts
(DEFAULT_WORKLOAD), docs/demo.md.`;

export type DemoArgs =
  | { help: true }
  | {
      help: false;
      /** The run's options, without the output callbacks. */
      options: Omit<DemoOptions, "progress" | "routerOutput">;
      json: boolean;
      jsonRequests: boolean;
      verbose: boolean;
    };

/** A flag the demo does not know, or a value it cannot take: the CLI prints the message alone, with where --help is. */
export class DemoArgsError extends Error {}

/** Parses and validates the flags (process.argv by default). Throws DemoArgsError on an unknown flag or an invalid value. */
export function parseDemoArgs(args?: string[]): DemoArgs {
  try {
    return parseValidated(args);
  } catch (e) {
    // parseArgs's own errors (unknown option, missing value) are TypeErrors with an ERR_PARSE_ARGS_* code.
    if (e instanceof DemoArgsError) throw e;
    if (e instanceof TypeError && String((e as { code?: unknown }).code).startsWith("ERR_PARSE_ARGS")) throw new DemoArgsError(e.message);
    throw e;
  }
}

function parseValidated(args: string[] | undefined): DemoArgs {
  const { values } = parseArgs({
    args,
    options: {
      requests: { type: "string" },
      seed: { type: "string" },
      "time-factor": { type: "string" },
      concurrency: { type: "string" },
      rate: { type: "string" },
      fleet: { type: "string" },
      "prefill-rate": { type: "string" },
      policies: { type: "string" },
      quick: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      verbose: { type: "boolean", default: false },
      "json-requests": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return { help: true };
  const num = (name: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new DemoArgsError(`--${name} must be a positive number`);
    return n;
  };
  const workload: Partial<WorkloadOptions> = values.quick ? { ...QUICK_WORKLOAD } : {};
  const requests = num("requests", values.requests);
  const seed = num("seed", values.seed);
  const rate = num("rate", values.rate);
  if (requests !== undefined) workload.requests = Math.round(requests);
  if (seed !== undefined) workload.seed = Math.round(seed);
  if (rate !== undefined) workload.requestsPerSecond = rate;
  return {
    help: false,
    options: {
      workload,
      timeFactor: num("time-factor", values["time-factor"]),
      concurrency: values.concurrency === undefined ? undefined : Math.round(num("concurrency", values.concurrency)!),
      policies: policiesFlag(values.policies),
      fleetFile: values.fleet,
      prefillRate: num("prefill-rate", values["prefill-rate"]),
    },
    json: values.json,
    jsonRequests: values["json-requests"],
    verbose: values.verbose,
  };
}

/**
 * --policies, each name checked against the configuration schema before anything boots: a name
 * the router does not know would otherwise fail the first boot, blamed on wrangler.toml.
 */
function policiesFlag(value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const names = value
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);
  if (names.length === 0) throw new DemoArgsError("--policies names no policy");
  for (const name of names) {
    const parsed = configSchema.safeParse(devConfigWithPolicy(name));
    if (!parsed.success) {
      const issue = parsed.error.issues.find((i) => i.path.includes("policy")) ?? parsed.error.issues[0];
      throw new DemoArgsError(`--policies: "${name}" is not a policy the router knows (${issue?.message ?? "invalid"})`);
    }
  }
  return names;
}
