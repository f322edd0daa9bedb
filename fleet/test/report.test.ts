/**
 * A simulated node's report loop (fleet/report.ts) against a router that stops answering: its stop
 * (a crash, a restart, a shutdown) does not wait out the report's timeout. The loop's timeout here
 * is its interval, 60 s; each stop is given 5 s, past the 2 s it may take by design (a
 * registration's grace, a deregistration's timeout), so a loaded machine does not fail it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { startReporter, type LoadReport } from "../report.ts";

/** Longer than any stop may take here, far shorter than the report's 60 s timeout. */
const STOP_BOUND_MS = 5_000;
const INTERVAL_MS = 60_000;
const NODE_SECRET = "s".repeat(43);

const REPORT: LoadReport = {
  node_id: "n1",
  region: "test-region",
  url: "http://127.0.0.1:9",
  models: ["m"],
  kv_capacity_tokens: 100_000,
  running: 0,
  waiting: 0,
  kv_usage: 0,
  boot_id: "boot-1",
  engine: "vllm",
};

interface SilentRouter {
  url: string;
  /** Method and bearer of each request received, answered or not. */
  seen: Array<{ method: string; auth: string | undefined }>;
  /** Resolves once `n` requests were received. */
  received(n: number): Promise<void>;
  close(): Promise<void>;
}

/** A router that answers the first `answered` requests (a registration, with a node secret) and then none. */
async function silentRouter(answered: number): Promise<SilentRouter> {
  const seen: SilentRouter["seen"] = [];
  const waiting: Array<{ n: number; resolve: () => void }> = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on("end", () => {
      seen.push({ method: req.method!, auth: req.headers.authorization });
      for (const w of waiting.filter((w) => seen.length >= w.n)) w.resolve();
      if (seen.length <= answered)
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ node_secret: NODE_SECRET }));
      // Otherwise never answered: held until close().
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    received: (n) => (seen.length >= n ? Promise.resolve() : new Promise((resolve) => waiting.push({ n, resolve }))),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Whether `p` settles within `ms`. */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([p.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A simulated node's reporter to `routerUrl`, registering with the region token. */
function reporterTo(routerUrl: string, nodeId: string) {
  return startReporter({ routerUrl, token: "region-token", region: "test-region", nodeId, intervalMs: INTERVAL_MS, report: () => REPORT });
}

test(
  "a shutdown aborts a report the router does not answer, then deregisters within the deregistration's timeout",
  { timeout: 30_000 },
  async () => {
    const router = await silentRouter(1);
    const reporter = reporterTo(router.url, "shutdown-1");
    let stopped: Promise<void> | undefined;
    try {
      await router.received(1); // the registration, answered with the node's secret
      // A report carrying the secret, which the router holds: kicked until the registration's answer is taken.
      const second = router.received(2);
      while (!(await settlesWithin(second, 50))) reporter.kick();
      stopped = reporter.stop(true);
      assert.ok(await settlesWithin(stopped, STOP_BOUND_MS), `stop took over ${STOP_BOUND_MS} ms: it waited for the report in flight`);
      assert.deepEqual(
        router.seen.map((r) => `${r.method} ${r.auth}`),
        ["POST Bearer region-token", `POST Bearer ${NODE_SECRET}`, `DELETE Bearer ${NODE_SECRET}`],
      );
    } finally {
      await router.close();
      await (stopped ?? reporter.stop(false));
    }
  },
);

test(
  "a crash during a registration the router does not answer waits its grace at most, not the report's timeout",
  { timeout: 30_000 },
  async () => {
    const router = await silentRouter(0);
    const reporter = reporterTo(router.url, "crash-1");
    let stopped: Promise<void> | undefined;
    try {
      await router.received(1);
      stopped = reporter.stop(false);
      assert.ok(
        await settlesWithin(stopped, STOP_BOUND_MS),
        `stop took over ${STOP_BOUND_MS} ms: it waited for the registration in flight`,
      );
      assert.deepEqual(
        router.seen.map((r) => r.method),
        ["POST"],
      );
    } finally {
      await router.close();
      await (stopped ?? reporter.stop(false));
    }
  },
);
