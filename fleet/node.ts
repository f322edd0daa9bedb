/**
 * One simulated GPU inference node: an OpenAI-compatible HTTP server (vLLM-flavoured) in front of
 * the timing model (engine.ts) and the node's own prefix cache (kv-cache.ts), plus load reports to
 * the router, fault knobs, and crash/restart. Listens on 127.0.0.1 only.
 *
 * This file is the node's lifecycle (listen, crash, restart, stop) and its public handle; the
 * state lives in node-runtime.ts, the endpoints in routes.ts and the files it names.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Engine } from "./engine.ts";
import type { Faults } from "./config.ts";
import { HOST, NodeRuntime, type NodeOptions, type NodeState } from "./node-runtime.ts";
import { startReporter } from "./report.ts";
import { requestListener } from "./routes.ts";

export type { Faults } from "./config.ts";
export type { NodeOptions, NodeState } from "./node-runtime.ts";

export interface NodeHandle {
  readonly id: string;
  readonly region: string;
  readonly url: string;
  readonly port: number;
  readonly bootId: string;
  readonly up: boolean;
  /** The current process's engine (replaced on restart). */
  readonly engine: Engine;
  state(): NodeState;
  setFaults(f: Partial<Faults>): Faults;
  /** Closes every socket and stops listening; cache and in-flight requests are lost. */
  crash(): Promise<void>;
  /** Crash, stay down `downMs`, come back on the same port with an empty cache and a new boot_id. */
  restart(downMs?: number): Promise<void>;
  /** Clean shutdown: deregisters from the router (best effort), then closes. */
  stop(): Promise<void>;
}

export async function startNode(o: NodeOptions): Promise<NodeHandle> {
  const node = new NodeRuntime(o);

  const listen = async () => {
    const s = createServer(requestListener({ node, life: handle }));
    s.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      s.once("error", reject);
      s.listen(node.port, HOST, () => {
        s.off("error", reject);
        resolve();
      });
    });
    node.server = s;
    node.port = (s.address() as AddressInfo).port;
    node.up = true;
    if (o.router) {
      node.reporter = startReporter({
        routerUrl: o.router.url,
        token: o.router.token,
        region: o.region,
        nodeId: o.id,
        intervalMs: o.router.intervalMs ?? 1000,
        report: () => node.report(),
        log: o.log,
      });
    }
    o.log?.({ event: "node_listening", region: o.region, node_id: o.id, url: node.url(), models: o.models, boot_id: node.bootId });
  };

  /** Everything a dying process loses: sockets, listening socket, timers, in-flight work. */
  const down = async (deregister: boolean) => {
    node.up = false;
    const r = node.reporter;
    node.reporter = undefined;
    const s = node.server;
    node.server = undefined;
    for (const t of node.timers) clearTimeout(t);
    node.timers.clear();
    node.engine.stop();
    if (s) {
      const closed = new Promise<void>((resolve) => s.close(() => resolve()));
      s.closeAllConnections();
      await closed;
    }
    await r?.stop(deregister);
  };

  const handle: NodeHandle = {
    id: o.id,
    region: o.region,
    get url() {
      return node.url();
    },
    get port() {
      return node.port;
    },
    get bootId() {
      return node.bootId;
    },
    get up() {
      return node.up;
    },
    get engine() {
      return node.engine;
    },
    state: () => node.state(),
    setFaults: (f) => node.setFaults(f),
    async crash() {
      if (!node.up) return;
      await down(false);
      o.log?.({ event: "node_crashed", region: o.region, node_id: o.id });
    },
    async restart(downMs = 0) {
      node.clearAutoRestart();
      o.log?.({ event: "node_restarting", region: o.region, node_id: o.id, old_boot_id: node.bootId, down_ms: downMs });
      await down(false);
      if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
      node.newProcess();
      await listen();
    },
    async stop() {
      node.clearAutoRestart();
      if (!node.up) return;
      await down(true);
      o.log?.({ event: "node_stopped", region: o.region, node_id: o.id });
    },
  };

  node.newProcess();
  await listen();
  return handle;
}
