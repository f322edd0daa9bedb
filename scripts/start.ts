/**
 * `npm start`: the whole system on this machine. The router on http://127.0.0.1:8787 and the
 * simulated fleet of fleet/fleet.default.json reporting to it, then where to look. Ctrl-C stops
 * everything.
 *
 * The router runs as deployed: the edge and every region's worker generated from wrangler.toml as
 * `npm run deploy` generates them, bundled as `wrangler deploy` bundles them, with the same
 * bindings, in one workerd process (scripts/system.ts, runtime `workerd-single`, through
 * scripts/workerd-host.ts: wrangler's own Miniflare and workerd), the service bindings between
 * them in-process as on Cloudflare. Not under `wrangler dev`: its proxy worker, entry worker and
 * log relay added 22.6 ms p50 / 56 ms p99 to a request one at a time (and ~3 ms of CPU), its
 * fetch of the `Request.cf` object from workers.cloudflare.com printed an `ENOTFOUND` stack trace
 * offline for each of its two runtimes, and its types check compared each generated configuration with worker-configuration.d.ts (made from
 * wrangler.toml) and warned three times. A developer editing a worker's code runs `npm run dev`
 * (wrangler dev, reloading on every save) instead; docs/OPERATIONS.md.
 *
 *   npm start [-- --port 8787] [-- --time-factor 1] [-- --fleet fleet/fleet.default.json] [-- --verbose]
 *             [-- --traces traces.jsonl | http://127.0.0.1:4318/v1/traces] [-- --state .warmpath/state] [-- --fresh]
 *
 * State lasts: the node table, usage ledger, budget ledger and spent budgets are kept in
 * `--state` (default `.warmpath/state`, gitignored) across runs; `--fresh` empties it first.
 * wrangler.toml is watched: a change restarts the workers on it (an invalid one is reported and the
 * workers keep running as they were). The workers end when this process ends, however it ends
 * (scripts/watchdog.ts), SIGKILL included.
 *
 * `--verbose` passes the router's own output through: the decision log (one JSON line per
 * request), refusal lines and errors. `--traces` exports the workers' spans as OTLP/JSON, to a
 * file (one ExportTraceServiceRequest a line) or an OTLP/HTTP endpoint (scripts/traces/export.ts;
 * docs/OBSERVABILITY.md, "Traces").
 */
import { watchFile } from "node:fs";
import { createServer } from "node:net";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import { DEV_ADMIN_TOKEN, DEV_API_KEY } from "../src/config/dev-credentials.ts";
import { ConfigRejected, ROOT, startSystem } from "./system.ts";

/** The state folder by default (gitignored), as `wrangler dev` keeps `.wrangler/state`. */
const DEFAULT_STATE_DIR = join(ROOT, ".warmpath", "state");
/** How often wrangler.toml's modification time is looked at (a poll survives editors that replace the file). */
const CONFIG_POLL_MS = 1_000;

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "8787" },
    "time-factor": { type: "string", default: "1" },
    fleet: { type: "string" },
    verbose: { type: "boolean", default: false },
    traces: { type: "string" },
    state: { type: "string", default: DEFAULT_STATE_DIR },
    fresh: { type: "boolean", default: false },
  },
});

/** Whether `port` can be listened on at 127.0.0.1 (another `npm start` may hold it). */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

