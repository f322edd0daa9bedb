/**
 * Builds a REAL llama.cpp `llama-server` offline from the npm package `node-llama-cpp`, which carries
 * the complete llama.cpp source of its release as a git bundle (`llama/gitRelease.bundle`) next to
 * prebuilt CPU libraries in `@node-llama-cpp/<platform>` (libllama, libggml*, libllama-common).
 *
 *   node scripts/llama/build-server.ts [<node-llama-cpp dir>] [--out <cache dir>] [--full] [--force]
 *                                      [--keep-build] [--jobs N]
 *
 * Defaults: package dir `scripts/llama/deps/node_modules/node-llama-cpp` (installed by ensure.ts from
 * scripts/llama/deps/package-lock.json); output `<repo>/.cache/llama-server-<version>/`
 * with `bin/llama-server` and the shared libraries it loads (RUNPATH=$ORIGIN, so it runs from there),
 * plus `build-info.json`. Idempotent: if `bin/llama-server --version` already runs, nothing is done.
 *
 * Two build modes:
 * - fast (default when the prebuilt package for this platform is installed): a generated CMake project
 *   compiles only what the server adds on top of the prebuilt libraries — tools/server, tools/mtmd
 *   (multimodal helper the server links), vendor/cpp-httplib, vendor/hash and an empty web UI — and
 *   links against the prebuilt libllama/libggml/libllama-common. 77 build steps; measured 1 min 46 s
 *   in total (2 s clone, 104 s compile) on 2 cores (Debian 12, g++ 12.2). Build tree while building:
 *   207 MB source clone + 20 MB objects (deleted afterwards unless --keep-build); result: bin/ = 32 MB
 *   (4 MB llama-server + the prebuilt .so files). The ggml CPU backends are loaded at runtime (GGML_BACKEND_DL), so
 *   all `libggml-cpu-*.so` variants are copied next to the binary. Flags:
 *     -DCMAKE_BUILD_TYPE=Release     optimised (-O3 -DNDEBUG) like the prebuilt libraries
 *     -DLLAMA_SUBPROCESS (define)    the prebuilt libllama-common was compiled with it (common_subproc
 *                                    symbols present); headers must see the same definitions
 *     CPPHTTPLIB_* defines           the ones llama.cpp's vendor/cpp-httplib/CMakeLists.txt uses
 *     RUNPATH $ORIGIN only           the cache dir is self-contained (no path into node_modules)
 *     -G Ninja (if installed)        faster no-op/incremental builds; falls back to Unix Makefiles
 * - full (`--full`, or automatic when no prebuilt package is installed): the upstream CMake build of
 *   target llama-server only (ggml + llama + common + mtmd + server, 330 build steps); measured 5 min
 *   55 s on 2 cores; build tree 207 MB source + 81 MB objects; result: one 14 MB static binary
 *   (needs only libc/libstdc++/libgomp). Flags:
 *     -DLLAMA_USE_PREBUILT_UI=OFF    otherwise configure downloads the web UI from Hugging Face
 *     -DLLAMA_BUILD_UI=OFF           no npm build of the web UI
 *     -DLLAMA_OPENSSL=OFF            no HTTPS client needed (no model downloads), no libssl dependency
 *     -DLLAMA_BUILD_TESTS/EXAMPLES/APP=OFF   fewer targets to configure
 *     -DBUILD_SHARED_LIBS=OFF        one static binary, nothing to copy next to it
 *     -DGGML_NATIVE=ON               tuned for this CPU (the cache is machine-local)
 *
 * Requirements: git, cmake (>= 3.16), a C/C++ compiler (g++), optionally ninja. On Debian/Ubuntu:
 *   apt-get install -y git cmake g++ ninja-build
 *
 * The llama.cpp version: node-llama-cpp 3.21.1 ships llama.cpp "v0.4.0" (squashed bundle commit
 * 80fb11a, upstream commit 5b4ebc5); `llama-server --version` prints "version: 0.4.0-dev (build 1,
 * commit 5b4ebc5)" in fast mode (the build info lives in the prebuilt libllama-common) and
 * "... commit 80fb11a" in full mode (computed from the clone). The full build does not apply
 * node-llama-cpp's llama/patches/*.diff (they only touch model loading without files).
 */
