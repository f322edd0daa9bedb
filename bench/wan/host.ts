/**
 * A worker run by scripts/workerd-host.ts (the deploy bundle in workerd, no development machinery)
 * in a process group of its own, for bench:wan: the single-worker layout and the runtime's floor
 * (floor.ts).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../../scripts/system.ts";
import { freePort } from "../../scripts/ports.ts";

export interface Host {
  url: string;
  /** The host's process (workerd is its child). */
  pid: number;
  /** Its own folder for state and files the caller writes (removed on stop). */
  state: string;
  stop(): void;
}

/** How long a worker gets to answer its first request (bundling it included: ~10 s on a busy 2-core machine). */
const READY_POLLS = 300;
const READY_POLL_MS = 200;

/**
 * Starts workerd-host with `args(state)` (its `--config`, `--env-file` ...) on a free port, and
 * resolves once `GET <health>` answers at all.
 */
export async function startHost(args: (state: string) => string[], health = "/healthz"): Promise<Host> {
  const state = mkdtempSync(join(tmpdir(), "warmpath-wan-host-"));
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [join(ROOT, "scripts", "workerd-host.ts"), "--port", String(port), "--persist-to", state, ...args(state)],
    { cwd: ROOT, stdio: "ignore", detached: true },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < READY_POLLS; i++) {
    if (
      await fetch(`${url}${health}`).then(
        () => true,
        () => false,
      )
    )
      break;
    await new Promise((r) => setTimeout(r, READY_POLL_MS));
  }
  return {
    url,
    pid: child.pid!,
    state,
    stop: () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
      rmSync(state, { recursive: true, force: true });
    },
  };
}
