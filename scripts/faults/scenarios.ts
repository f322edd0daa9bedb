/**
 * The fault scenarios (scripts/faults/run.ts's module comment lists them): each injects one fault
 * into the running system and heals it, with the helpers that pick where it strikes.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { Faults } from "../../fleet/config.ts";
import { adminRegionStateSchema } from "../../src/contracts/admin.ts";
import type { System } from "../system.ts";
import type { Sent } from "./client.ts";
import { counted, regionWorkerOutage, sum } from "./outcomes.ts";
import { quantiles } from "./quantiles.ts";
import type { Fault, Scenario } from "./results.ts";
import {
  INTERNAL_MARKER,
  PREFILL_SLOWDOWN,
  REGION,
  TOKENS_BEFORE_ERROR_EVENT,
  TOKENS_BEFORE_MALFORMED_EVENT,
  TOKENS_BEFORE_SILENCE,
} from "./settings.ts";

const node = (s: System, region: string, id: string) => s.fleet!.node(region, id)!;

/** Requests routed to each node of REGION so far, by the router's count. */
export async function routedByNode(s: System): Promise<Map<string, number>> {
  const state = adminRegionStateSchema.parse(await (await fetch(`${s.url}/admin/state/${REGION}`)).json());
  return new Map(state.nodes.map((n) => [n.id, n.metrics.routed]));
}

/** Longest a node's breaker stays open (src/core/region/node-table.ts MAX_FAILURE_COOLDOWN_MS), with a margin. */
const HEALTHY_WAIT_MS = 70_000;

/**
 * Waits until no node of REGION is cooling down after failures. Each scenario starts from a whole
 * region: a node's breaker opens for up to a minute after the failures an earlier scenario caused
 * (doubling with each in a row), and a scenario run while two of the three nodes were still out
 * sent every request to its one victim and found no node to continue on (12 of 48 streams of the
 * malformed-event scenario failed after the hung and error-event scenarios had each opened one).
 */
export async function untilRegionHealthy(s: System): Promise<void> {
  const until = Date.now() + HEALTHY_WAIT_MS;
  for (;;) {
    const state = adminRegionStateSchema.parse(await (await fetch(`${s.url}/admin/state/${REGION}`)).json());
    const cooling = state.nodes.filter((n) => n.cooldownMs > 0);
    if (cooling.length === 0) return;
    if (Date.now() > until)
      throw new Error(`${REGION}: ${cooling.map((n) => n.id).join(", ")} still cooling down after ${HEALTHY_WAIT_MS} ms`);
    await sleep(Math.min(1_000, Math.max(...cooling.map((n) => n.cooldownMs))));
  }
}

/**
 * The node of REGION sent the most requests since the scenario began: the one a fault there hurts.
 * Not the most since boot: prefix affinity keeps each support prompt on its node, and the earlier
 * scenarios' faults moved them, so the all-time busiest node may be getting nothing now.
 */
async function busiest(s: System, f: Fault): Promise<string> {
  const now = [...(await routedByNode(s))].map(([id, n]) => ({ id, n: n - (f.routedAtStart.get(id) ?? 0) }));
  return now.reduce((a, b) => (b.n > a.n ? b : a)).id;
}

/** A node-level fault: set on REGION's busiest node, undone by `off`. */
function nodeFault(name: string, on: Partial<Faults>, off: Partial<Faults>): Scenario {
  return {
    name,
    inject: async (s, f) => void node(s, REGION, (f.victim = await busiest(s, f))).setFaults(on),
    heal: async (s, f) => void node(s, REGION, f.victim).setFaults(off),
  };
}

export interface InternalTarget {
  url: string;
  /** Requests that reached it: a router that followed the redirect. */
  hits: number;
  close(): Promise<void>;
}