import { spawnSync, type SpawnSyncOptions } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const APT_HINT = "apt-get install -y git cmake g++ ninja-build";

export interface BuildOptions {
  /** Installed node-llama-cpp package directory. Default `scripts/llama/deps/node_modules/node-llama-cpp`. */
  packageDir?: string;
  /** Output cache dir. Default `<repo>/.cache/llama-server-<version>`. */
  outDir?: string;
  /** Use the full upstream CMake build instead of linking against the prebuilt libraries. */
  full?: boolean;
  /** Rebuild even if the cached binary works. */
  force?: boolean;
  /** Keep the cloned source and build tree (`<out>/src`, `<out>/build`) for inspection. */
  keepBuild?: boolean;
  jobs?: number;
  log?: (line: string) => void;
}

export interface BuildResult {
  binary: string;
  outDir: string;
  built: boolean;
  version: string;
  seconds: number;
}

class BuildError extends Error {}

const t0 = Date.now();
const elapsed = (): string => `${((Date.now() - t0) / 1000).toFixed(1)}s`;

function run(cmd: string, args: string[], opts: SpawnSyncOptions & { quiet?: boolean } = {}): string {
  const r = spawnSync(cmd, args, {
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
    ...opts,
    stdio: opts.quiet ? "pipe" : (opts.stdio ?? "pipe"),
  });
  if (r.error) throw new BuildError(`${cmd} failed to start: ${r.error.message}`);
  if (r.status !== 0) {
    const out = `${r.stdout ?? ""}\n${r.stderr ?? ""}`.trim().split("\n").slice(-40).join("\n");
    throw new BuildError(`${cmd} ${args.join(" ")} exited with ${r.status ?? r.signal}\n${out}`);
  }
  return String(r.stdout ?? "");
}

function which(cmd: string): boolean {
  return spawnSync("sh", ["-c", `command -v ${cmd}`], { stdio: "ignore" }).status === 0;
}

/** `bin/llama-server --version` output if the binary runs, else null. */
export function cachedVersion(binary: string): string | null {
  if (!existsSync(binary)) return null;
  const r = spawnSync(binary, ["--version"], { encoding: "utf8", timeout: 30_000 });
  if (r.status !== 0) return null;
  return `${r.stdout}${r.stderr}`.trim();
}

function findPrebuilt(packageDir: string, version: string): string | null {
  const platform = `${process.platform}-${process.arch}`; // e.g. linux-x64
  const candidates = [
    join(packageDir, "..", "@node-llama-cpp", platform), // hoisted sibling (normal npm layout)
    join(packageDir, "node_modules", "@node-llama-cpp", platform), // nested
  ];
  for (const c of candidates) {
    const bins = join(c, "bins", platform);
    if (!existsSync(join(bins, "libllama-common.so"))) continue;
    const v = JSON.parse(readFileSync(join(c, "package.json"), "utf8")).version;
    if (v !== version) throw new BuildError(`@node-llama-cpp/${platform} is ${v}, node-llama-cpp is ${version}: versions must match`);
    return bins;
  }
  return null;
}

