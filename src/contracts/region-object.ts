/**
 * The region worker -> region Durable Object boundary (Workers RPC): the object's methods as the
 * region worker calls them. The object (durable-objects/region.ts) implements these; the messages'
 * zod contracts are in routing.ts, node.ts and region-init.ts, validated by the object on arrival.
 */
import type { NodeSpec } from "../core/region/index.ts";
import type { IdentityRefusal } from "../core/node-identity.ts";
import type { CompletionOutcome, RouteRequest, RouteResult } from "./routing.ts";

export type { CompletionOutcome, RouteRequest, RouteResult };

/** The reason a restart aborts the object with: the error its callers see. */
export const RESTART_REASON = "region object restarted by an operator";

/**
 * A placed request's session with its object (durable-objects/region.ts, RouteSession): the first
 * byte and the completion are calls on it, in the RPC session `route` opened (one billed request).
 */
export interface RouteSessionApi {
  firstByte(responseId?: string): void;
  complete(outcome: CompletionOutcome): boolean;
}

/** What `route` answers: a placement with its session, or why the region cannot take the request. */
export type RouteAnswer = (Extract<RouteResult, { ok: true }> & { session: RouteSessionApi }) | Extract<RouteResult, { ok: false }>;

/**
 * `route`'s answer to a call that carried only a fingerprint (region-init.ts, RegionInitRef) the
 * object does not hold: the caller calls again, once, with the whole init. Nothing was routed
 * (`ok: false`: a caller that looks only at `ok` never takes it for a placement).
 */
export interface InitNeeded {
  ok: false;
  initNeeded: true;
}
export const INIT_NEEDED: InitNeeded = { ok: false, initNeeded: true };

/** Whether a `route` answer asks for the init. */
export function isInitNeeded(answer: RouteAnswer | InitNeeded): answer is InitNeeded {
  return "initNeeded" in answer;
}

/** A report's outcome: the stored spec (and whether the report registered the node), or why the credential may not act as the node. */
export type ReportOutcome =
  | {
      ok: true;
      spec: NodeSpec;
      registered: boolean;
      /** A sharded region: the report registered or changed the node, so every shard needs it now (later reports reach them through the exchange's feed). */
      mirror: boolean;
    }
  | { ok: false; reason: IdentityRefusal; retryAfterMs?: number | undefined };
