/**
 * NVIDIA Dynamo's opt-in overload protection, its busy thresholds and 529, in front of its KV
 * router's cost (src/core/policies/dynamo-kv.ts).
 *
 * Source: ai-dynamo/dynamo, lib/llm/src/discovery/worker_monitor.rs at
 * 00220774a0cccb802e71d4e107d0ad6357cbe0fa (`LoadThresholdConfig`, `WorkerLoadState::is_overloaded`,
 * the decode overload latch), and the documentation "Request Rejection" / "Request Rejection
 * Architecture" (docs.nvidia.com/dynamo, v1.3.0 to v1.7.0):
 * - every threshold is opt-in (None by default: no rejection at all). A worker is busy when any
 *   configured check fires: its active prefill tokens above `--active-prefill-tokens-threshold`
 *   (absolute), or above `--active-prefill-tokens-threshold-frac` x its max_num_batched_tokens, or
 *   its decode latch, set when its KV blocks in use (`kv_used_blocks`, or the router's
 *   `active_decode_blocks`) exceed `--active-decode-blocks-threshold` x its total blocks and
 *   cleared only when both are back under it;
 * - the push router excludes busy workers; when every eligible worker is busy the frontend answers
 *   HTTP 529 ("overloaded"; 503 before v1.3).
 * The documented example, used here as the opt-in's default: `--active-decode-blocks-threshold
 * 0.85 --active-prefill-tokens-threshold 10000`.
 *
 * Signals in the simulation:
 * - active prefill tokens: the router's own count (Dynamo's ActiveSequences): the uncached prompt
 *   tokens, as predicted at dispatch, of the requests sent to the worker that have not produced
 *   their first token;
 * - KV blocks in use: the node's true KV usage (prompt and answer of its running requests over its
 *   capacity), which the worker publishes on every change (so read fresh, not from the 1 s reports).
 * The fractional prefill threshold needs max_num_batched_tokens, which the simulated nodes (one
 * prefill at a time) do not have: not modelled.
 */
import type { Dispatcher, Fleet, Live, Placement, SimNode } from "../fleet.ts";
import type { PlacingDispatcher } from "./routers.ts";

export interface DynamoBusyConfig {
  /** `--active-decode-blocks-threshold` (fraction of KV blocks); undefined: off. */
  activeDecodeBlocksThreshold: number | undefined;
  /** `--active-prefill-tokens-threshold` (tokens); undefined: off. */
  activePrefillTokensThreshold: number | undefined;
}

/** The documented example (Request Rejection, Frontend Arguments). */
export const DYNAMO_DOC_EXAMPLE: DynamoBusyConfig = { activeDecodeBlocksThreshold: 0.85, activePrefillTokensThreshold: 10_000 };

export class DynamoBusy implements Dispatcher {
  readonly name: string;
  private readonly inner: PlacingDispatcher;
  private readonly cfg: DynamoBusyConfig;
  private fleet: Fleet | undefined;
  /** Per node: uncached prompt tokens sent and not yet past their first token. */
  private activePrefill: number[] = [];
  /** Per request: what it added to its node's active prefill. */
  private readonly added = new Map<Live, number>();
  /** Per node: the decode latch. */
  private latched: boolean[] = [];
  readonly refusalReasons = new Map<string, number>();

  constructor(name: string, inner: PlacingDispatcher, cfg: DynamoBusyConfig) {
    this.name = name;
    this.inner = inner;
    this.cfg = cfg;
  }

  init(fleet: Fleet): void {
    this.fleet = fleet;
    this.activePrefill = fleet.nodes.map(() => 0);
    this.latched = fleet.nodes.map(() => false);
    this.inner.init(fleet);
  }

  /** Whether `node` is busy now (updating its decode latch from its KV usage). */
  private busy(node: SimNode): boolean {
    const { activeDecodeBlocksThreshold: decode, activePrefillTokensThreshold: prefill } = this.cfg;
    if (prefill !== undefined && this.activePrefill[node.index]! > prefill) return true;
    if (decode !== undefined) {
      // One decode signal here (the node's KV usage), so the latch is set and cleared by it alone.
      this.latched[node.index] = node.activeKvTokens > decode * this.fleet!.cfg.capacityTokens;
      if (this.latched[node.index]) return true;
    }
    return false;
  }

  route(r: Live, now: number): Placement {
    const busy = this.fleet!.nodes.filter((n) => this.busy(n)).map((n) => n.id);
    if (busy.length === this.fleet!.nodes.length) {
      this.refusalReasons.set("dynamo-529", (this.refusalReasons.get("dynamo-529") ?? 0) + 1);
      return { refused: "dynamo-529" };
    }
    const p = this.inner.decide(r, now, busy);
    if (typeof p !== "number") throw new Error(`${this.name}: the KV router behind the busy check must place every request`);
    const uncached = Math.max(0, r.req.promptTokens - (Number.isNaN(r.predictedCachedTokens) ? 0 : r.predictedCachedTokens));
    this.activePrefill[p] = this.activePrefill[p]! + uncached;
    this.added.set(r, uncached);
    return p;
  }

  firstToken(r: Live, now: number): void {
    const a = this.added.get(r);
    if (a !== undefined) {
      this.activePrefill[r.node] = this.activePrefill[r.node]! - a;
      this.added.delete(r);
    }
    this.inner.firstToken(r, now);
  }

  complete(r: Live, now: number): void {
    this.inner.complete(r, now);
  }

  report(node: SimNode, now: number): void {
    this.inner.report(node, now);
  }
}
