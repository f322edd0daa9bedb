/**
 * Routing without the region's Durable Object: when the object is unreachable or overloaded, the
 * worker still places requests, statelessly, over the nodes it has recently been sent to.
 *
 * Each isolate remembers, per region, the nodes its routed requests went to (id, URL, models,
 * when) for NODE_MEMORY_MS: a short-lived cache it can lose, never a second writer of the region's
 * state. Without the object there is no index and no load model, so a request goes to the node
 * that rendezvous hashing of its first block picks (the same prompt prefix lands on the same node,
 * so prefixes still meet their cache while the object is away), skipping a node this isolate
 * already has more than BOUNDED_LOAD_FACTOR x its fair share of requests in flight on (consistent
 * hashing with bounded loads). Affinity returns when the object does. The answer says
 * `x-warmpath-decision: stateless`.
 */

import type { NodeEngine } from "../contracts/node.ts";

/** How long a node seen in a routing result is remembered: past it, it may be gone. */
export const NODE_MEMORY_MS = 5 * 60_000;
/** Nodes remembered per region. */
const MAX_NODES_PER_REGION = 256;
/** A node with more than this times the mean in-flight requests (plus one) of this isolate is skipped. */
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

/** 32-bit FNV-1a, for rendezvous weights (no I/O, no crypto: this runs only when the object is away). */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The node for a request without the object: highest rendezvous weight for its first block among
 * the remembered nodes serving `model` (not excluded, seen within NODE_MEMORY_MS, within the load
 * bound), or undefined if none is known.
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
  const mean = eligible.reduce((s, [, n]) => s + n.inflight, 0) / eligible.length;
  const bound = Math.ceil((mean + 1) * BOUNDED_LOAD_FACTOR);
  let best: [string, KnownNode] | undefined;
  let bestWeight = -1;
  for (const entry of eligible) {
    if (entry[1].inflight >= bound) continue;
    const weight = fnv1a(firstHash + "/" + entry[0]);
    if (weight > bestWeight) [best, bestWeight] = [entry, weight];
  }
  best ??= eligible.reduce((a, b) => (b[1].inflight < a[1].inflight ? b : a));
  return { nodeId: best[0], url: best[1].url, engine: best[1].engine };
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
