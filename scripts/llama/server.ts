/**
 * Starts a real `llama-server` (built by build-server.ts) for tests and demos.
 *
 *   const srv = await startLlamaServer({ binary, model, parallel: 1, cacheRam: 0 });
 *   await fetch(`${srv.url}/v1/chat/completions`, ...);
 *   await srv.stop();
 *
 * Default flags and why:
 *   -t 1 / -tb 1        one thread: the test machines have 2 cores and several servers may run at once
 *   -c 8192             total KV context (shared by all slots with the unified KV cache, which is on by
 *                       default in this build); a ~2,000-token prompt fits comfortably
 *   -np <parallel>      number of slots (default 1 here; llama-server's own default is -1 = auto = 4)
 *   --metrics           Prometheus `/metrics` (off by default in llama-server)
 *   --slots             `/slots` monitoring (on by default; passed explicitly)
 *   --cache-ram N       only when `cacheRam` is given: 0 disables the host-RAM prompt cache so that what
 *                       a slot holds is exactly what the KV cache holds (default in llama-server: 8192 MiB)
 *   --no-warmup         faster start; warmup only primes kernels
 *   --host 127.0.0.1, --no-ui, --log-colors off
 * LLAMA_ARG_* variables are removed from the child's environment (llama-server reads every flag from
 * them) so the host environment cannot change a test's configuration.
 *
 * `stop()` sends SIGTERM to the server's process group (it is started detached as its own group
 * leader), waits for exit and escalates to SIGKILL after `stopTimeoutMs`; `kill()` is SIGKILL at once.
 * Either way no process is left behind. llama-server spawns no children in this configuration, but
 * the group kill covers any.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { freePort } from "../ports.ts";

export interface LlamaServerOptions {
  /** Path to the llama-server binary (e.g. `.cache/llama-server-3.21.1/bin/llama-server`). */
  binary: string;
  /** Path to the GGUF model. */
  model: string;
  /** TCP port; 0 or undefined picks a free one. */
  port?: number;
  host?: string;
  /** Compute threads (-t and -tb). Default 1. */
  threads?: number;
  /** Parallel slots (-np). Default 1. */
  parallel?: number;
  /** Total context size (-c). Default 8192. */
  ctx?: number;
  /** --cache-ram in MiB when given (0 = off). Not passed otherwise (server default 8192). */
  cacheRam?: number;
  /** Model alias reported by /v1/models (--alias). */
  alias?: string;
  /** Additional command-line arguments, appended last (they win over the defaults). */
  extraArgs?: string[];
  /** Max time to wait for /health to answer 200. Default 60 s. */
  readyTimeoutMs?: number;
  /** How long stop() waits after SIGTERM before SIGKILL. Default 5 s. */
  stopTimeoutMs?: number;
  /** Receives every line the server logs (stdout and stderr). Not with `logFile`. */
  onLog?: (line: string) => void;
  /**
   * Write the server's stdout and stderr straight to this file instead of through pipes to this
   * process: at debug verbosity (`-lv 5`, ~15 lines a token) a pipe that this process reads slowly
   * holds up llama-server's log thread, whose queue (512 entries) then lags the engine by dozens of
   * tokens. A file keeps the log within a few entries of what the engine does.
   */
  logFile?: string;
}

export interface LlamaServer {
  url: string;
  port: number;
  pid: number;
  /** The full argv used (binary first). */
  argv: string[];
  /** Last log lines (up to 200), for error messages. */
  logTail(): string[];
  /** Resolves when the process has exited. */
  exited: Promise<number | null>;
  /** SIGTERM the process group, SIGKILL after stopTimeoutMs; resolves once it has exited. */
  stop(): Promise<void>;
  /** SIGKILL the process group at once; resolves once it has exited. */
  kill(): Promise<void>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function startLlamaServer(opts: LlamaServerOptions): Promise<LlamaServer> {
  const host = opts.host ?? "127.0.0.1";
  const port = opts.port ? opts.port : await freePort(host);
  const threads = String(opts.threads ?? 1);
  const args = [
    "-m",
    opts.model,
    "--host",
    host,
    "--port",
    String(port),
    "-t",
    threads,
    "-tb",
    threads,
    "-c",
    String(opts.ctx ?? 8192),
    "-np",
    String(opts.parallel ?? 1),
    "--metrics",
    "--slots",
    "--no-warmup",
    "--no-ui",
    "--log-colors",
    "off",
  ];
  if (opts.cacheRam !== undefined) args.push("--cache-ram", String(opts.cacheRam));
  if (opts.alias) args.push("--alias", opts.alias);
  args.push(...(opts.extraArgs ?? []));

  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("LLAMA_ARG_")) env[k] = v;

  const logFd = opts.logFile ? openSync(opts.logFile, "a") : undefined;
  const child: ChildProcess = spawn(opts.binary, args, {
    env,
    detached: true,
    stdio: logFd === undefined ? ["ignore", "pipe", "pipe"] : ["ignore", logFd, logFd],
  });
  if (logFd !== undefined) closeSync(logFd); // the child has its own copy
  const tail: string[] = [];
  const logTail = (): string[] =>
    opts.logFile && existsSync(opts.logFile) ? readFileSync(opts.logFile, "utf8").split("\n").slice(-200) : [...tail];
  const onLine = (line: string): void => {
    tail.push(line);
    if (tail.length > 200) tail.shift();
    opts.onLog?.(line);
  };
  for (const stream of [child.stdout, child.stderr]) {
    let buf = "";
    stream?.setEncoding("utf8");
    stream?.on("data", (chunk: string) => {
      buf += chunk;
      let i: number;
      while ((i = buf.indexOf("\n")) >= 0) {
        onLine(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    });
  }
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolveExit) => {
    child.once("exit", (code, signal) => {
      exitCode = code ?? (signal ? -1 : null);
      resolveExit(exitCode);
    });
    child.once("error", (err) => {
      onLine(`spawn error: ${err.message}`);
      exitCode = -1;
      resolveExit(-1);
    });
  });
  const pid = child.pid ?? -1;

  const signalGroup = (sig: NodeJS.Signals): void => {
    if (exitCode !== undefined || pid <= 0) return;
    try {
      process.kill(-pid, sig); // the whole group: server and any children
    } catch {
      try {
        child.kill(sig);
      } catch {
        /* already gone */
      }
    }
  };
  const kill = async (): Promise<void> => {
    signalGroup("SIGKILL");
    await exited;
  };
  const stop = async (): Promise<void> => {
    if (exitCode !== undefined) return;
    signalGroup("SIGTERM");
    const timeout = opts.stopTimeoutMs ?? 5000;
    const done = await Promise.race([exited.then(() => true), sleep(timeout).then(() => false)]);
    if (!done) await kill();
  };
  // never leave a server behind when the parent exits normally
  const onParentExit = (): void => signalGroup("SIGKILL");
  process.once("exit", onParentExit);
  void exited.then(() => process.removeListener("exit", onParentExit));

  const url = `http://${host}:${port}`;
  const deadline = Date.now() + (opts.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (exitCode !== undefined) {
      throw new Error(`llama-server exited (${exitCode}) before becoming ready:\n${logTail().slice(-30).join("\n")}`);
    }
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
      if (res.status === 200) break;
      await res.body?.cancel();
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      await kill();
      throw new Error(`llama-server not ready within ${opts.readyTimeoutMs ?? 60_000} ms:\n${logTail().slice(-30).join("\n")}`);
    }
    await sleep(50);
  }
  return { url, port, pid, argv: [opts.binary, ...args], logTail, exited, stop, kill };
}
