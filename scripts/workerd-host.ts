/**
 * Runs one worker in workerd the way Cloudflare runs it, without `wrangler dev`'s development
 * machinery: the bundle `wrangler deploy` would upload, the bindings its configuration declares,
 * and a socket straight to the worker. Used by the end-to-end benchmarks (bench/e2e, bench/wan) to
 * tell the router's own cost apart from the development stack's, and by scripts/system.ts
 * (`runtime: "workerd"`: the edge and each region's worker in a process of its own, as deployed).
 *
 *   node scripts/workerd-host.ts --port 8788 [--config FILE] [--bind NAME=HOST:PORT ...]
 *        [--persist-to DIR] [--env-file FILE] [--inspector-port N]
 *
 * `--config`: a wrangler configuration (default wrangler.toml, the local single-process
 * composition; scripts/deploy/generate.ts writes one per worker). `--bind NAME=HOST:PORT`: the
 * service binding NAME reaches the worker listening there over HTTP (the edge's binding to a
 * region worker in another process, or through bench:wan's long-haul relay), instead of a worker
 * in this process.
 *
 * What `wrangler dev` adds and this leaves out (together, in bench/e2e/RESULTS.md: the same workers
 * under wrangler dev against npm start's topology, in one sitting): the
 * ProxyWorker (a second workerd process that takes every request on the public port and forwards
 * it over loopback HTTP), miniflare's entry worker (a worker hop in front of the router that also
 * logs every request to the CLI over a loopback HTTP call), and the inspector session through
 * which every `console.log` is relayed to the CLI. Here the worker's console lines go to workerd's
 * stdout, as `wrangler tail` would show them.
 *
 * Same runtime: Miniflare and workerd are wrangler's own dependencies (resolved from wrangler's
 * package), so both paths run the same workerd build; the compatibility date and flags come from
 * wrangler.toml. Local stand-ins remain for what only exists on Cloudflare (the rate limiter and
 * Analytics Engine bindings are Miniflare's local simulations, as under wrangler dev).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs, parseEnv } from "node:util";
import { parse as parseToml } from "smol-toml";
import { LOCAL_ASSETS_BINDING } from "../src/contracts/topology.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const WRANGLER = join(ROOT, "node_modules", ".bin", "wrangler");

const { values: flags } = parseArgs({
  options: {
    port: { type: "string", default: "8788" },
    ip: { type: "string", default: "127.0.0.1" },
    "persist-to": { type: "string" },
    "env-file": { type: "string" },
    /** workerd's V8 inspector (Chrome DevTools, or bench/wan/stages.ts); none by default. */
    "inspector-port": { type: "string" },
    config: { type: "string", multiple: true, default: [join(ROOT, "wrangler.toml")] },
    bind: { type: "string", multiple: true, default: [] },
    /**
     * Leaves the static assets (the dashboard) and their worker ({@link assetWorker}) out: the
     * benchmarks, which call only the API, boot one worker fewer.
     */
    "no-assets": { type: "boolean", default: false },
  },
});

/** A JSON variable stays JSON (WARMPATH_CONFIG is an object in wrangler.toml), as wrangler dev passes it. */
function parseVar(value: string): unknown {
  try {
    const parsed: unknown = JSON.parse(value);
    return typeof parsed === "object" && parsed !== null ? parsed : value;
  } catch {
    return value;
  }
}

// Absolute: wrangler resolves `--outdir` against the configuration's folder, not this process's.
const state = resolve(flags["persist-to"] ?? mkdtempSync(join(tmpdir(), "warmpath-workerd-")));
/** wrangler's option types are loose (`unknown` per binding kind): these are the fields it produced. */
type HostOptions = Parameters<typeof convertV4MiniflareOptions>[0];
type WorkerHostOptions = Record<string, unknown> & { name: string };

const fromWrangler = createRequire(createRequire(import.meta.url).resolve("wrangler"));
const { unstable_getMiniflareWorkerOptions } = (await import("wrangler")) as typeof import("wrangler");
const { Miniflare, convertV4MiniflareOptions } = (await import(fromWrangler.resolve("miniflare"))) as typeof import("miniflare");
// Read as wrangler dev reads --env-file (dotenv's rules, which Node's parseEnv follows).
const overrides: NodeJS.Dict<string> = flags["env-file"] ? parseEnv(readFileSync(flags["env-file"], "utf8")) : {};
/** Service bindings to workers in other processes, over HTTP. */
const external = Object.fromEntries(
  (flags.bind ?? []).map((spec) => {
    const [name, address] = spec.split("=");
    if (!name || !address) throw new Error(`--bind takes NAME=HOST:PORT, not ${spec}`);
    return [name, { external: { address, http: {} } }];
  }),
);

/** A configuration's worker name (wrangler's Miniflare options leave it out). */
function configName(config: string): string {
  const text = readFileSync(config, "utf8");
  const doc = (config.endsWith(".json") ? JSON.parse(text) : parseToml(text)) as { name?: string };
  if (!doc.name) throw new Error(`${config} names no worker`);
  return doc.name;
}

/**
/** Where the i-th configuration's bundle goes. */
const bundleDir = (index: number) => join(state, "bundle", String(index));

