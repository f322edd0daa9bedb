/**
 * Running one fault scenario (scripts/faults/run.ts): the client load around the fault, every
 * request accounted for, the router's and the fleet's counters, and the usage ledger checked.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { DEV_API_KEY, DEV_API_KEY_2 } from "../../src/config/dev-credentials.ts";
import type { System } from "../system.ts";
import { send, type Sent } from "./client.ts";
import { duplicatedTags, increase, routerContinuations, tagCounts } from "./counters.ts";
import { ledgerCheck, ledgers } from "./ledger.ts";
import { aroundOutage, countBy, regionWorkerOutage } from "./outcomes.ts";
import type { Fault, Outcome, Problem, Scenario, ScenarioResult } from "./results.ts";
import { continuationNotes, continuedLines, routerLog } from "./router-log.ts";
import { routedByNode, untilRegionHealthy } from "./scenarios.ts";
import { RATE_PER_TENANT } from "./settings.ts";

/** Distinguishes runs in one process, so a tag is never reused. */
const RUN = Date.now().toString(36);

let scenarioSeq = 0;

/**
 * Steady load, two tenants, requests tagged `<prefix>-<i>`, for `ms` and then for as long as `more`
 * says; resolves when every request has been sent.
 */
export async function load(
  system: System,
  ms: number,
  tagPrefix: string,
  onSent: (tag: string, p: Promise<Sent>) => void,
  more: () => boolean = () => false,
) {
  const end = Date.now() + ms;
  let i = 0;
  while (Date.now() < end || more()) {
    for (const key of [DEV_API_KEY, DEV_API_KEY_2]) {
      const tag = `${tagPrefix}-${i}`;
      onSent(tag, send(system, key, i++, tag));
    }
    await sleep(1_000 / RATE_PER_TENANT);
  }
}

export async function runScenario(system: System, scenario: Scenario, faultMs = 3_000): Promise<ScenarioResult> {
  const pending: Array<Promise<Sent>> = [];
  const tags: string[] = [];
  await untilRegionHealthy(system);
  const prefix = `${RUN}-${++scenarioSeq}`;
  const onSent = (tag: string, p: Promise<Sent>) => (tags.push(tag), pending.push(p));
  const fault: Fault = { routedAtStart: await routedByNode(system), victim: "", injectedAt: 0, endedAt: 0 };
  const countersBefore = await routerContinuations(system);
  const ledgerBefore = await ledgers(system);
  // The fault strikes one second into a steady load, so requests are in flight when it does; the
  // load goes on until the fault is over (healed, or a restart back up), however long that takes.
  let over = false;
  const faultLasts = sleep(1_000 + faultMs);
  const before = load(system, 1_000 + faultMs, `${prefix}-a`, onSent, () => !over);
  await sleep(1_000);
  fault.injectedAt = Date.now();
  await scenario.inject(system, fault);
  if (scenario.heal) {
    await faultLasts;
    await scenario.heal(system, fault);
  }
  fault.endedAt = Date.now();
  over = true;
  await before;
  await load(system, 2_000, `${prefix}-b`, onSent);
  const sent = await Promise.all(pending);
  // The failed nodes' completions, which count continuations, are reported after the streams end.
  await sleep(COUNTERS_SETTLE_MS);
  const continuations = increase(countersBefore, await routerContinuations(system));
  const ledger = await ledgerCheck(system, ledgerBefore, sent);
  const results = sent.map((r) => ({ ...r, outcome: aroundOutage(r, fault.outage) }));
  const states = system.fleet!.nodes.map((n) => n.state());
  const firstBytes = tagCounts(states, "first_byte_tags");
  const continuedBytes = tagCounts(states, "continued_tags");
  const count = (o: Outcome) => results.filter((r) => r.outcome === o).length;
  const failures: Record<string, number> = {};
  const lostAs: Record<string, number> = {};
  for (const r of results) if (r.outcome === "failed-cleanly") failures[r.detail] = (failures[r.detail] ?? 0) + 1;
  for (const r of results) if (r.outcome === "lost") lostAs[r.detail] = (lostAs[r.detail] ?? 0) + 1;
  const regions: Record<string, number> = {};
  for (const r of results) if (r.region) regions[r.region] = (regions[r.region] ?? 0) + 1;
  const firstOkAfter = results.filter((r) => r.outcome === "ok" && r.at >= fault.endedAt).map((r) => r.at);
  const continued = Object.entries(continuations)
    .filter(([k]) => k.endsWith(" continued"))
    .reduce((n, [, v]) => n + v, 0);
  const problems: Problem[] = results
    .filter((r) => r.outcome === "failed-cleanly" || r.outcome === "lost" || r.outcome === "corrupt")
    .map((r, i) => ({
      tag: r.tag ?? `#${i}`,
      outcome: r.outcome,
      detail: r.corrupt ? `${r.corrupt.kind}: ${r.corrupt.detail}` : r.detail,
      region: r.region,
      node: r.node,
      tail: r.tail ?? "",
      log: (r.tag && routerLog.get(r.tag)) || [],
    }));
  const continuedInLog = tags.reduce((n, t) => n + continuedLines(t).length, 0);
  const continuedByFleet = tags.reduce((n, t) => n + (continuedBytes.get(t) ?? 0), 0);
  // Three views of one count: the router's counter, its log lines, the nodes' first bytes.
  const views =
    continuedByFleet === continued && continuedInLog === continued
      ? ""
      : `continuations: ${continued} counted by the router, ${continuedInLog} logged (stream_continued), ${continuedByFleet} first bytes of continuations on the nodes`;
  const notes = [continuationNotes(tags), views, scenario.notes?.(fault, results) ?? ""].filter(Boolean).join("; ");
  for (const t of tags) routerLog.delete(t);
  return {
    name: scenario.name,
    sent: results.length,
    ok: count("ok"),
    failedCleanly: count("failed-cleanly"),
    lost: count("lost"),
    corrupt: count("corrupt"),
    inFlightAtKill: count("in-flight-at-kill"),
    refusedWhileDown: count("refused-while-down"),
    duplicated: duplicatedTags(tags, firstBytes).length,
    untracked: results.filter((r, i) => r.outcome === "ok" && !firstBytes.get(tags[i]!)).length,
    leaked: results.filter((r) => r.leaked).length,
    failures,
    lostAs,
    corruptAs: countBy(
      results.filter((r) => r.outcome === "corrupt"),
      (r) => r.detail,
    ),
    continuations,
    continued,
    continuedByFleet,
    continuedInLog,
    problems,
    retried: results.filter((r) => (r.attempts ?? 0) > 1).length,
    regions,
    recoverySeconds: firstOkAfter.length ? (Math.min(...firstOkAfter) - fault.endedAt) / 1000 : null,
    notes,
    ledger,
    ...(fault.regionOutage ? { regionWorker: regionWorkerOutage(fault, results) } : {}),
  };
}

/** How long after a scenario's last answer its continuation counters are read (the region's object counts them in the background). */
const COUNTERS_SETTLE_MS = 500;
