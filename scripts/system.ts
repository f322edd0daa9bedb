/**
 * Boots the whole system locally in the production topology: the edge worker and one worker per
 * region, generated from wrangler.toml's top level as `npm run deploy` generates a deployment's
 * (scripts/deploy/generate.ts), joined by service bindings; and a simulated fleet reporting to
 * it. Used by `npm start`, `npm run demo`, the faults suite, the benchmarks and the end-to-end
 * tests, so all of them run exactly the same system.
 *
 * Three runtimes: `workerd-single` (the default, what `npm start` runs): the deploy bundles in one
 * workerd process with no development machinery, the bindings in-process as on Cloudflare;
 * `workerd`: each worker in a workerd process of its own, the bindings over loopback HTTP
 * (scripts/workerd-host.ts), so a region's worker can be killed alone; or `wrangler dev` with
 * every worker's configuration in one process, for a developer editing a worker (its proxy, entry
 * worker and log relay add ~15 ms and ~20 ms of CPU to a request: bench/e2e/RESULTS.md).
 *
 * Each boot gets a fresh Durable Object store (`--persist-to` a temporary folder), unless given a
 * state folder (`stateDir`: `npm start`'s `.warmpath/state`), whose stores (node table, usage
 * ledger, budget ledger and spent budgets) it keeps across runs, as `wrangler dev` keeps
 * `.wrangler/state`; `fresh` empties it first. A configuration override (e.g. another routing
 * policy) goes into the generated configurations' WARMPATH_CONFIG, as a deploy would carry it;
 * secrets go in a temporary env file, as `.dev.vars` would, with a random `INTERNAL_SECRET` for
 * the run (the internal boundary, docs/SECURITY.md: a region worker's loopback port takes no
 * message without it). For fault injection, the workers can be killed and started again on the
 * same stores (`restartRouter`, `killRegionWorker`); `reload` starts them again on a configuration
 * regenerated from wrangler.toml.
 *
 * Every worker process runs under scripts/watchdog.ts, in a process group of its own: `stop` ends
 * the group, and a parent that dies any other way (SIGKILL included) closes the watchdog's stdin
 * pipe, and the watchdog ends the group.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { parse as parseToml } from "smol-toml";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadFleet, type FleetConfig } from "../fleet/config.ts";
import { startFleet, type Fleet } from "../fleet/fleet.ts";
import { BUDGET_LEDGER_BINDING, regionBindingName } from "../src/contracts/topology.ts";
import { INTERNAL_SECRET_VAR } from "../src/core/internal-auth.ts";
import { generateDeployment, type Deployment } from "./deploy/generate.ts";
import { freePort } from "./ports.ts";
import { traceExporter, type TraceExporter } from "./traces/export.ts";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const WRANGLER = join(ROOT, "node_modules", ".bin", "wrangler");

/** How long to wait for wrangler dev to answer /healthz (first start bundles the worker). */
const ROUTER_READY_TIMEOUT_MS = 60_000;
/** How long to wait for every node's first report to be accepted. */
const FLEET_READY_TIMEOUT_MS = 15_000;

export interface SystemOptions {
  /** Router port; 0 picks a free one. Default 8787. */
  port?: number;
  /** Fleet file. Default fleet/fleet.default.json; null: no simulated fleet (real nodes register themselves). */
  fleetFile?: string | null;
  /** A fleet already loaded, instead of the fleet file (e.g. the default fleet with a field changed). */
  fleetConfig?: FleetConfig;
  /** Multiplies every node's time factor (10 = ten times faster). Default 1. */
  timeFactorScale?: number;
  /**
   * What runs the workers. Default `"workerd-single"` (what `npm start` runs): the deploy bundles
   * in one workerd process, the bindings in-process; `"workerd"`: the same bundles, each worker in
   * a process of its own, the bindings over loopback HTTP (scripts/workerd-host.ts);
   * `"wrangler-dev"`: every worker in one wrangler dev, with its development machinery (its proxy,
   * entry worker and log relay added ~15-20 ms to a request, and the CPU of the simulated fleet
   * beside it: what every benchmark and test taking the default paid before).
   */
  runtime?: "wrangler-dev" | "workerd" | "workerd-single";
  /** A full configuration document replacing wrangler.toml's WARMPATH_CONFIG (for the edge and every region's worker). */
  config?: unknown;
  /**
   * `runtime: "workerd"`: the address the edge's binding to a region's worker reaches, given the
   * port that worker listens on (default the port itself; bench:wan puts a long-haul relay there).
   */
  regionAddress?: (region: string, port: number) => string | Promise<string>;
  /** `runtime: "workerd"` / `"workerd-single"`: leave the dashboard's static assets out (workerd-host --no-assets), for benchmarks of the API. */
  noAssets?: boolean;
  /** More variables for the worker (as `.dev.vars` would carry secrets), by name. `INTERNAL_SECRET` defaults to a random one for the run. */
  secrets?: Record<string, string>;
  /**
   * Keep the Durable Objects' stores (node table, usage ledger, budget ledger, spent budgets) in
   * this folder across runs; `stop` leaves it. Default: a temporary folder, removed by `stop`.
   */
  stateDir?: string;
  /** With `stateDir`: empty it first (`npm start -- --fresh`). Default false. */
  fresh?: boolean;
  /** Where wrangler's output goes. Default: discarded unless it fails to start. */
  onRouterOutput?: (line: string) => void;
  /**
   * Export the workers' spans (docs/OBSERVABILITY.md, "Traces") as OTLP/JSON: to this file (one
   * ExportTraceServiceRequest a line), or POSTed to this `http://` OTLP/HTTP traces endpoint.
   */
  traces?: string;
  log?: (event: Record<string, unknown>) => void;
}

