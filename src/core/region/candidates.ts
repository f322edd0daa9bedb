/**
 * From a request to the policy's input: which nodes may take it, and what the router knows about
 * each of them (believed cached prefix, queued work, load). Every policy, warmpath's and the
 * baselines, chooses from exactly these candidates.
 */
import type { RouteRequest } from "../../contracts/routing.ts";
import { baseBlocksBefore } from "../block-layout.ts";
import type { ActiveBlocks } from "./active-blocks.ts";
import type { Candidate } from "../policies/types.ts";
import type { PrefixIndex } from "../prefix-index.ts";
import type { NodeEntry, NodeTable } from "./node-table.ts";

export interface Eligible {
  /** Nodes that may take the request, sorted by id (the stable order policies see). */
  nodes: NodeEntry[];
  /** How many nodes serve the model at all (0: the region cannot serve it; otherwise it is busy). */
  servesModel: number;
  /** Of those not excluded, how many run an engine the request may go to (a continuation's `engines`; any otherwise). */
  servesEngine: number;
}

/**
 * Nodes serving the model to this tenant (a node dedicated to other tenants does not), not
 * excluded, available and below the in-flight limit.
 */
export function eligibleNodes(
  table: NodeTable,
  req: RouteRequest,
  now: number,
  maxInflightPerNode: number,
  nodeTenants: Readonly<Record<string, readonly string[]>> = {},
): Eligible {
  const nodes: NodeEntry[] = [];
  let servesModel = 0;
  let servesEngine = 0;
  for (const n of table.values()) {
    if (!n.spec.models.includes(req.model)) continue;
    if (!tenantMayUse(nodeTenants, n.spec.id, req.tenant)) continue;
    servesModel++;
    if (req.exclude?.includes(n.spec.id)) continue;
    // A continuation goes only to engines that can continue a stream (src/region/continue.ts).
    if (req.engines && !req.engines.includes(n.spec.engine ?? "other")) continue;
    servesEngine++;
    if (!table.isAvailable(n, now)) continue;
    if (n.load.inflight >= maxInflightPerNode) continue;
    nodes.push(n);
  }
  nodes.sort((a, b) => (a.spec.id < b.spec.id ? -1 : a.spec.id > b.spec.id ? 1 : 0));
  return { nodes, servesModel, servesEngine };
}

/** Whether a tenant may be sent to a node: any tenant, unless the node is dedicated to others (`node_tenants`). */
export function tenantMayUse(
  nodeTenants: Readonly<Record<string, readonly string[]>>,
  nodeId: string,
  tenant: string | undefined,
): boolean {
  const allowed = Object.hasOwn(nodeTenants, nodeId) ? nodeTenants[nodeId] : undefined;
  return allowed === undefined || (tenant !== undefined && allowed.includes(tenant));
}

/** One candidate per eligible node, in the same order; active blocks only when `active` is given. */
export function buildCandidates(
  eligible: readonly NodeEntry[],
  index: PrefixIndex,
  req: RouteRequest,
  blockTokens: number,
  now: number,
  active?: ActiveBlocks,
): Candidate[] {
  const depths = index.matchDepths(
    req.hashes,
    eligible.map((n) => n.spec.id),
  );
  return eligible.map((n, i) => {
    const matchTokens = Math.min(req.promptTokens, baseBlocksBefore(depths[i]!) * blockTokens);
    const r = n.load.lastReport;
    return {
      id: n.spec.id,
      matchBlocks: depths[i]!,
      matchTokens,
      uncachedTokens: req.promptTokens - matchTokens,
      workAheadTokens: n.load.workAhead(now),
      slotWaitMs: n.load.slotWaitMs(),
      recentPrefillTokens: n.load.recentPrefill(now),
      prefillRate: n.load.prefillRate,
      inflight: n.load.inflight,
      dispatched: n.load.dispatched,
      lastDispatchAt: n.load.lastDispatchAt,
      activeTokens: n.load.activeTokens,
      queuedPrefillTokens: n.load.queuedTokens,
      activeBlocks: active?.weightOf(n.spec.id) ?? 0,
      activeMatchBlocks: active?.matchOf(n.spec.id, req.hashes) ?? 0,
      indexBlocks: index.blocksOf(n.spec.id),
      kvCapacityTokens: n.spec.kvCapacityTokens,
      running: r?.running ?? 0,
      waiting: r?.waiting ?? 0,
      kvUsage: r?.kvUsage ?? 0,
    };
  });
}

/** The shortest modelled prefill queue among the candidates, in seconds. */
export function shortestWaitSeconds(candidates: readonly Candidate[]): number {
  let minWait = Infinity;
  for (const c of candidates) minWait = Math.min(minWait, c.workAheadTokens / c.prefillRate);
  return minWait;
}
