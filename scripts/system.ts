/**
 * Boots the whole system locally: the router under `wrangler dev` (local workerd, local Durable
 * Objects) and a simulated fleet reporting to it. Used by `npm start`, `npm run demo` and the
 * end-to-end tests, so all three run exactly the same system.
 *
 * Each boot gets a fresh Durable Object store (`--persist-to` a temporary folder): a node table
 * left over from an earlier run would name nodes on ports that no longer exist. A configuration
 * override (e.g. another routing policy) is passed to wrangler as WARMPATH_CONFIG in a temporary
 * env file, the same way `.dev.vars` would carry it: the worker reads it as configuration, there is
 * no separate code path. For fault injection, the router process can be killed and started again
 * on the same store (`restartRouter`).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadFleet, type FleetConfig } from "../fleet/config.ts";
import { startFleet, type Fleet } from "../fleet/fleet.ts";

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
   * What runs the router. Default `"wrangler-dev"` (what `npm start` runs); `"workerd"`: the deploy
   * bundle in workerd with no development machinery in the request path (scripts/workerd-host.ts).
   */
  runtime?: "wrangler-dev" | "workerd";
  /** A full configuration document replacing wrangler.toml's WARMPATH_CONFIG. */
  config?: unknown;
  /** More variables for the worker (as `.dev.vars` would carry secrets), by name. */
  secrets?: Record<string, string>;
  /** Where wrangler's output goes. Default: discarded unless it fails to start. */
  onRouterOutput?: (line: string) => void;
  log?: (event: Record<string, unknown>) => void;
}

export interface System {
  url: string;
  /** The simulated fleet (undefined with `fleetFile: null`). */
  fleet: Fleet | undefined;
  /** The wrangler dev process running now (a new one after restartRouter). */
  readonly router: ChildProcess;
  /**
   * Kills wrangler dev and its process tree (workerd) with SIGKILL, as a crash would, and starts
   * it again with the same arguments: same port, same configuration, same --persist-to store, so
   * the Durable Objects' storage survives and their memory does not. Resolves when /healthz
   * answers again, with when the kill was sent and when it answered (ms epoch).
   */
  restartRouter(): Promise<{ killedAt: number; upAt: number }>;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

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

/**
 * Kills a child and its process group (wrangler starts workerd as its own child): SIGTERM, then
 * SIGKILL after 5 s; or SIGKILL at once, as a crash would.
 */
async function killTree(child: ChildProcess, signal: "SIGTERM" | "SIGKILL" = "SIGTERM"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const kill = (sig: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, sig);
    } catch {
      child.kill(sig);
    }
  };
  kill(signal);
  const timeout = sleep(5000).then(() => "timeout" as const);
  if ((await Promise.race([exited, timeout])) === "timeout") {
    kill("SIGKILL");
    await exited;
  }
}

const WORKERD_HOST = join(ROOT, "scripts", "workerd-host.ts");

/** The router's command line (wrangler dev, or the workerd host with the same flags). */
function routerCommand(runtime: SystemOptions["runtime"], args: string[]): [string, string[]] {
  return runtime === "workerd" ? [process.execPath, [WORKERD_HOST, ...args]] : [WRANGLER, ["dev", ...args]];
}

/** The router process with these arguments, its output kept in `output` (the last 500 lines) and passed on. */
function launchRouter(command: [string, string[]], output: string[], onOutput: ((line: string) => void) | undefined): ChildProcess {
  const router = spawn(command[0], command[1], {
    cwd: ROOT,
    detached: true, // its own process group, so stop() also ends workerd
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" },
  });
  for (const stream of [router.stdout!, router.stderr!]) {
    stream.setEncoding("utf8");
    stream.on("data", (chunk: string) => {
      for (const line of chunk.split("\n")) {
        if (!line) continue;
        output.push(line);
        if (output.length > 500) output.shift();
        onOutput?.(line);
      }
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

export async function startSystem(options: SystemOptions = {}): Promise<System> {
  const port = options.port === 0 ? await freePort() : (options.port ?? 8787);
  const url = `http://127.0.0.1:${port}`;
  const state = mkdtempSync(join(tmpdir(), "warmpath-"));
  const args = ["--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(await freePort()), "--persist-to", state];
  if (options.runtime !== "workerd") args.push("--show-interactive-dev-session=false", "--log-level", "log");
  const vars = { ...options.secrets, ...(options.config !== undefined ? { WARMPATH_CONFIG: JSON.stringify(options.config) } : {}) };
  if (Object.keys(vars).length > 0) {
    const envFile = join(state, "config.env");
    // Single quotes: dotenv takes the value literally.
    writeFileSync(
      envFile,
      Object.entries(vars)
        .map(([name, value]) => `${name}='${value}'\n`)
        .join(""),
    );
    args.push("--env-file", envFile);
  }
  const output: string[] = [];
  const command = routerCommand(options.runtime, args);
  let router = launchRouter(command, output, options.onRouterOutput);
  let fleet: Fleet | undefined;
  const stop = async () => {
    await fleet?.stop();
    await killTree(router);
    rmSync(state, { recursive: true, force: true });
  };
  const restartRouter = async () => {
    const killedAt = Date.now();
    await killTree(router, "SIGKILL");
    // The same arguments: the same port, configuration and --persist-to store.
    router = launchRouter(command, output, options.onRouterOutput);
    await routerReady(router, url, output);
    return { killedAt, upAt: Date.now() };
  };
  const system = (): System => ({
    url,
    fleet,
    get router() {
      return router;
    },
    restartRouter,
    stop,
  });
  try {
    await routerReady(router, url, output);
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