export interface System {
  url: string;
  /** The simulated fleet (undefined with `fleetFile: null`). */
  fleet: Fleet | undefined;
  /** With `traces`: the exporter (its counts; flushed by stop()). */
  traces: TraceExporter | undefined;
  /** The process answering on `url` (wrangler dev, or the edge's workerd), a new one after restartRouter. */
  readonly router: ChildProcess;
  /** Every worker process running now: one (wrangler dev), or the edge and one per region (workerd). */
  processes(): Array<{ name: string; pid: number }>;
  /** `runtime: "workerd"`: kills a region's worker (SIGKILL, as a crash), resolving with when. */
  killRegionWorker(region: string): Promise<number>;
  /** Starts a killed region's worker again on its port and store; resolves when it answers. */
  startRegionWorker(region: string): Promise<number>;
  /**
   * Kills every worker process and its tree (workerd) with SIGKILL, as a crash would, and starts
   * them again with the same arguments: same ports, same configuration, same --persist-to stores,
   * so the Durable Objects' storage survives and their memory does not. Resolves when /healthz
   * answers again, with when the kill was sent and when it answered (ms epoch).
   */
  restartRouter(): Promise<{ killedAt: number; upAt: number }>;
  /**
   * Regenerates the workers' configurations from wrangler.toml (as at boot) and starts the workers
   * again on them and on the same stores (`runtime: "workerd-single"`, what `npm start` runs, or `"wrangler-dev"`). An
   * invalid wrangler.toml leaves the running workers as they are and rejects, naming the field.
   */
  reload(): Promise<{ upAt: number }>;
  stop(): Promise<void>;
}

/** What runs the workers unless told: what `npm start` runs (scripts/start.ts). */
const DEFAULT_RUNTIME = "workerd-single";

/** A reload refused before anything stopped: wrangler.toml (or its WARMPATH_CONFIG) does not validate. */
export class ConfigRejected extends Error {}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(200);
  }
}

/** How long a killed process group gets to end after SIGTERM before SIGKILL. */
const KILL_GRACE_MS = 5000;

/**
 * Kills a child and its process group (wrangler and workerd-host start workerd as their child, in
 * the same group): SIGTERM, then SIGKILL after 5 s; or SIGKILL at once, as a crash would. Resolves
 * once every process of the group has ended, not only the child: the child can exit while its
 * workerd still writes its SQLite store and holds its port, and a caller that then deletes the
 * store (`stop`) or starts a worker on the same port and store (`restartRouter`) races it.
 */
async function killTree(child: ChildProcess, signal: "SIGTERM" | "SIGKILL" = "SIGTERM"): Promise<void> {
  const pgid = child.pid;
  if (pgid === undefined) return;
  const exited =
    child.exitCode !== null || child.signalCode !== null
      ? Promise.resolve()
      : new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const kill = (sig: NodeJS.Signals) => {
    try {
      process.kill(-pgid, sig);
    } catch {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    }
  };
  kill(signal);
  if (!(await groupEnded(pgid, KILL_GRACE_MS))) {
    kill("SIGKILL");
    if (!(await groupEnded(pgid, KILL_GRACE_MS))) throw new Error(`process group ${pgid} still running ${KILL_GRACE_MS} ms after SIGKILL`);
  }
  // Its exit event too, so that the child reads as exited to whoever starts it again.
  await exited;
}

