/**
 * The routers bench/goodput.ts compares, each a Dispatcher of the simulation (bench/fleet.ts) that
 * may refuse a request or hold it: warmpath as production ships it, warmpath without admission,
 * the anchors with their defaults and with their documented opt-in protections, and the SLO-aware
 * oracle. Every router is built fresh for each run.
 */
import type { Decided, Dispatcher, Fleet, Live, Placement, SimNode } from "../fleet.ts";
import { RouterDispatcher, productionRegionSettings, withAdmission } from "../router-driver.ts";
import { SloOracleDispatcher } from "../oracle.ts";
import { SmgLimiter, smgDefaults, type SmgLimiterConfig } from "./smg-limiter.ts";
import { DynamoBusy, type DynamoBusyConfig } from "./dynamo-busy.ts";
import { LlmdDispatcher, type LlmdAdmitterConfig } from "./llmd.ts";

/** A dispatcher that can place a request away from some nodes (what the anchors' protections sit in front of). */
export interface PlacingDispatcher {
  init(fleet: Fleet): void;
  /** A node for `r`, or a refusal, or "queued"; never one of `exclude` (node ids). */
  decide(r: Live, now: number, exclude?: string[]): Placement;
  firstToken(r: Live, now: number): void;
  complete(r: Live, now: number): void;
  report(node: SimNode, now: number): void;
}

/** A RegionRouter (through RouterDispatcher) whose refusals and queue the simulation sees. */
export class DecidingRouter implements Dispatcher {
  readonly name: string;
  readonly inner: RouterDispatcher;
  constructor(name: string, inner: RouterDispatcher) {
    this.name = name;
    this.inner = inner;
  }
  init(fleet: Fleet): void {
    this.inner.init(fleet);
  }
  route(r: Live, now: number): Placement {
    return this.inner.decide(r, now);
  }
  firstToken(r: Live, now: number): void {
    this.inner.firstToken(r, now);
  }
  complete(r: Live, now: number): void {
    this.inner.complete(r, now);
  }
  report(node: SimNode, now: number): void {
    this.inner.report(node, now);
  }
  drain(now: number): Decided[] {
    return this.inner.drain(now);
  }
  wakeAt(now: number): number | undefined {
    return this.inner.wakeAt(now);
  }
  get refusalReasons(): Map<string, number> {
    return this.inner.refusalReasons;
  }
}

/** How a router of the comparison is built: its kind and, for a protection, its configuration. */
export type RouterSpec =
  | { kind: "warmpath"; admission: boolean; commitments?: Readonly<Record<string, number>>; tellPlaces?: boolean }
  | { kind: "anchor"; policy: "sglang-cache-aware" | "dynamo-kv" }
  | { kind: "llmd"; admitter?: LlmdAdmitterConfig }
  | { kind: "smg-limit"; config: SmgLimiterConfig }
  | { kind: "dynamo-busy"; config: DynamoBusyConfig }
  | { kind: "slo-oracle" };

/** One router of the comparison: its row name, what it is, and its spec. */
export interface RouterEntry {
  name: string;
  /** Its group in the tables: warmpath, anchor default, anchor opt-in protection, reference. */
  group: "warmpath" | "default" | "protection" | "reference";
  /** The anchor it belongs to (for "best anchor" targets). */
  anchor?: "smg" | "dynamo" | "llm-d";
  spec: RouterSpec;
  /** One line for the report. */
  description: string;
}

/** A fresh dispatcher for `spec` on a fleet of `prefillRate` tokens/s per node. */
export function buildRouter(name: string, spec: RouterSpec, prefillRate: number): Dispatcher {
  switch (spec.kind) {
    case "warmpath":
      return new DecidingRouter(
        name,
        new RouterDispatcher(name, { name: "warmpath" }, prefillRate, {
          // Production's settings (DEFAULT_REGION_SETTINGS): admission on, the 30 s saturation
          // bound and 256 in flight per node; without admission, what landed before it.
          settings: (policy, rate) => withAdmission(productionRegionSettings(policy, rate), spec.admission),
          tenancy: true,
          refusals: true,
          commitments: spec.commitments,
          tellPlaces: spec.tellPlaces,
        }),
      );
    case "anchor":
      return new DecidingRouter(name, anchorRouter(name, spec.policy, prefillRate));
    case "llmd":
      return new LlmdDispatcher(name, spec.admitter);
    case "smg-limit":
      return new SmgLimiter(name, anchorRouter(name, "sglang-cache-aware", prefillRate), spec.config);
    case "dynamo-busy":
      return new DynamoBusy(name, anchorRouter(name, "dynamo-kv", prefillRate), spec.config);
    case "slo-oracle":
      return new SloOracleDispatcher();
  }
}

/**
 * An anchor's placement as `npm run bench` runs it (src/core/policies, its defaults): unbounded
 * pass-through (no saturation bound, no in-flight cap, no admission), no tenants.
 */
function anchorRouter(name: string, policy: "sglang-cache-aware" | "dynamo-kv", prefillRate: number): RouterDispatcher {
  return new RouterDispatcher(name, { name: policy }, prefillRate, { refusals: true });
}

export { smgDefaults };