/** CMake project for the fast mode: compiles the server + mtmd + httplib, links the prebuilt libs. */
function fastCMakeLists(src: string, prebuilt: string): string {
  const libs = readdirSync(prebuilt);
  const pick = (re: RegExp, what: string): string => {
    const f = libs.find((l) => re.test(l));
    if (!f) throw new BuildError(`prebuilt ${what} not found in ${prebuilt}`);
    return f;
  };
  const ggml = pick(/^libggml(\.v[\d.]+)?\.so$/, "libggml");
  const llama = pick(/^libllama(\.v[\d.]+)?\.so$/, "libllama");
  const q = (s: string): string => JSON.stringify(s);
  return `# generated by scripts/llama/build-server.ts (fast mode)
cmake_minimum_required(VERSION 3.16)
project(llama-server-prebuilt C CXX)
set(SRC ${q(src)})
set(PRE ${q(prebuilt)})
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
set(CMAKE_SKIP_BUILD_RPATH OFF)
set(CMAKE_BUILD_WITH_INSTALL_RPATH ON)
set(CMAKE_INSTALL_RPATH "\\$ORIGIN")
find_package(Threads REQUIRED)

foreach(pair "ggml-base;libggml-base.so" "ggml;${ggml}" "llama;${llama}" "llama-common;libllama-common.so")
  list(GET pair 0 name)
  list(GET pair 1 file)
  add_library(\${name} SHARED IMPORTED)
  set_target_properties(\${name} PROPERTIES IMPORTED_LOCATION "\${PRE}/\${file}")
endforeach()
set_target_properties(ggml-base PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "\${SRC}/ggml/include")
set_target_properties(ggml PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "\${SRC}/ggml/include" INTERFACE_LINK_LIBRARIES ggml-base)
set_target_properties(llama PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "\${SRC}/include" INTERFACE_LINK_LIBRARIES "ggml;ggml-base")
set_target_properties(llama-common PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "\${SRC}/common;\${SRC}/vendor"
  INTERFACE_COMPILE_DEFINITIONS "LLAMA_SUBPROCESS"
  INTERFACE_LINK_LIBRARIES "llama;Threads::Threads")

add_library(vendor-hash STATIC \${SRC}/vendor/hash/hash.cpp \${SRC}/vendor/hash/xxhash/xxhash.c
  \${SRC}/vendor/hash/sha1/sha1.c \${SRC}/vendor/hash/sha256/sha256.c)
set_source_files_properties(\${SRC}/vendor/hash/sha1/sha1.c PROPERTIES LANGUAGE CXX)
target_include_directories(vendor-hash PUBLIC \${SRC}/vendor PRIVATE \${SRC}/vendor/hash)
target_compile_options(vendor-hash PRIVATE -w)

add_library(cpp-httplib STATIC \${SRC}/vendor/cpp-httplib/httplib.cpp)
target_include_directories(cpp-httplib PUBLIC \${SRC}/vendor)
target_compile_options(cpp-httplib PRIVATE -w)
target_compile_definitions(cpp-httplib PRIVATE CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH=1048576
  CPPHTTPLIB_LISTEN_BACKLOG=512 CPPHTTPLIB_REQUEST_URI_MAX_LENGTH=32768 CPPHTTPLIB_TCP_NODELAY=1)
target_link_libraries(cpp-httplib PRIVATE Threads::Threads)

file(GLOB MTMD_SRCS \${SRC}/tools/mtmd/mtmd*.cpp \${SRC}/tools/mtmd/clip.cpp \${SRC}/tools/mtmd/models/*.cpp)
list(FILTER MTMD_SRCS EXCLUDE REGEX "mtmd-cli\\\\.cpp$")
add_library(mtmd STATIC \${MTMD_SRCS})
target_include_directories(mtmd PUBLIC \${SRC}/tools/mtmd PRIVATE \${SRC}/vendor)
target_link_libraries(mtmd PUBLIC llama ggml vendor-hash Threads::Threads)
target_compile_options(mtmd PRIVATE -w)

# the server embeds its web UI from generated ui.cpp/ui.h; we generate them with no assets
add_executable(llama-ui-embed \${SRC}/tools/ui/embed.cpp)
add_custom_command(OUTPUT \${CMAKE_BINARY_DIR}/ui/ui.cpp \${CMAKE_BINARY_DIR}/ui/ui.h
  COMMAND \${CMAKE_COMMAND} -E make_directory \${CMAKE_BINARY_DIR}/ui
  COMMAND llama-ui-embed \${CMAKE_BINARY_DIR}/ui/ui.cpp \${CMAKE_BINARY_DIR}/ui/ui.h
  DEPENDS llama-ui-embed)
add_library(llama-ui STATIC \${CMAKE_BINARY_DIR}/ui/ui.cpp)
target_include_directories(llama-ui PUBLIC \${CMAKE_BINARY_DIR}/ui)

file(GLOB SERVER_SRCS \${SRC}/tools/server/*.cpp)
add_executable(llama-server \${SERVER_SRCS})
target_include_directories(llama-server PRIVATE \${SRC}/tools/server \${SRC}/tools/mtmd \${SRC})
target_link_libraries(llama-server PRIVATE llama-common mtmd llama-ui cpp-httplib llama ggml ggml-base Threads::Threads)
`;
}

