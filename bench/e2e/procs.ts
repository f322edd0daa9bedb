/**
 * The processes of `wrangler dev`, read from /proc (Linux only): who is who, and how much CPU each
 * has used. The end-to-end benchmark samples them around each load step.
 *
 * `wrangler dev` runs two workerd processes: one listens on the public port and runs wrangler's
 * ProxyWorker (and its inspector proxy), which forwards every request over loopback HTTP to the
 * second, which runs miniflare's entry worker, the user worker and its Durable Objects (one V8
 * thread for all of them, so a per-thread split cannot separate the worker from the object). The
 * wrangler CLI itself is a Node.js process that receives the runtime's log lines.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync, readlinkSync } from "node:fs";

/** Clock ticks per second of utime/stime (`getconf CLK_TCK`; 100 on every Linux this runs on). */
const TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (user + system) a process has used so far, in milliseconds; 0 once it is gone. */
export function cpuMs(pid: number): number {
  try {
    // The command name (field 2) may contain spaces and parentheses: the fields after it start past the last ") ".
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/**
 * When a process started (clock ticks after boot), or undefined once it is gone: a pid and its
 * start time name one process, so a workerd that wrangler replaced mid-step is noticed.
 */
export function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(") ") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** Every descendant of a process (children of every thread, recursively). */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const task of tasks) {
    let children = "";
    try {
      children = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8");
    } catch {
      continue;
    }
    for (const child of children.split(/\s+/).filter(Boolean).map(Number)) out.push(child, ...descendants(child));
  }
  return out;
}

export function commandLine(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
}

/** TCP ports (IPv4) the process listens on, from its socket inodes and /proc/net/tcp. */
export function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (link.startsWith("socket:[")) inodes.add(link.slice(8, -1));
    } catch {
      // closed while we looked
    }
  }
  const ports: number[] = [];
  for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1)) {
    const cols = line.trim().split(/\s+/);
    // cols[3] is the state (0A = LISTEN), cols[9] the socket inode.
    if (cols[3] === "0A" && cols[9] !== undefined && inodes.has(cols[9])) ports.push(parseInt(cols[1]!.split(":")[1]!, 16));
  }
  return ports;
}

export interface DevProcesses {
  /** The wrangler CLI (Node.js): starts workerd, receives its log lines; or scripts/workerd-host.ts (same role). */
  wrangler: number;
  /** workerd running wrangler's ProxyWorker, listening on the public port (none without wrangler dev). */
  proxyWorkerd: number | undefined;
  /** workerd running miniflare's entry worker, the router (user worker) and its Durable Objects. */
  userWorkerd: number;
  /** The user workerd's own HTTP address, which bypasses the ProxyWorker (the ProxyWorker forwards there). */
  innerUrl: string;
}

/**
 * Finds the wrangler dev processes under the spawned `wrangler` shim: the workerd that listens on
 * the public port runs the ProxyWorker; of the other's listening ports (its entry socket, the
 * inspector, the debug port), the one answering the router's /healthz is the user worker's.
 */
export async function findDevProcesses(rootPid: number, publicUrl: string): Promise<DevProcesses> {
  const publicPort = Number(new URL(publicUrl).port);
  const tree = descendants(rootPid);
  const workerds = tree.filter((pid) => commandLine(pid).some((arg) => arg.endsWith("/workerd")));
  const wrangler = tree.find((pid) => commandLine(pid).some((arg) => arg.endsWith("wrangler-dist/cli.js")));
  const proxyWorkerd = workerds.find((pid) => listeningPorts(pid).includes(publicPort));
  // If wrangler has started a new runtime (a reload), the newest one is serving.
  const userWorkerd = workerds
    .filter((pid) => pid !== proxyWorkerd)
    .sort((a, b) => Number(startTime(b) ?? 0) - Number(startTime(a) ?? 0))[0];
  if (wrangler === undefined || proxyWorkerd === undefined || userWorkerd === undefined) {
    throw new Error(`cannot identify wrangler dev's processes under pid ${rootPid} (workerd: ${workerds.join(", ") || "none"})`);
  }
  for (const port of listeningPorts(userWorkerd)) {
    const url = `http://127.0.0.1:${port}`;
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (res.ok && (await res.text()).includes('"ok":true')) return { wrangler, proxyWorkerd, userWorkerd, innerUrl: url };
    } catch {
      // the inspector or debug port
    }
  }
  throw new Error(`the user workerd (pid ${userWorkerd}) answers /healthz on none of its ports`);
}

/**
 * The processes of scripts/workerd-host.ts (`npm start`'s runtime, workerd-single): the host
 * (Node.js, Miniflare's API, which also receives workerd's log lines) and its one workerd, whose
 * socket is the public address itself. `rootPid` is the process scripts/system.ts started: the
 * watchdog (scripts/watchdog.ts), whose child is the host.
 */
export function findHostProcesses(rootPid: number, publicUrl: string): DevProcesses {
  const tree = [rootPid, ...descendants(rootPid)];
  const workerd = tree.find((pid) => commandLine(pid).some((arg) => arg.endsWith("/workerd")));
  // The script is the host's first argument (the watchdog names it later, as the command it runs).
  const host = tree.find((pid) => commandLine(pid)[1]?.endsWith("workerd-host.ts"));
  if (workerd === undefined || host === undefined)
    throw new Error(`cannot identify the workerd host's processes under pid ${rootPid} (workerd ${workerd}, host ${host})`);
  return { wrangler: host, proxyWorkerd: undefined, userWorkerd: workerd, innerUrl: publicUrl };
}

/** The workerd processes under wrangler now, with their start times: a change means wrangler replaced one. */
export function workerdSet(rootPid: number): string {
  return descendants(rootPid)
    .filter((pid) => commandLine(pid).some((arg) => arg.endsWith("/workerd")))
    .map((pid) => `${pid}@${startTime(pid)}`)
    .sort()
    .join(",");
}

/** CPU milliseconds of a set of named processes, for differences around a step. */
export type CpuSnapshot = Record<string, number>;

export function snapshot(pids: Record<string, number>): CpuSnapshot {
  return Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuMs(pid)]));
}

export function difference(after: CpuSnapshot, before: CpuSnapshot): CpuSnapshot {
  return Object.fromEntries(Object.keys(after).map((name) => [name, after[name]! - (before[name] ?? 0)]));
}
