/**
 * Runs a command so that it ends when the process that started it ends, however that ends
 * (scripts/system.ts starts every worker process through it).
 *
 *   node scripts/watchdog.ts <command> [args...]
 *
 * The workers run in a process group of their own (so a stop ends workerd, wrangler's child, too),
 * which also means a parent killed with SIGKILL, which can clean nothing up, used to leave them
 * running and holding their ports. Linux's `prctl(PR_SET_PDEATHSIG)` is not reachable from Node,
 * so the watchdog watches a pipe instead: its stdin is a pipe from the parent, whose write end the
 * kernel closes when the parent dies for any reason. At end of file it sends the whole group
 * SIGTERM and, {@link KILL_GRACE_MS} later, SIGKILL (itself included). Otherwise it stays out of
 * the way: the command's output goes straight to the watchdog's stdout and stderr, and it exits
 * with the command's code.
 */
import { spawn } from "node:child_process";

/** How long the group gets to end after SIGTERM before SIGKILL (wrangler dev stops in ~1 s). */
const KILL_GRACE_MS = 5_000;

const [command, ...args] = process.argv.slice(2);
if (!command) {
  console.error("watchdog: usage: node scripts/watchdog.ts <command> [args...]");
  process.exit(2);
}

// The command is in the watchdog's process group (not detached): one signal to the group reaches both.
const child = spawn(command, args, { stdio: ["ignore", "inherit", "inherit"] });
let orphaned = false;

const endGroup = () => {
  if (orphaned) return;
  orphaned = true;
  try {
    process.kill(-process.pid, "SIGTERM");
  } catch {
    child.kill("SIGTERM");
  }
  setTimeout(() => {
    try {
      process.kill(-process.pid, "SIGKILL");
    } catch {
      child.kill("SIGKILL");
      process.exit(1);
    }
  }, KILL_GRACE_MS);
};

// The group's SIGTERM (a stop's, or our own) must not end the watchdog before its command: it
// exits when the command does, or at the SIGKILL.
process.on("SIGTERM", () => {});
process.on("SIGINT", () => {});
process.stdin.on("end", endGroup);
process.stdin.on("close", endGroup);
process.stdin.on("error", endGroup);
process.stdin.resume();

child.on("exit", (code, signal) => {
  // Orphaned: the rest of the group (workerd) may outlive the command; the SIGKILL timer ends it.
  if (orphaned) return;
  process.exit(code ?? (signal ? 128 : 1));
});
child.on("error", (e) => {
  console.error(`watchdog: could not start ${command}: ${e.message}`);
  process.exit(127);
});
