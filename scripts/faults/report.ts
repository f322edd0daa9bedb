/** docs/faults.md's table and the problems written to stderr, from the scenarios' results. */
import { formatLedger } from "./ledger.ts";
import { counted, sum } from "./outcomes.ts";
import type { ScenarioResult } from "./results.ts";

/** The continuations column: those continued, by how their node failed; then those that were not, by how and why. */
export function continuationCell(r: Pick<ScenarioResult, "continuations" | "continued">): string {
  const continued: Record<string, number> = {};
  const not: Record<string, number> = {};
  for (const [key, n] of Object.entries(r.continuations)) {
    const [reason, outcome] = key.split(" ");
    if (outcome === "continued") continued[reason!] = (continued[reason!] ?? 0) + n;
    else not[key] = n;
  }
  const notContinued = sum(not);
  return counted(r.continued, continued) + (notContinued ? `; not continued: ${counted(notContinued, not)}` : "");
}

export function formatResults(results: readonly ScenarioResult[]): string {
  const rows = results.map((r) => {
    // Only the router restart has these outcomes (the edge itself was down); elsewhere they cannot occur.
    const restart = r.name.startsWith("router") ? [r.inFlightAtKill, r.refusedWhileDown] : ["–", "–"];
    return `| ${[
      r.name,
      r.sent,
      r.ok,
      continuationCell(r),
      counted(r.failedCleanly, r.failures),
      counted(r.lost, r.lostAs),
      counted(r.corrupt, r.corruptAs),
      r.duplicated,
      ...restart,
      r.leaked,
      r.retried,
      Object.entries(r.regions)
        .map(([k, v]) => `${k} ${v}`)
        .join(", "),
      r.recoverySeconds === null ? "–" : r.recoverySeconds.toFixed(1) + " s",
      r.ledger ? formatLedger(r.ledger) : "–",
      r.notes || "–",
    ].join(" | ")} |`;
  });
  return [
    "| scenario | sent | ok | continued mid-stream | failed cleanly | lost | corrupt | duplicated | in flight at the kill | refused while down | leaked internal URL | retried before the first byte | answered by region | recovery | usage ledger | measured |",
    "|---|---:|---:|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---|---|",
    ...rows,
  ].join("\n");
}

/** The failed, lost and corrupt requests of a scenario, for stderr: what the client read last and what the router logged. */
export function formatProblems(r: Pick<ScenarioResult, "name" | "problems">, max = 20): string {
  if (r.problems.length === 0) return "";
  const shown = r.problems
    .slice(0, max)
    .map((p) =>
      [
        `- ${p.tag} (${p.region ?? "?"}/${p.node ?? "?"}): ${p.outcome}, ${p.detail}`,
        `  stream tail: ${JSON.stringify(p.tail.slice(-300))}`,
        ...p.log.map((l) => `  router: ${l}`),
      ].join("\n"),
    );
  const more = r.problems.length > max ? [`(and ${r.problems.length - max} more)`] : [];
  return [`${r.name}: ${r.problems.length} not ok`, ...shown, ...more].join("\n");
}