const port = Number(values.port);
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  console.error(`warmpath: --port must be a port number (1-65535).`);
  process.exit(2);
}
if (!(await portFree(port))) {
  console.error(
    `warmpath: port ${port} is in use (another npm start?). Stop it, or start on another port: npm start -- --port ${port + 1}`,
  );
  process.exit(1);
}
const started = Date.now();
console.log("warmpath: starting the router (the edge and region workers in workerd) and the simulated GPU fleet...");
const system = await startSystem({
  port,
  runtime: "workerd-single",
  fleetFile: values.fleet,
  timeFactorScale: Number(values["time-factor"]),
  onRouterOutput: values.verbose ? (line) => console.log(`[router] ${line}`) : undefined,
  traces: values.traces,
  stateDir: values.state,
  fresh: values.fresh,
}).catch((e: unknown) => {
  // What failed, in one line; the router's own output (--verbose) has the rest.
  console.error(`warmpath: could not start: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
const stateShown = relative(process.cwd(), values.state!) || ".";
const nodes = (system.fleet?.nodes ?? []).map((n) => `${n.region}/${n.id} ${n.url}`).join("\n    ");
console.log(`
warmpath is up (${((Date.now() - started) / 1000).toFixed(1)} s).

  API         ${system.url}/v1   (OpenAI-compatible)
  Dashboard   ${system.url}/dashboard/
  Dev API key ${DEV_API_KEY}   (accepted on localhost only)
  Admin token ${DEV_ADMIN_TOKEN}   (not needed on localhost)
  Nodes       ${nodes}
  State       ${stateShown}   (node table, usage and budgets, kept across restarts; start clean: npm start -- --fresh)
  Config      wrangler.toml   (watched: a change restarts the workers on it)

Try it:

  curl -N ${system.url}/v1/chat/completions \\
    -H "Authorization: Bearer ${DEV_API_KEY}" -H "Content-Type: application/json" \\
    -d '{"model":"llama-3.1-8b-instruct","stream":true,"stream_options":{"include_usage":true},
         "messages":[{"role":"system","content":"You are a concise assistant."},{"role":"user","content":"Hello!"}]}' -i

  # OpenAI SDK (npm install openai):
  import OpenAI from "openai";
  const client = new OpenAI({ baseURL: "${system.url}/v1", apiKey: "${DEV_API_KEY}" });
  const stream = await client.chat.completions.create({ model: "llama-3.1-8b-instruct", stream: true,
    messages: [{ role: "user", content: "Hello!" }] });
  for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta?.content ?? "");

Decision log (one JSON line per request: node, decision, candidates, usage): npm start -- --verbose
Traces${values.traces ? ` -> ${values.traces}` : ""} (OTLP/JSON, to a file or an OTLP/HTTP endpoint): npm start -- --traces traces.jsonl
Compare sticky sessions with warmpath: npm run demo        Stop: Ctrl-C
`);

// A changed wrangler.toml: the workers start again on it, on the same state (a reload at a time;
// a change during one is taken after it).
const WRANGLER_TOML = join(ROOT, "wrangler.toml");
let stopping = false;
let reloading: Promise<void> | undefined;
let changedAgain = false;
const reload = async (): Promise<void> => {
  const began = Date.now();
  console.log("warmpath: wrangler.toml changed; restarting the workers on it...");
  try {
    await system.reload();
    console.log(`warmpath: the workers run the new configuration (${((Date.now() - began) / 1000).toFixed(1)} s).`);
  } catch (e) {
    const message = e instanceof Error ? e.message.split("\n")[0] : String(e);
    if (e instanceof ConfigRejected) console.error(`warmpath: the workers keep the configuration they run: ${message}`);
    else
      console.error(
        `warmpath: the workers did not start on the new configuration (${message}); they start again on the next change of wrangler.toml (npm start -- --verbose shows the workers' output)`,
      );
  }
};
watchFile(WRANGLER_TOML, { interval: CONFIG_POLL_MS }, (now, before) => {
  if (stopping || now.mtimeMs === before.mtimeMs) return;
  if (reloading) {
    changedAgain = true;
    return;
  }
  const run = async () => {
    do {
      changedAgain = false;
      await reload();
    } while (changedAgain && !stopping);
    reloading = undefined;
  };
  reloading = run();
});

const shutdown = async () => {
  if (stopping) return;
  stopping = true;
  await reloading;
  console.log("\nwarmpath: stopping the fleet and the router...");
  await system.stop();
  console.log("warmpath: stopped.");
  process.exit(0);
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
