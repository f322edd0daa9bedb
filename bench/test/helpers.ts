/** Shared fixtures for the bench unit tests (not a test file itself). */
import type { Dispatcher, Fleet, FleetConfig, Live, SimNode } from "../fleet.ts";
import type { BenchRequest } from "../workloads/types.ts";

/** A small fleet with round numbers: 1 token per ms of prefill, 10 ms per decoded token. */
export function smallFleet(over: Partial<FleetConfig> = {}): FleetConfig {
  return {
    nodes: 1,
    capacityTokens: 10_000,
    prefillRate: 1_000,
    decodeRate: 100,
    slots: 8,
    // Far apart, so reports never interleave with the events a test looks at (unless it wants them).
    reportIntervalMs: 1e9,
    noiseSigma: 0,
    ...over,
  };
}

/** A request of the fleet's view only (the router fields are left empty). */
export function req(id: number, arrival: number, promptTokens: number, trueBlocks: number[], outputTokens = 1): BenchRequest {
  return { id, arrival, sessionKey: undefined, hashes: [], promptTokens, trueBlocks, outputTokens };
}

/** Consecutive block ids [from, from + n). */
export function range(from: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

export interface Call {
  kind: "route" | "firstToken" | "complete" | "report";
  id: number;
  t: number;
  /** For reports: the node's running and waiting counts at that moment. */
  running?: number;
  waiting?: number;
}

/** Places request `id` on `place(id)` and records every callback, in order. */
export class FixedDispatcher implements Dispatcher {
  readonly name = "fixed";
  readonly calls: Call[] = [];
  fleet: Fleet | undefined;
  private readonly place: (id: number) => number;
  constructor(place: (id: number) => number = () => 0) {
    this.place = place;
  }
  init(fleet: Fleet): void {
    this.fleet = fleet;
  }
  route(r: Live, now: number): number {
    this.calls.push({ kind: "route", id: r.req.id, t: now });
    return this.place(r.req.id);
  }
  firstToken(r: Live, now: number): void {
    this.calls.push({ kind: "firstToken", id: r.req.id, t: now });
  }
  complete(r: Live, now: number): void {
    this.calls.push({ kind: "complete", id: r.req.id, t: now });
  }
  report(node: SimNode, now: number): void {
    this.calls.push({ kind: "report", id: node.index, t: now, running: node.running, waiting: node.waiting });
  }
}

/** Length of the common prefix of two arrays. */
export function commonPrefix<T>(a: readonly T[], b: readonly T[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
