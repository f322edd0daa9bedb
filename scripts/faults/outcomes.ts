/**
 * What became of a scenario's requests, counted: by outcome around an outage, and around the kill
 * of a region's worker (scripts/faults/run.ts).
 */
import type { Sent } from "./client.ts";
import type { Fault, Outcome, RegionWorkerOutage } from "./results.ts";
import { REGION } from "./settings.ts";

/**
 * A router restart's casualties, told apart from the lost: a request under way when it was killed,
 * and a request refused (a connection error) while it was down.
 */
export function aroundOutage(r: Sent, outage: Fault["outage"]): Outcome {
  if (r.outcome !== "lost" || !outage) return r.outcome;
  if (r.at < outage.killedAt && r.endedAt >= outage.killedAt) return "in-flight-at-kill";
  if (r.at >= outage.killedAt && r.at < outage.upAt && r.detail.startsWith("connection")) return "refused-while-down";
  return "lost";
}

export const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

/** Counts of `rs` by `key`. */
export function countBy(rs: readonly Sent[], key: (r: Sent) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rs) out[key(r)] = (out[key(r)] ?? 0) + 1;
  return out;
}

/** What became of the requests around the kill of REGION's worker (undefined for another fault). */
export function regionWorkerOutage(f: Fault, sent: readonly Sent[]): RegionWorkerOutage | undefined {
  if (!f.regionOutage) return undefined;
  const { killedAt, deadAt, restartAt, upAt } = f.regionOutage;
  // Sent before the process had died (the kill takes a moment) and not over when the kill was sent.
  const inFlight = sent.filter((r) => r.at < deadAt && r.endedAt >= killedAt);
  // The region that answered, or (none did) how the request failed.
  const answeredBy = (r: Sent) => r.region ?? `none (${r.detail})`;
  const regionOk = sent.filter((r) => r.at >= upAt && r.region === REGION && r.outcome === "ok").map((r) => r.at);
  return {
    downSeconds: (upAt - killedAt) / 1000,
    cut: countBy(
      inFlight.filter((r) => r.region === REGION),
      (r) => (r.outcome === "ok" ? "ok" : r.detail),
    ),
    unanswered: countBy(
      inFlight.filter((r) => r.region !== REGION),
      answeredBy,
    ),
    whileDown: countBy(
      sent.filter((r) => r.at >= deadAt && r.at < restartAt),
      answeredBy,
    ),
    // "Up" is when the harness's /healthz poll was first answered: a poll every 200 ms, and a poll
    // sent to a port that takes connections before the worker answers waits as long as the requests
    // do. So no instant before it bounds when the new process answers; its launch does.
    restarting: countBy(
      sent.filter((r) => r.at >= restartAt && r.at < upAt),
      answeredBy,
    ),
    after: countBy(
      sent.filter((r) => r.at >= upAt),
      answeredBy,
    ),
    regionOkAfter: regionOk.length,
    regionBackSeconds: regionOk.length ? (Math.min(...regionOk) - upAt) / 1000 : null,
  };
}

export const counted = (n: number, what: Record<string, number>) =>
  `${n}${
    Object.keys(what).length
      ? ` (${Object.entries(what)
          .map(([k, v]) => `${k}: ${v}`)
          .join(", ")})`
      : ""
  }`;
