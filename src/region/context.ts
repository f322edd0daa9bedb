/**
 * What the region worker knows of a request it serves: the edge's dispatch message, the region's
 * configuration, and the worker's bindings. One object handed through the region's steps.
 */
import type { LoadedConfig, LoadedRegion } from "../config/load.ts";
import type { DispatchRequest } from "../contracts/region-service.ts";
import type { RegionTrace } from "./trace.ts";

/** The part of the execution context the region worker needs: work that outlives the response. */
export interface WaitUntil {
  waitUntil(promise: Promise<unknown>): void;
}

export interface RegionContext {
  env: Env;
  ctx: WaitUntil;
  config: LoadedConfig;
  region: LoadedRegion;
  request: DispatchRequest;
  /** The body to forward to the node, byte for byte (node-body.ts). */
  body: Uint8Array;
  /** The node was asked for usage the client did not ask for: its event is taken out of the answer. */
  usageInjected: boolean;
  /** The body's completion budget (src/proxy/completion-budget.ts), from the edge's reading of the body or node-body.ts's scan. */
  completionBudget: number | undefined;
  /**
   * Unique to this dispatch (drawn when it arrives): what the region object keeps the request's
   * budget hold under, its retries and continuations included (routing.ts `holdKey`).
   */
  holdKey: string;
  /** The request's spans in this worker (trace.ts). */
  trace: RegionTrace;
  /**
   * Aborted when the edge lets go of the answer (its client went): the worker's incoming request's
   * signal (the `enable_request_signal` compatibility flag, wrangler.toml). Absent: not known.
   */
  clientGone?: AbortSignal | undefined;
}

/** When the whole request must be over (ms epoch): the edge's arrival plus the configured deadline. */
export function deadlineOf(rc: RegionContext): number {
  return rc.request.startedAt + rc.config.raw.limits.request_deadline_ms;
}
