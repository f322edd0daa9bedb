/**
 * Everything a run against real llama.cpp needs, made once and cached: node-llama-cpp's source
 * bundle and prebuilt libraries (`npm ci` of scripts/llama/deps, exact versions and integrity
 * hashes from its lock; `--omit=optional` skips ~650 MB of other platforms' binaries), the
 * `llama-server` built from them (build-server.ts, cached in `.cache/llama-server-<version>/`,
 * about 1.5 minutes on 2 cores the first time), and the tiny generated model (make-gguf.ts,
 * `.cache/tiny-llama.gguf`, deterministic). The cache is keyed by the package version: a new
 * node-llama-cpp version builds a new server beside the old one.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
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

export function ensureLlama(log: (line: string) => void = (l) => console.error(l)): LlamaParts {
  if (!existsSync(join(DEPS, "node_modules", "node-llama-cpp", "package.json"))) {
    log("[llama] installing node-llama-cpp (scripts/llama/deps)...");
    const npm = spawnSync("npm", ["ci", "--omit=optional", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: DEPS, stdio: "inherit" });
    if (npm.status !== 0) throw new Error(`npm ci in ${DEPS} failed (${npm.status ?? npm.signal})`);
  }
  const built = buildServer({ log });
  if (!existsSync(MODEL)) writeGguf(MODEL);
  return { binary: built.binary, model: MODEL, version: built.version };
}