/**
 * Waits until no live process is left in process group `pgid`, polling every 10 ms for at most
 * `timeoutMs`; false if some still runs. On Linux it reads /proc and ignores zombies: a process
 * whose parent died first is reparented to PID 1, which in a container may never reap it, so
 * `kill(-pgid, 0)` would report the group alive for ever. Elsewhere it asks `kill(-pgid, 0)`.
 */
async function groupEnded(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!groupAlive(pgid)) return true;
    if (Date.now() > deadline) return false;
    await sleep(10);
  }
}

function groupAlive(pgid: number): boolean {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch {
      return false;
    }
  }
  for (const pid of pids) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
      continue; // ended while we looked
    }
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after the last ")".
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(pgrp) === pgid && state !== "Z" && state !== "X") return true;
  }
  return false;
}

const WORKERD_HOST = join(ROOT, "scripts", "workerd-host.ts");
const WATCHDOG = join(ROOT, "scripts", "watchdog.ts");

/**
 * The router process with these arguments, under the watchdog (scripts/watchdog.ts: it ends the
 * process group when this process ends, however it ends), its output kept in `output` (the last
 * 500 lines) and passed on.
 */
function launchRouter(command: [string, string[]], output: string[], onOutput: ((line: string) => void) | undefined): ChildProcess {
  const router = spawn(process.execPath, [WATCHDOG, command[0], ...command[1]], {
    cwd: ROOT,
    detached: true, // its own process group, so stop() also ends workerd
    // stdin: the watchdog's pipe to this process; it is closed when this process dies.
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" },
  });
  for (const stream of [router.stdout!, router.stderr!]) {
    stream.setEncoding("utf8");
    // A line longer than a pipe's chunk (a spans line is several KB) arrives in pieces: kept until its newline.
    let partial = "";
    const take = (line: string) => {
      if (!line) return;
      output.push(line);
      if (output.length > 500) output.shift();
      onOutput?.(line);
    };
    stream.on("data", (chunk: string) => {
      const lines = (partial + chunk).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) take(line);
    });
    stream.on("end", () => {
      take(partial);
      partial = "";
    });
  }
  return router;
}

/** Resolves when the router answers /healthz; rejects if it exits first. */
async function routerReady(router: ChildProcess, url: string, output: string[]): Promise<void> {
  const died = new Promise<never>((_, reject) =>
    router.once("exit", (code) => reject(new Error(`the router process exited (${code}):\n${output.slice(-30).join("\n")}`))),
  );
  await Promise.race([
    died,
    waitFor("the router to answer /healthz", ROUTER_READY_TIMEOUT_MS, async () => (await fetch(`${url}/healthz`)).ok),
  ]);
}

/** One worker process of the local system: how to start it, and the one running now. */
interface WorkerProcess {
  /** `edge`, a region's worker name, or `router` (wrangler dev running every worker). */
  name: string;
  command: [string, string[]];
  /** Where it answers /healthz. */
  url: string;
  child: ChildProcess;
}

/**
 * The configuration the workers get: the one given, or wrangler.toml's; with `traces`, every trace
 * the edge starts is sampled unless the configuration sets `trace_sample_rate` (its default, 1%,
 * would export one request in a hundred to a developer who asked for traces).
 */
