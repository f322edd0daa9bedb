/**
 * Routing without the region's Durable Object: when the object is unreachable or overloaded, the
 * worker still places requests, statelessly, over the nodes it has recently been sent to.
 *
 * Each isolate remembers, per region, the nodes its routed requests went to (id, URL, models,
 * when) for NODE_MEMORY_MS: a short-lived cache it can lose, never a second writer of the region's
 * state. Without the object there is no index and no load model, so a request goes to the node
 * that rendezvous hashing of its first block picks (the same prompt prefix lands on the same node,
 * so prefixes still meet their cache while the object is away), skipping a node this isolate
 * already has more than BOUNDED_LOAD_FACTOR x its fair share of requests in flight on: consistent
 * hashing with bounded loads, src/core/policies/placement.ts's (the `consistent-hash` policy's),
 * with the router's own rendezvous score rather than a hash of its own. Affinity returns when the object does. The answer says
 * `x-warmpath-decision: stateless`.
 */

import type { NodeEngine } from "../contracts/node.ts";
import { boundedLoadChoice } from "../core/policies/placement.ts";

/** How long a node seen in a routing result is remembered: past it, it may be gone. */
export const NODE_MEMORY_MS = 5 * 60_000;
/** Nodes remembered per region. */
const MAX_NODES_PER_REGION = 256;
/**
 * A node with more than this times the mean of this isolate's requests in flight (the new one
 * counted) is skipped: 1.25, the `consistent-hash` policy's default `load_factor`.
 */
const BOUNDED_LOAD_FACTOR = 1.25;

interface KnownNode {
  url: string;
  /** Its engine, as its last placement by the object said. */
  engine: NodeEngine | undefined;
  models: Set<string>;
  seenAt: number;
  /** Requests this isolate has in flight on it without the object. */
  inflight: number;
}

const regions = new Map<string, Map<string, KnownNode>>();

/** Remembers that `nodeId` in `region` (at `url`) served `model` at `now`. */
export function rememberNode(region: string, nodeId: string, url: string, model: string, now: number, engine?: NodeEngine): void {
  let nodes = regions.get(region);
  if (!nodes) regions.set(region, (nodes = new Map()));
  const known = nodes.get(nodeId);
  if (known) {
    known.url = url;
    known.engine = engine;
    known.models.add(model);
    known.seenAt = now;
    return;
  }
  if (nodes.size >= MAX_NODES_PER_REGION) {
    // Forget the longest unseen.
    let oldest: string | undefined;
    for (const [id, n] of nodes) if (oldest === undefined || n.seenAt < nodes.get(oldest)!.seenAt) oldest = id;
    if (oldest !== undefined) nodes.delete(oldest);
  }
  nodes.set(nodeId, { url, engine, models: new Set([model]), seenAt: now, inflight: 0 });
}

/**
 * The node for a request without the object: among the remembered nodes serving `model` (not
 * excluded, seen within NODE_MEMORY_MS, allowed), the first in its first block's rendezvous order
 * within the load bound, by the same consistent hashing with bounded loads as the
 * `consistent-hash` policy (src/core/policies/placement.ts: load is this isolate's requests in
 * flight, the new one counted); undefined if none is known.
 */
export function chooseStateless(
  region: string,
  model: string,
  firstHash: string,
  exclude: readonly string[],
  now: number,
  allowed: (nodeId: string, engine: NodeEngine | undefined) => boolean = () => true,
): { nodeId: string; url: string; engine: NodeEngine | undefined } | undefined {
  const nodes = regions.get(region);
  if (!nodes) return undefined;
  const eligible = [...nodes].filter(
    ([id, n]) => n.models.has(model) && !exclude.includes(id) && now - n.seenAt <= NODE_MEMORY_MS && allowed(id, n.engine),
  );
  if (eligible.length === 0) return undefined;
  const { index } = boundedLoadChoice(
    eligible.map(([id]) => ({ id })),
    firstHash,
    eligible.map(([, n]) => n.inflight),
    1,
    BOUNDED_LOAD_FACTOR,
  );
  const [nodeId, best] = eligible[index]!;
  return { nodeId, url: best.url, engine: best.engine };
}

/** Counts a stateless request in flight on a node (+1 when sent, -1 when it ends). */
export function countStateless(region: string, nodeId: string, delta: 1 | -1): void {
  const n = regions.get(region)?.get(nodeId);
  if (n) n.inflight = Math.max(0, n.inflight + delta);
}

/** Forgets everything (tests). */
export function forgetNodes(): void {
  regions.clear();
}