/**
 * Bundles a worker as `wrangler deploy` would (unless its bundle is already there: a restart).
 * The workers are bundled side by side (each its own wrangler process): one after another, the
 * three of `npm start` took ~35 s to start on a busy 2-core machine. wrangler's info lines (which
 * `.dev.vars` it read) are left out; its warnings and errors are not.
 */
async function bundle(config: string, index: number): Promise<void> {
  const outdir = bundleDir(index);
  if (existsSync(join(outdir, "index.js"))) return;
  mkdirSync(outdir, { recursive: true });
  await new Promise<void>((resolvePromise, reject) => {
    const child = spawn(WRANGLER, ["deploy", "--dry-run", "--config", config, "--outdir", outdir], {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "inherit"],
      env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1", WRANGLER_LOG: "warn" },
    });
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0 ? resolvePromise() : reject(new Error(`wrangler deploy --dry-run --config ${config} exited ${code}`)),
    );
  });
}

/**
 * One worker's options: the exact bundle a deploy uploads (wrangler's esbuild settings, its shims
 * and defines) and its configuration's bindings; after it, its {@link assetWorker} when it has
 * static assets. A worker started again on its store (a crash and restart: scripts/system.ts) runs
 * the bundle it ran, as a restarted worker on Cloudflare does, and is back in a second or two
 * instead of 7-14 s.
 */
function worker(config: string, index: number): WorkerHostOptions[] {
  const outdir = bundleDir(index);
  const { workerOptions, main } = unstable_getMiniflareWorkerOptions(config);
  // The bundle's entry is named after the configuration's `main` (index.js for src/index.ts).
  const entry = main ? main.replace(/^.*[\\/]/, "").replace(/\.[mc]?[jt]s$/, ".js") : "index.js";
  const o = workerOptions as WranglerOptions;
  // Miniflare addresses the direct socket, and other workers' service bindings, by this name.
  const name = configName(config);
  const assets = o.assets && !flags["no-assets"] ? assetWorker(name, o.assets, o.compatibilityDate) : undefined;
  const own: WorkerHostOptions = {
    name,
    modules: true,
    scriptPath: join(outdir, entry),
    // workerd refuses module paths that climb out of the modules root ("can't use '..'").
    modulesRoot: outdir,
    compatibilityDate: o.compatibilityDate,
    compatibilityFlags: o.compatibilityFlags,
    durableObjects: o.durableObjects,
    ratelimits: o.ratelimits,
    serviceBindings: {
      ...(o.serviceBindings as Record<string, unknown>),
      ...external,
      ...(assets ? { [LOCAL_ASSETS_BINDING]: assets.name } : {}),
    },
    analyticsEngineDatasets: o.analyticsEngineDatasets,
    bindings: {
      ...(o.bindings as Record<string, unknown>),
      ...Object.fromEntries(Object.entries(overrides).map(([k, v]) => [k, parseVar(v ?? "")])),
    },
  };
  return assets ? [own, assets] : [own];
}

/** wrangler's options for a worker, with the static assets' fields read here. */
type WranglerOptions = Record<string, unknown> & { assets?: { directory: string; assetConfig?: unknown } };

/**
 * A worker with static assets (the edge: the dashboard) gets them from a worker of their own,
 * bound as LOCAL_ASSETS (src/edge/api/local-assets.ts), rather than through Miniflare's `assets`
 * option on the worker itself: with it, Miniflare puts its asset router and an RPC proxy in front
 * of every request, the API's too (1-2 ms of CPU a request), where Cloudflare serves the files
 * before the worker runs and sends `run_worker_first` paths straight to it. This worker has the
 * files and no code of its own: a path that names no file is its 404.
 */
function assetWorker(name: string, assets: NonNullable<WranglerOptions["assets"]>, compatibilityDate: unknown): WorkerHostOptions {
  return {
    name: `${name}-assets`,
    modules: true,
    script: "export default { fetch: () => new Response(null, { status: 404 }) };",
    compatibilityDate,
    assets: { directory: assets.directory, routerConfig: { has_user_worker: false }, assetConfig: assets.assetConfig },
  };
}

// Several configurations: one process, their service bindings between them in-process as on
// Cloudflare (no HTTP hop); the first one takes the socket (the edge).
await Promise.all(flags.config.map(bundle));
const workers = flags.config.flatMap(worker);
const first = workers[0]!;
const mf = new Miniflare(
  convertV4MiniflareOptions({
    workers: workers.map((w, i) => (i === 0 ? { ...w, unsafeDirectSockets: [{ host: flags.ip, port: Number(flags.port) }] } : w)),
    // The store a worker started again on (scripts/system.ts) finds as it left it: Durable Object
    // storage under <state>/<plugin>. (This Miniflare's v4 adapter drops `durableObjectsPersist`,
    // and storage silently stayed in a temporary folder: a restarted region worker came back with
    // an empty node table and usage ledger.)
    resourcePersistencePath: state,
    logRequests: false,
    ...(flags["inspector-port"] ? { inspectorPort: Number(flags["inspector-port"]) } : {}),
  } as unknown as HostOptions),
);
await mf.ready;
const url = await mf.unsafeGetDirectURL(first.name);
console.log(`${workers.map((w) => w.name).join(", ")} in workerd at ${url.href}`);

let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    void mf.dispose().finally(() => process.exit(0));
  });
}