function tracedConfig(options: SystemOptions): unknown {
  if (!options.traces) return options.config;
  const given = (options.config ??
    (parseToml(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as { vars?: { WARMPATH_CONFIG?: unknown } }).vars?.WARMPATH_CONFIG) as
    Record<string, unknown> | undefined;
  if (!given || typeof given !== "object" || "trace_sample_rate" in given) return options.config;
  return { ...given, trace_sample_rate: 1 };
}

export async function startSystem(options: SystemOptions = {}): Promise<System> {
  const port = options.port === 0 ? await freePort() : (options.port ?? 8787);
  const url = `http://127.0.0.1:${port}`;
  // The run's own files (generated configurations, secrets), removed by stop().
  const state = mkdtempSync(join(tmpdir(), "warmpath-"));
  // Where the Durable Objects' stores go: the state folder kept across runs, or the run's own.
  const stores = options.stateDir ?? state;
  if (options.stateDir) {
    if (options.fresh) rmSync(options.stateDir, { recursive: true, force: true });
    mkdirSync(options.stateDir, { recursive: true });
    // workerd-host caches a worker's bundle beside its store for restarts within a run; a new run bundles the code as it is now.
    for (const dir of [join(stores, "bundle"), ...readdirSync(stores).map((d) => join(stores, d, "bundle"))])
      if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
  }
  // The production topology: the edge and one worker per region, generated from wrangler.toml's
  // top level (or the configuration given) as a deploy generates them (scripts/deploy/generate.ts).
  // A secret for this run that both sides of the internal boundary hold; nobody else knows it.
  const secrets = { [INTERNAL_SECRET_VAR]: randomBytes(32).toString("hex"), ...options.secrets };
  // Single quotes: dotenv takes the value literally.
  const secretsText = Object.entries(secrets)
    .map(([name, value]) => `${name}='${value}'\n`)
    .join("");
  const generate = (): Deployment => {
    const d = generateDeployment({
      root: ROOT,
      environment: undefined,
      outDir: join(state, "workers"),
      warmpathConfig: tracedConfig(options),
    });
    // wrangler dev gives `--env-file` to its first worker only; every worker reads the `.dev.vars`
    // beside its configuration. Mode 0600 (and the run's folder is 0700): secrets.
    writeFileSync(join(d.dir, ".dev.vars"), secretsText, { mode: 0o600 });
    return d;
  };
  const deployment = generate();
  const edge = deployment.workers.find((w) => w.kind === "edge")!;
  const regions = deployment.workers.filter((w) => w.kind === "region");
  const hostFlags = options.noAssets ? ["--no-assets"] : [];
  // workerd-host reads the secrets from --env-file (wrangler dev from each worker's .dev.vars).
  const envFile = join(state, "secrets.env");
  writeFileSync(envFile, secretsText, { mode: 0o600 });
  const hostSecrets = ["--env-file", envFile];
  const output: string[] = [];
  const processes: WorkerProcess[] = [];
  const traces = options.traces ? traceExporter(options.traces) : undefined;
  const onOutput =
    traces || options.onRouterOutput
      ? (line: string) => {
          traces?.push(line);
          options.onRouterOutput?.(line);
        }
      : undefined;
  const launch = (name: string, command: [string, string[]], health: string): WorkerProcess => {
    const p: WorkerProcess = { name, command, url: health, child: launchRouter(command, output, onOutput) };
    processes.push(p);
    return p;
  };
  const relaunch = (p: WorkerProcess) => {
    p.child = launchRouter(p.command, output, onOutput);
  };

  const runtime = options.runtime ?? DEFAULT_RUNTIME;
  if (runtime === "workerd") {
    // One workerd process per worker, joined over loopback HTTP as the bindings are over the network.
    const binds: string[] = [];
    /** The first region's worker holds the budget ledger: the others' binding to it (generate.ts). */
    let ledgerHome: string | undefined;
    for (const r of regions) {
      const regionPort = await freePort();
      const address = (await options.regionAddress?.(r.region!, regionPort)) ?? `127.0.0.1:${regionPort}`;
      binds.push("--bind", `${regionBindingName(r.region!)}=${address}`);
      const ledger = ledgerHome === undefined ? [] : ["--bind", `${BUDGET_LEDGER_BINDING}=${ledgerHome}`];
      ledgerHome ??= `127.0.0.1:${regionPort}`;
      const args = ["--config", r.file, "--port", String(regionPort), "--persist-to", join(stores, r.name), ...ledger, ...hostSecrets];
      launch(r.name, [process.execPath, [WORKERD_HOST, ...args]], `http://127.0.0.1:${regionPort}`);
    }
    const args = [
      "--config",
      edge.file,
      "--port",
      String(port),
      "--persist-to",
      join(stores, edge.name),
      ...binds,
      ...hostSecrets,
      ...hostFlags,
    ];
    launch("edge", [process.execPath, [WORKERD_HOST, ...args, "--inspector-port", String(await freePort())]], url);
  } else if (runtime === "workerd-single") {
    // Every worker in one workerd process, their bindings in-process as on Cloudflare: the
    // deployed path with no development machinery and no emulated network between the workers.
    launch("router", [process.execPath, singleArgs(deployment, await freePort())], url);
  } else {
    launch("router", [WRANGLER, wranglerDevArgs(deployment, await freePort())], url);
  }

  let fleet: Fleet | undefined;
  const ready = (p: WorkerProcess) => routerReady(p.child, p.url, output);
  const stop = async () => {
    await fleet?.stop();
    await Promise.all(processes.map((p) => killTree(p.child)));
    await traces?.stop();
    rmSync(state, { recursive: true, force: true });
  };
  /** workerd-host with every worker's configuration: one process, the edge first (it takes the port). */
  function singleArgs(d: Deployment, inspectorPort: number): string[] {
    const w = d.workers;
    const configs = [w.find((x) => x.kind === "edge")!, ...w.filter((x) => x.kind === "region")].flatMap((x) => ["--config", x.file]);
    const args = [...configs, "--port", String(port), "--persist-to", stores, ...hostSecrets, ...hostFlags];
    return [WORKERD_HOST, ...args, "--inspector-port", String(inspectorPort)];
  }
  /** wrangler dev with every worker's configuration: one process, the edge first (it takes the port). */
  function wranglerDevArgs(d: Deployment, inspectorPort: number): string[] {
    const w = d.workers;
    const configs = [w.find((x) => x.kind === "edge")!, ...w.filter((x) => x.kind === "region")].flatMap((x) => ["-c", x.file]);
    const args = [...configs, "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspectorPort)];
    args.push("--persist-to", stores, "--show-interactive-dev-session=false", "--log-level", "log");
    return ["dev", ...args];
  }
  const reload = async () => {
    if (runtime === "workerd")
      throw new Error(`reload runs the workers of one process only (wrangler dev or workerd-single), not runtime "${runtime}"`);
    // Validated and written before anything stops: a bad wrangler.toml leaves the workers running.
    let next: Deployment;
    try {
      next = generate();
    } catch (e) {
      throw new ConfigRejected(e instanceof Error ? e.message : String(e));
    }
    const router = processes[0]!;
    await killTree(router.child);
    if (runtime === "wrangler-dev") router.command = [WRANGLER, wranglerDevArgs(next, await freePort())];
    else {
      // workerd-host bundles the code again (its bundles are cached beside the stores for crash restarts): the code as it is now.
      rmSync(join(stores, "bundle"), { recursive: true, force: true });
      router.command = [process.execPath, singleArgs(next, await freePort())];
    }
    relaunch(router);
    await ready(router);
    return { upAt: Date.now() };
  };
  const restartRouter = async () => {
    const killedAt = Date.now();
    await Promise.all(processes.map((p) => killTree(p.child, "SIGKILL")));
    // The same arguments: the same ports, configuration and --persist-to stores.
    for (const p of processes) relaunch(p);
    await Promise.all(processes.map(ready));
    return { killedAt, upAt: Date.now() };
  };
  const regionProcess = (region: string) => {
    const name = regions.find((r) => r.region === region)?.name;
    const p = processes.find((q) => q.name === name);
    if (!p) throw new Error(`no process of its own for region ${region} (runtime "workerd" runs one per region)`);
    return p;
  };
  const system = (): System => ({
    url,
    fleet,
    traces,
    get router() {
      return processes[processes.length - 1]!.child;
    },
    processes: () => processes.map((p) => ({ name: p.name, pid: p.child.pid! })),
    restartRouter,
    reload,
    async killRegionWorker(region) {
      const killedAt = Date.now();
      await killTree(regionProcess(region).child, "SIGKILL");
      return killedAt;
    },
    async startRegionWorker(region) {
      const p = regionProcess(region);
      relaunch(p);
      await ready(p);
      return Date.now();
    },
    stop,
  });
  try {
    // Region workers first: the edge's bindings reach them.
    await Promise.all(processes.slice(0, -1).map(ready));
    await ready(processes[processes.length - 1]!);
    if (options.fleetFile === null) return system();
    const fleetConfig = options.fleetConfig ?? loadFleet(options.fleetFile ?? join(ROOT, "fleet", "fleet.default.json"));
    fleet = await startFleet(fleetConfig, { routerUrl: url, timeFactorScale: options.timeFactorScale, log: options.log });
    const expected = fleetConfig.regions.reduce((n, r) => n + r.nodes.length, 0);
    await waitFor(`${expected} nodes to register`, FLEET_READY_TIMEOUT_MS, async () => {
      // A local development server on loopback needs no admin token (whichever secret the configuration names).
      const res = await fetch(`${url}/admin/state`);
      const body = (await res.json()) as { regions: { nodes: unknown[] }[] };
      return body.regions.reduce((n, r) => n + r.nodes.length, 0) >= expected;
    });
    return system();
  } catch (e) {
    await stop();
    throw e;
  }
}
