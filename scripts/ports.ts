/**
 * A free TCP port for a process we are about to start, which binds it itself a moment later.
 *
 * Asking the OS (`listen(0)`) hands out a port from the ephemeral range and frees it at once: until
 * the new process binds it, any other bind to port 0 on the machine (a workerd socket, another
 * server a test starts) may be given the same port, and the start fails with EADDRINUSE. On a 2-core
 * Linux machine port-0 binds draw from about 7,000 odd ports, and one system boot leaves ~18 such
 * windows open while its processes start: ~1 failed boot in 400. Ports below the ephemeral range
 * are never handed out by the OS, so once one is found free and reserved here, only an explicit
 * bind to that very number can take it.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** The lowest port handed out: above the well-known and most registered service ports in use locally. */
const FIRST_PORT = 20_000;
/** Linux's default ephemeral range starts here (macOS's at 49152): below both without reading it. */
const DEFAULT_EPHEMERAL_LOW = 32_768;
/** Ports tried before giving up (each a bind and close, ~0.1 ms). */
const MAX_TRIES = 200;

/** Ports already handed out by this process: two callers must not get the same one before either binds it. */
const reserved = new Set<number>();

/** The first port of the OS's ephemeral range (Linux: /proc; elsewhere its default). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > 0) return low;
  } catch {
    // not Linux
  }
  return DEFAULT_EPHEMERAL_LOW;
}

/** Whether `port` can be bound on `host` now (bound and closed again). */
function bindable(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * A port below the ephemeral range that is free on `host` and not handed out before by this
 * process, tried from a random start (two processes picking at once rarely try the same one).
 * Falls back to the OS's choice when the range below the ephemeral one is too small to pick from.
 */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  const last = Math.min(ephemeralLow(), 65_536) - 1;
  if (last - FIRST_PORT < MAX_TRIES) return osPort(host);
  const span = last - FIRST_PORT + 1;
  const start = Math.floor(Math.random() * span);
  for (let i = 0; i < MAX_TRIES; i++) {
    const port = FIRST_PORT + ((start + i) % span);
    if (reserved.has(port)) continue;
    if (await bindable(port, host)) {
      reserved.add(port);
      return port;
    }
  }
  throw new Error(`no free port on ${host} among ${MAX_TRIES} tried in ${FIRST_PORT}-${last}`);
}

/** The OS's choice of a free port (racy: see the module's comment). */
function osPort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, host, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
