/**
 * The endpoints CompatCanary scans, in pairs: a node directly, and warmpath in front of it (the
 * production topology of `npm start`, scripts/system.ts), so that what warmpath does to an answer
 * is the only difference between the two.
 *
 * - The simulated fleet: `npm start`'s system (the default fleet, time x10), scanned at one of its
 *   nodes and at the router. Every node of the fleet is the same program with the same answers, so
 *   whichever node the router picks answers as the one scanned directly.
 * - llama.cpp: a real `llama-server` (scripts/llama: built once from node-llama-cpp's bundled
 *   source into .cache/, the same build and tiny model as the llama e2e test) with a
 *   `warmpath-agent` registering it in a region of its own, as scripts/llama/e2e.ts runs it;
 *   scanned directly and through the router.
 */
import type { ChildProcess } from "node:child_process";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { startSystem, type System } from "../system.ts";
import { ensureLlama } from "../llama/ensure.ts";
import { configFor, MODEL as LLAMA_MODEL, nodes, startAgent, stopAgent, until } from "../llama/harness.ts";
import { startLlamaServer, type LlamaServer } from "../llama/server.ts";
import type { CanaryTarget } from "./canary.ts";

/** The fleet's model (fleet.default.json: every node serves it). */
export const FLEET_MODEL = "llama-3.1-8b-instruct";
/**
 * Fleet seconds per wall second. At x10 a 64-token answer streams in ~0.2 s, so one scan takes a
 * couple of seconds; the answers (and so the probes' outcomes) do not depend on the time factor.
 */
export const FLEET_TIME_FACTOR = 10;
/**
 * llama-server's answer length when a request sets none (`--n-predict`; its default -1 is "until
 * the context is full"). The tiny generated model never samples an end of sequence, so without it
 * CompatCanary's probes (which set no `max_tokens`) get 8,000-token answers that outlast its
 * 30 s timeout; 64 is the simulated fleet's natural answer length (`default_max_tokens`).
 */
export const LLAMA_N_PREDICT = 64;
/** How long the llama node's agent may take to register it (it reports every half second). */
const REGISTER_TIMEOUT_MS = 30_000;

/** A node and warmpath in front of it. */
export interface TargetPair {
  /** What the node is, for the report (`simulated fleet`, `llama-server`). */
  engine: string;
  node: CanaryTarget;
  warmpath: CanaryTarget;
  /** Ends every process the pair started. */
  stop(): Promise<void>;
}

/** `npm start`'s system: warmpath in front of the default simulated fleet; the node scanned directly is us-east's first. */
export async function fleetPair(): Promise<TargetPair> {
  const system = await startSystem({ port: 0, timeFactorScale: FLEET_TIME_FACTOR });
  const node = system.fleet?.node("us-east", "use1-a");
  if (!node) {
    await system.stop();
    throw new Error("the default fleet has no node us-east/use1-a");
  }
  return {
    engine: "simulated fleet (fleet/, vLLM's shapes)",
    node: { baseUrl: `${node.url}/v1`, model: FLEET_MODEL },
    warmpath: { baseUrl: `${system.url}/v1`, model: FLEET_MODEL, apiKey: DEV_API_KEY },
    stop: () => system.stop(),
  };
}

/** A real llama-server (the e2e test's build and model), registered by its agent with a warmpath of its own. */
export async function llamaPair(log: (line: string) => void): Promise<TargetPair & { version: string }> {
  const parts = ensureLlama(log);
  let server: LlamaServer | undefined;
  let system: System | undefined;
  let agent: ChildProcess | undefined;
  const stop = async () => {
    if (agent) await stopAgent(agent);
    await system?.stop();
    await server?.stop();
  };
  try {
    server = await startLlamaServer({
      binary: parts.binary,
      model: parts.model,
      alias: LLAMA_MODEL,
      extraArgs: ["--n-predict", String(LLAMA_N_PREDICT)],
    });
    system = await startSystem({ port: 0, fleetFile: null, config: configFor("warmpath") });
    const sys = system;
    agent = startAgent(sys, "llama-1", server);
    await until("the llama node to register", REGISTER_TIMEOUT_MS, async () => ((await nodes(sys)).length === 1 ? true : undefined));
    return {
      engine: `llama-server (llama.cpp ${(parts.version.split("\n")[0] ?? "").replace(/^version:\s*/, "")})`,
      version: parts.version,
      node: { baseUrl: `${server.url}/v1`, model: LLAMA_MODEL },
      warmpath: { baseUrl: `${sys.url}/v1`, model: LLAMA_MODEL, apiKey: DEV_API_KEY },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