/** A stand-in for the internal service a misbehaving node redirects to, counting who comes. */
async function internalTarget(): Promise<InternalTarget> {
  const server = createServer((_req, res) => {
    target.hits++;
    res.end(`internal service ${INTERNAL_MARKER}`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const target: InternalTarget = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/${INTERNAL_MARKER}/v1/chat/completions`,
    hits: 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return target;
}

/** p50 first-byte time of the `ok` answers among `sent`, with their count. */
function ttftP50(sent: readonly Sent[]): string {
  const { p50, n } = quantiles(sent.filter((r) => r.outcome === "ok").map((r) => r.ttftMs));
  return n ? `${p50.toFixed(0)} ms (${n})` : "– (0)";
}

export const SCENARIOS: Scenario[] = [
  nodeFault("node answering 503", { error_rate: 1 }, { error_rate: 0 }),
  nodeFault("node hung before its first byte", { hang: true }, { hang: false }),
  nodeFault("node hung after its first byte", { hang_after_tokens: TOKENS_BEFORE_SILENCE }, { hang_after_tokens: null }),
  nodeFault(
    "node sending an error event mid-stream",
    { error_event_after_tokens: TOKENS_BEFORE_ERROR_EVENT },
    { error_event_after_tokens: null },
  ),
  nodeFault(
    "node sending a malformed event mid-stream",
    { malformed_after_tokens: TOKENS_BEFORE_MALFORMED_EVENT },
    { malformed_after_tokens: null },
  ),
  {
    name: "node answering 307 to an internal URL",
    inject: async (s, f) => {
      f.target = await internalTarget();
      node(s, REGION, (f.victim = await busiest(s, f))).setFaults({ redirect_to: f.target.url });
    },
    heal: async (s, f) => {
      node(s, REGION, f.victim).setFaults({ redirect_to: null });
      await f.target!.close();
    },
    notes: (f) => `redirect target fetched ${f.target!.hits} times`,
  },
  {
    ...nodeFault(`node slow to ${PREFILL_SLOWDOWN}x its prefill`, { prefill_slowdown: PREFILL_SLOWDOWN }, { prefill_slowdown: 1 }),
    notes: (f, sent) => {
      const before = sent.filter((r) => r.at < f.injectedAt);
      const during = sent.filter((r) => r.at >= f.injectedAt && r.at < f.endedAt);
      const on = (rs: Sent[]) => rs.filter((r) => r.node === f.victim);
      return (
        `first byte p50 (answers): all nodes ${ttftP50(before)} before, ${ttftP50(during)} during; ` +
        `${f.victim} ${ttftP50(on(before))} before, ${ttftP50(on(during))} during`
      );
    },
  },
  {
    name: "node killed mid-stream, back with a new boot id",
    inject: async (s, f) => node(s, REGION, (f.victim = await busiest(s, f))).crash(),
    heal: async (s, f) => node(s, REGION, f.victim).restart(0),
  },
  {
    name: "region us-east's GPUs down (its three nodes killed) and back (clients fail over to eu-west)",
    inject: async (s) => {
      for (const id of ["use1-a", "use1-b", "use1-c"]) await node(s, REGION, id).crash();
    },
    heal: async (s) => {
      for (const id of ["use1-a", "use1-b", "use1-c"]) await node(s, REGION, id).restart(0);
    },
  },
  {
    name: "region object us-east restarted",
    inject: async (s) => {
      const res = await fetch(`${s.url}/admin/regions/${REGION}/restart`, { method: "POST" });
      if (res.status !== 200) throw new Error(`restart of ${REGION}'s object: ${res.status} ${await res.text()}`);
    },
    notes: (_f, sent) =>
      `placed without the object (x-warmpath-decision: stateless): ${sent.filter((r) => r.decision === "stateless").length}`,
  },
  {
    name: "region worker us-east killed (SIGKILL) mid-request and started again",
    inject: async (s, f) => {
      const killedAt = await s.killRegionWorker(REGION);
      f.regionOutage = { killedAt, deadAt: Date.now(), restartAt: NaN, upAt: NaN };
    },
    heal: async (s, f) => {
      f.regionOutage!.restartAt = Date.now();
      f.regionOutage!.upAt = await s.startRegionWorker(REGION);
    },
    notes: (f, sent) => {
      const o = regionWorkerOutage(f, sent)!;
      const back = o.regionBackSeconds === null ? "no ok answer from it after" : `${o.regionBackSeconds.toFixed(1)} s later`;
      return (
        `in flight at the kill: ${counted(sum(o.cut), o.cut)} answered by ${REGION}, ${counted(sum(o.unanswered), o.unanswered)} not yet answered (by the region that then answered); ` +
        `sent while it was down: ${counted(sum(o.whileDown), o.whileDown)}; ` +
        `sent while it started again: ${counted(sum(o.restarting), o.restarting)}; ` +
        `${REGION}'s worker answered again ${o.downSeconds.toFixed(1)} s after the kill (bundled and booted), its first ok answer to a request sent ${back}; ` +
        `sent after it was back: ${counted(sum(o.after), o.after)}`
      );
    },
  },
  {
    name: "router killed (SIGKILL: the edge's and every region's worker process) and started again",
    inject: async (s, f) => void (f.outage = await s.restartRouter()),
    notes: (f, sent) => {
      const { killedAt, upAt } = f.outage!;
      const firstOk = Math.min(...sent.filter((r) => r.outcome === "ok" && r.at >= killedAt).map((r) => r.at + r.ttftMs!));
      const outage = Number.isFinite(firstOk) ? `${((firstOk - killedAt) / 1000).toFixed(1)} s` : "no ok answer after it";
      return `outage ${outage} from the kill to the first byte of an ok answer (every worker process answering /healthz again after ${((upAt - killedAt) / 1000).toFixed(1)} s)`;
    },
  },
];