export function buildServer(opts: BuildOptions = {}): BuildResult {
  const log = opts.log ?? ((l: string) => console.log(`[build-server ${elapsed()}] ${l}`));
  const start = Date.now();
  const packageDir = resolve(opts.packageDir ?? join(ROOT, "scripts", "llama", "deps", "node_modules", "node-llama-cpp"));
  const pkgJson = join(packageDir, "package.json");
  if (!existsSync(pkgJson)) {
    throw new BuildError(`node-llama-cpp not found at ${packageDir}; install it (npm install) or pass its directory`);
  }
  const version: string = JSON.parse(readFileSync(pkgJson, "utf8")).version;
  const bundle = join(packageDir, "llama", "gitRelease.bundle");
  if (!existsSync(bundle)) throw new BuildError(`${bundle} missing: this node-llama-cpp does not carry the llama.cpp source`);
  const outDir = resolve(opts.outDir ?? join(ROOT, ".cache", `llama-server-${version}`));
  const binDir = join(outDir, "bin");
  const binary = join(binDir, "llama-server");

  if (!opts.force) {
    const v = cachedVersion(binary);
    if (v) {
      log(`up to date: ${binary} (${v.split("\n")[0]})`);
      return { binary, outDir, built: false, version: v, seconds: 0 };
    }
  }

  const ninja = which("ninja");
  const missing = ["git", "cmake"].filter((c) => !which(c));
  if (!ninja && !which("make")) missing.push("make (or ninja)");
  const cxx = ["c++", "g++", "clang++"].find(which);
  if (!cxx) missing.push("g++");
  if (missing.length) {
    throw new BuildError(`missing build tools: ${missing.join(", ")}. On Debian/Ubuntu: ${APT_HINT}`);
  }
  const jobs = opts.jobs ?? availableParallelism();

  const prebuilt = opts.full ? null : findPrebuilt(packageDir, version);
  const mode = prebuilt ? "fast" : "full";
  if (!prebuilt && !opts.full) {
    log(`no @node-llama-cpp/${process.platform}-${process.arch} prebuilt libraries found: using the full build (~6 min on 2 cores)`);
  }
  log(`node-llama-cpp ${version}, mode ${mode}, ${jobs} jobs, generator ${ninja ? "Ninja" : "Unix Makefiles"}, output ${outDir}`);

  const src = join(outDir, "src");
  const build = join(outDir, "build");
  rmSync(src, { recursive: true, force: true });
  rmSync(build, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });

  log(`cloning ${bundle}`);
  run("git", ["-c", "advice.detachedHead=false", "clone", "--quiet", bundle, src]);
  const commit = run("git", ["-C", src, "rev-parse", "HEAD"]).trim();
  log(`source at bundle commit ${commit.slice(0, 12)}`);

  const generator = ninja ? ["-G", "Ninja"] : ["-G", "Unix Makefiles"];
  let sourceDir: string;
  let cmakeArgs: string[];
  if (prebuilt) {
    sourceDir = join(build, "project");
    mkdirSync(sourceDir, { recursive: true });
    writeFileSync(join(sourceDir, "CMakeLists.txt"), fastCMakeLists(src, prebuilt));
    cmakeArgs = ["-DCMAKE_BUILD_TYPE=Release"];
  } else {
    sourceDir = src;
    cmakeArgs = [
      "-DCMAKE_BUILD_TYPE=Release",
      "-DLLAMA_USE_PREBUILT_UI=OFF",
      "-DLLAMA_BUILD_UI=OFF",
      "-DLLAMA_OPENSSL=OFF",
      "-DLLAMA_BUILD_TESTS=OFF",
      "-DLLAMA_BUILD_EXAMPLES=OFF",
      "-DLLAMA_BUILD_APP=OFF",
      "-DLLAMA_BUILD_TOOLS=ON",
      "-DLLAMA_BUILD_SERVER=ON",
      "-DBUILD_SHARED_LIBS=OFF",
      "-DGGML_NATIVE=ON",
    ];
  }
  const cmakeBuild = join(build, "out");
  log(`configuring (cmake ${cmakeArgs.join(" ")})`);
  run("cmake", ["-S", sourceDir, "-B", cmakeBuild, ...generator, ...cmakeArgs]);
  log(`compiling llama-server (this is the slow part: ~1.7 min fast mode, ~6 min full mode on 2 cores)`);
  const tBuild = Date.now();
  run("cmake", ["--build", cmakeBuild, "--target", "llama-server", "-j", String(jobs)], { stdio: ["ignore", "inherit", "pipe"] });
  log(`compiled in ${((Date.now() - tBuild) / 1000).toFixed(0)}s`);

  const built = [join(cmakeBuild, "llama-server"), join(cmakeBuild, "bin", "llama-server")].find(existsSync);
  if (!built) throw new BuildError(`build finished but no llama-server binary under ${cmakeBuild}`);
  const tmpBin = join(outDir, `bin.tmp-${process.pid}`);
  rmSync(tmpBin, { recursive: true, force: true });
  mkdirSync(tmpBin, { recursive: true });
  cpSync(built, join(tmpBin, "llama-server"));
  if (prebuilt) {
    for (const f of readdirSync(prebuilt)) if (f.endsWith(".so")) cpSync(join(prebuilt, f), join(tmpBin, f));
  }
  rmSync(binDir, { recursive: true, force: true });
  renameSync(tmpBin, binDir);

  const v = cachedVersion(binary);
  if (!v) throw new BuildError(`${binary} was built but does not run (--version failed)`);
  const seconds = Math.round((Date.now() - start) / 1000);
  const info = {
    nodeLlamaCpp: version,
    mode,
    bundleCommit: commit,
    llamaCppTag: readLlamaTag(packageDir),
    versionOutput: v,
    builtAt: new Date().toISOString(),
    buildSeconds: seconds,
    compiler: run(cxx!, ["--version"]).split("\n")[0],
    binDirBytes: dirBytes(binDir),
  };
  writeFileSync(join(outDir, "build-info.json"), JSON.stringify(info, null, 2) + "\n");
  if (!opts.keepBuild) {
    rmSync(src, { recursive: true, force: true });
    rmSync(build, { recursive: true, force: true });
  }
  log(`done in ${seconds}s: ${binary}`);
  log(v.split("\n")[0] ?? "");
  return { binary, outDir, built: true, version: v, seconds };
}

function readLlamaTag(packageDir: string): string | null {
  try {
    return JSON.parse(readFileSync(join(packageDir, "llama", "llama.cpp.info.json"), "utf8")).tag ?? null;
  } catch {
    return null;
  }
}

function dirBytes(dir: string): number {
  let n = 0;
  for (const f of readdirSync(dir)) n += statSync(join(dir, f)).size;
  return n;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      out: { type: "string" },
      full: { type: "boolean", default: false },
      force: { type: "boolean", default: false },
      "keep-build": { type: "boolean", default: false },
      jobs: { type: "string" },
    },
  });
  try {
    const opts: BuildOptions = { full: values.full, force: values.force, keepBuild: values["keep-build"] };
    if (positionals[0]) opts.packageDir = positionals[0];
    if (values.out) opts.outDir = values.out;
    if (values.jobs) opts.jobs = Number(values.jobs);
    buildServer(opts);
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    console.error(`[build-server] FAILED: ${msg}`);
    if (!(e instanceof BuildError) && e instanceof Error && e.stack) console.error(e.stack);
    process.exit(1);
  }
}
