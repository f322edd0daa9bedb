/**
 * Starts every node of a fleet file in this process. Used by the CLI (main.ts) and by
 * orchestrator scripts that want the fleet in-process:
 *
 *   const fleet = await startFleet(loadFleet("fleet/fleet.default.json"), { routerUrl, tokens });
 *   fleet.node("us-east", "use1-a")?.crash();
 *   await fleet.stop();
 */
import type { FleetConfig } from "./config.ts";
import { startNode, type NodeHandle } from "./node.ts";

export interface FleetOptions {
  /** Router base URL for load reports; omitted = nodes run standalone and report nowhere. */
  routerUrl?: string | undefined;
  /** Node token per region name; overrides the fleet file's `token`. */
  tokens?: Record<string, string> | undefined;
  /** Multiplies every node's time_factor (e.g. 10 for a fast demo). */
  timeFactorScale?: number | undefined;
  log?: ((event: Record<string, unknown>) => void) | undefined;
}

export interface Fleet {
  nodes: NodeHandle[];
  node(region: string, id: string): NodeHandle | undefined;
  /** Stops every node (deregistering from the router); leaves no socket open. */
  stop(): Promise<void>;
}

/** Env override for a region's token: WARMPATH_NODE_TOKEN_US_EAST for "us-east". */
export function tokenEnvName(region: string): string {
  return "WARMPATH_NODE_TOKEN_" + region.toUpperCase().replace(/[^A-Z0-9]/g, "_");
}

export async function startFleet(config: FleetConfig, options: FleetOptions = {}): Promise<Fleet> {
  const tokens = new Map<string, string>();
  if (options.routerUrl) {
    for (const r of config.regions) {
      const token = options.tokens?.[r.name] ?? process.env[tokenEnvName(r.name)] ?? r.token;
      if (!token) {
        throw new Error(
          `region ${r.name} has no node token: pass --token-${r.name}, set ${tokenEnvName(r.name)}, or set "token" in the fleet file`,
        );
      }
      tokens.set(r.name, token);
    }
  }
  const nodes: NodeHandle[] = [];
  try {
    for (const r of config.regions) {
      for (const n of r.nodes) {
        const token = tokens.get(r.name);
        nodes.push(
          await startNode({
            id: n.id,
            region: r.name,
            port: n.port,
            engine: n.engine,
            models: n.models,
            kvCapacityTokens: n.kv_capacity_tokens,
            prefillTokensPerSecond: n.prefill_tokens_per_second,
            decodeTokensPerSecond: n.decode_tokens_per_second,
            maxRunning: n.max_running,
            reportMaxRunning: n.report_max_running,
            timeFactor: n.time_factor * (options.timeFactorScale ?? 1),
            defaultMaxTokens: n.default_max_tokens,
            forceIncludeUsage: n.force_include_usage,
            faults: n.faults,
            router: options.routerUrl && token ? { url: options.routerUrl, token, intervalMs: n.report_interval_ms } : undefined,
            log: options.log,
          }),
        );
      }
    }
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop())); // e.g. a fixed port already in use
    throw err;
  }
  return {
    nodes,
    node: (region, id) => nodes.find((n) => n.region === region && n.id === id),
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}
