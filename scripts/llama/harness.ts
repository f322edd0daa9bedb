/**
 * What the runs against real llama.cpp (e2e.ts, midstream.ts) share: the one region of real nodes
 * they configure, the `warmpath-agent` started beside each `llama-server`, and polling the
 * region's state.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { DEV_NODE_TOKEN } from "../../src/config/dev-credentials.ts";
import { adminRegionStateSchema, type AdminRegionState } from "../../src/contracts/admin.ts";
import { parseLogLine, type ParsedLogLine } from "../../src/contracts/decision-line.ts";
import { devConfigWithPolicy } from "../demo/policy-config.ts";
import { ROOT, startSystem, type System } from "../system.ts";
import type { LlamaServer } from "./server.ts";

export const REGION = "local";
export const MODEL = "tiny";
/** Agents report every half second, so a restart is seen within about a second. */
export const AGENT_INTERVAL_MS = 500;

/** A node as the region's state API shows it (src/contracts/admin.ts). */
export type NodeState = AdminRegionState["nodes"][number];

export async function nodes(system: System): Promise<NodeState[]> {
  const res = await fetch(`${system.url}/admin/state/${REGION}`);
  return adminRegionStateSchema.parse(await res.json()).nodes;
}

export async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export function startAgent(system: System, id: string, server: LlamaServer): ChildProcess {
  const agent = spawn(
    process.execPath,
    [
      join(ROOT, "agent", "warmpath-agent.ts"),
      ...["--router", system.url, "--region", REGION, "--node-id", id, "--url", server.url, "--interval-ms", String(AGENT_INTERVAL_MS)],
    ],
    { env: { ...process.env, WARMPATH_NODE_TOKEN: DEV_NODE_TOKEN }, stdio: ["ignore", "ignore", "pipe"] },
  );
  agent.stderr!.resume();
  return agent;
}

export async function stopAgent(agent: ChildProcess): Promise<void> {
  if (agent.exitCode !== null) return;
  const exited = new Promise((r) => agent.once("exit", r));
  agent.kill("SIGTERM");
  await exited;
}

/**
 * The router with one region of real nodes under the warmpath policy, as `npm start` runs it; each
 * JSON line it logs goes to `onLine`, read as src/contracts/decision-line.ts reads it (workerd and
 * wrangler prefix what a worker logs, so the JSON is found from its `{"event":"`).
 */
export function startWarmpath(onLine: (line: ParsedLogLine) => void, config = configFor("warmpath")): Promise<System> {
  return startSystem({
    port: 0,
    fleetFile: null,
    config,
    onRouterOutput: (line) => {
      const at = line.indexOf('{"event":"');
      const parsed = at < 0 ? undefined : parseLogLine(line.slice(at));
      if (parsed) onLine(parsed);
    },
  });
}

/** The router with one region of real nodes, under `policy`. */
export function configFor(policy: string): Record<string, unknown> {
  return {
    ...devConfigWithPolicy(policy),
    regions: [
      {
        name: REGION,
        location: { lat: 39.04, lon: -77.49, continent: "NA" },
        models: [MODEL],
        node_token_secret: "NODE_TOKEN_DEV",
        policy: { name: policy },
      },
    ],
  };
}
