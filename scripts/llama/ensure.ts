/**
 * Everything a run against real llama.cpp needs, made once and cached: node-llama-cpp's source
 * bundle and prebuilt libraries (`npm ci` of scripts/llama/deps, exact versions and integrity
 * hashes from its lock; `--omit=optional` skips ~650 MB of other platforms' binaries), the
 * `llama-server` built from them (build-server.ts, cached in `.cache/llama-server-<version>/`,
 * about 1.5 minutes on 2 cores the first time), and the tiny generated model (make-gguf.ts,
 * `.cache/tiny-llama.gguf`, deterministic). The cache is keyed by the package version: a new
 * node-llama-cpp version builds a new server beside the old one.
 *
 * Several processes may ask at once (`node --test` runs test files in parallel where there are
 * cores to spare: the llama e2e test and the conformance test both need the server), so the work is
 * done under a lock (`.cache/llama.lock`, a directory: its creation is atomic): the first builds,
 * the others wait and then find it built.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { ROOT } from "../system.ts";
import { buildServer } from "./build-server.ts";
import { writeGguf } from "./make-gguf.ts";

const DEPS = join(ROOT, "scripts", "llama", "deps");
const MODEL = join(ROOT, ".cache", "tiny-llama.gguf");

export interface LlamaParts {
  binary: string;
  model: string;
  version: string;
}

const LOCK = join(ROOT, ".cache", "llama.lock");
/** A lock older than this was left by a process that died: a fast build takes ~2 min, a full one ~6 (build-server.ts). */
const STALE_LOCK_MS = 20 * 60_000;
const LOCK_POLL_MS = 500;

/** Runs `work` holding LOCK, waiting (synchronously, as everything here is) while another process holds it. */
function locked<T>(log: (line: string) => void, work: () => T): T {
  mkdirSync(dirname(LOCK), { recursive: true });
  const pause = new Int32Array(new SharedArrayBuffer(4));
  let said = false;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      const age = Date.now() - (statSync(LOCK, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > STALE_LOCK_MS) rmSync(LOCK, { recursive: true, force: true });
      else {
        if (!said) log(`[llama] waiting for another process to finish preparing llama-server (${LOCK})...`);
        said = true;
        Atomics.wait(pause, 0, 0, LOCK_POLL_MS);
      }
    }
  }
  try {
    return work();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

export function ensureLlama(log: (line: string) => void = (l) => console.error(l)): LlamaParts {
  return locked(log, () => prepare(log));
}

function prepare(log: (line: string) => void): LlamaParts {
  if (!existsSync(join(DEPS, "node_modules", "node-llama-cpp", "package.json"))) {
    log("[llama] installing node-llama-cpp (scripts/llama/deps)...");
    const npm = spawnSync("npm", ["ci", "--omit=optional", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: DEPS, stdio: "inherit" });
    if (npm.status !== 0) throw new Error(`npm ci in ${DEPS} failed (${npm.status ?? npm.signal})`);
  }
  const built = buildServer({ log });
  if (!existsSync(MODEL)) writeGguf(MODEL);
  return { binary: built.binary, model: MODEL, version: built.version };
}
