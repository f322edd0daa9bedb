/**
 * The prompt blocks of the requests in flight on each node, each distinct block counted once:
 * NVIDIA Dynamo's "active blocks" (its router_assume_kv_reuse default: requests sharing a prefix
 * on one worker share its KV blocks). Only the dynamo-kv baseline reads them, so the router
 * tracks them only for a policy that asks (RoutingPolicy.tracksActiveBlocks): it costs a map
 * update per block at dispatch and at completion.
 */
import { baseBlocksBefore, blockWeight } from "../block-layout.ts";

interface NodeActive {
  /** Block hash -> requests in flight whose prompt contains it. */
  refs: Map<string, number>;
  /** Sum of the distinct blocks' sizes, in base blocks. */
  weight: number;
}

export class ActiveBlocks {
  private readonly nodes = new Map<string, NodeActive>();

  add(nodeId: string, hashes: readonly string[]): void {
    let n = this.nodes.get(nodeId);
    if (!n) this.nodes.set(nodeId, (n = { refs: new Map(), weight: 0 }));
    for (let i = 0; i < hashes.length; i++) {
      const c = n.refs.get(hashes[i]!) ?? 0;
      if (c === 0) n.weight += blockWeight(i);
      n.refs.set(hashes[i]!, c + 1);
    }
  }

  remove(nodeId: string, hashes: readonly string[]): void {
    const n = this.nodes.get(nodeId);
    if (!n) return;
    for (let i = 0; i < hashes.length; i++) {
      const c = n.refs.get(hashes[i]!);
      if (c === undefined) continue;
      if (c <= 1) {
        n.refs.delete(hashes[i]!);
        n.weight -= blockWeight(i);
      } else n.refs.set(hashes[i]!, c - 1);
    }
    if (n.refs.size === 0) this.nodes.delete(nodeId);
  }

  /** Distinct active blocks on the node, in base blocks. */
  weightOf(nodeId: string): number {
    return this.nodes.get(nodeId)?.weight ?? 0;
  }

  /** Base blocks of the longest prefix of `hashes` active on the node. */
  matchOf(nodeId: string, hashes: readonly string[]): number {
    const n = this.nodes.get(nodeId);
    if (!n) return 0;
    let depth = 0;
    while (depth < hashes.length && n.refs.has(hashes[depth]!)) depth++;
    return baseBlocksBefore(depth);
  }

  forget(nodeId: string): void {
    this.nodes.delete(nodeId);
  }
}
