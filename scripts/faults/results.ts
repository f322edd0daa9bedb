/**
 * What a fault scenario reports (scripts/faults/run.ts): its requests' outcomes, its problems, the
 * requests around a region worker's kill, and the shape of a scenario and of its fault.
 */
import type { System } from "../system.ts";
import type { Sent } from "./client.ts";
import type { LedgerCheck } from "./ledger.ts";
import type { InternalTarget } from "./scenarios.ts";

export type Outcome = "ok" | "failed-cleanly" | "lost" | "corrupt" | "in-flight-at-kill" | "refused-while-down";

export interface ScenarioResult {
  name: string;
  sent: number;
  ok: number;
  failedCleanly: number;
  lost: number;
  /** Streams that ended with `data: [DONE]` but were not one uninterrupted node's answer ({@link answerProblem}). */
  corrupt: number;
  /** Router restart only (0 elsewhere): requests under way at the kill, and refused while the edge was down. */
  inFlightAtKill: number;
  refusedWhileDown: number;
  /** Requests a first byte was sent for more than once (on two nodes, or twice on one). */
  duplicated: number;
  /** `ok` answers no node recorded a first byte for: 0, or the first-byte record is broken. */
  untracked: number;
  /** Answers (body or headers) showing the internal URL a node redirected to. */
  leaked: number;
  /** Status / error code counts of the clean failures, and how the lost ones ended. */
  failures: Record<string, number>;
  lostAs: Record<string, number>;
  /** What was wrong with the corrupt answers, by kind. */
  corruptAs: Record<string, number>;
  /**
   * Streams whose node failed after the first byte, by `<reason> <outcome>` (the router's
   * `warmpath_stream_continuations_total`, its increase over the scenario): `continued` on another
   * node, or why not.
   */
  continuations: Record<string, number>;
  /** Continuations (the `continued` outcomes above). */
  continued: number;
  /** The same seen from the nodes: first bytes of continuations (the fleet's `continued_tags`) for the scenario's requests. */
  continuedByFleet: number;
  /** Requests of the scenario the router logged a `stream_continued` line for (each continuation of one counted). */
  continuedInLog: number;
  /** The failed, lost and corrupt requests, with the end of their stream and the router's log lines about them. */
  problems: Problem[];
  /** Answers that took more than one node (a retry before the first byte), and answers by region. */
  retried: number;
  regions: Record<string, number>;
  /** Seconds from the end of the fault to the first `ok` answer sent after it. */
  recoverySeconds: number | null;
  /** What the scenario measured beyond the counts (first-byte times, the outage, the redirect target). */
  notes: string;
  /** Region worker kill only: what became of the requests around it. */
  regionWorker?: RegionWorkerOutage;
  /** The usage ledger against the scenario's answers. */
  ledger?: LedgerCheck;
}

/** The requests around the kill of REGION's worker, by what became of them. */
export interface RegionWorkerOutage {
  /** Seconds from the kill to the restarted worker answering /healthz (its bundling and boot included). */
  downSeconds: number;
  /** Requests under way at the kill whose answer REGION had started: how each ended (`ok`, or the failure's detail). */
  cut: Record<string, number>;
  /** Requests under way at the kill that REGION had not answered yet: by the region that answered (or `none`). */
  unanswered: Record<string, number>;
  /** Requests sent while the worker was down, before it was started again: by the region that answered (or `none`). */
  whileDown: Record<string, number>;
  /**
   * Requests sent while its process was starting again, before the harness saw it answer /healthz:
   * by the region that answered. Either region may: the port may take connections before the first
   * health check answers, and the worker restarts on its store, its node table intact.
   */
  restarting: Record<string, number>;
  /** Requests sent after it was back: by the region that answered (or `none`). */
  after: Record<string, number>;
  /** `ok` answers from REGION among the requests sent after it was back. */
  regionOkAfter: number;
  /** Seconds from the worker answering again to the sending of the first request REGION answered `ok`. */
  regionBackSeconds: number | null;
}

/** A request that did not end `ok` (nor as a restart's casualty): what the client saw and what the router said of it. */
export interface Problem {
  /** Its tag, which is also its `x-request-id`. */
  tag: string;
  outcome: Outcome;
  detail: string;
  /** The region and node that answered (headers: the first node of a continued stream). */
  region?: string | undefined;
  node?: string | undefined;
  /** The last characters of what the client read. */
  tail: string;
  /**
   * The router's log lines with its request id: decision lines, `refusal` lines and
   * `stream_continued`. For reading only: refusal lines and a node's own errors' decision lines are
   * bounded per second (docs/OBSERVABILITY.md), so a request's may be missing; every count of this
   * runner comes from its client or from /metrics.
   */
  log: string[];
}

/** What a scenario's fault did, for its heal and its notes. */
export interface Fault {
  /** Requests routed to each node of REGION when the scenario began, to find the busiest since. */
  routedAtStart: Map<string, number>;
  /** The node the fault struck. */
  victim: string;
  injectedAt: number;
  /** When the fault ended: healed, or, for a restart, back up. */
  endedAt: number;
  /** Router restart: when every worker process was killed, and when all of them answered /healthz again. */
  outage?: { killedAt: number; upAt: number };
  /**
   * Region worker kill: when the kill was sent to REGION's worker, when its process had exited, and
   * when the one started again answered /healthz.
   */
  /** Kill sent, process seen dead, restart begun (the process launched again), its /healthz answered. */
  regionOutage?: { killedAt: number; deadAt: number; restartAt: number; upAt: number };
  /** 307 scenario: the internal service the redirect points at. */
  target?: InternalTarget;
}

export interface Scenario {
  name: string;
  inject(system: System, fault: Fault): Promise<void>;
  /** Undoes the fault after it has lasted; absent for a restart, which is over once inject resolves. */
  heal?(system: System, fault: Fault): Promise<void>;
  /** The scenario's own measure, for the notes column. */
  notes?(fault: Fault, sent: readonly Sent[]): string;
}
