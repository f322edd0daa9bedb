/**
 * What the demo prints: the side-by-side table of what the nodes measured, the decision counts,
 * the per-node figures, and the warnings that say when a run must be discarded. Also the JSON
 * form (--json), so both outputs are shaped in one place. Pure: no I/O.
 */
import { MAX_DECODE_STRETCH } from "./harness.ts";
import type { DemoResult } from "./run.ts";
import type { PolicyResult } from "./summarize.ts";

const int = (n: number) => Math.round(n).toLocaleString("en-US");
const pct = (n: number) => `${(n * 100).toFixed(1)}%`;

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) => r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("   ")).join("\n");
}

/** How far a run's harness stretched the simulated decode: `1.04x (+9 ms)`. */
const stretch = (p: PolicyResult) =>
  Number.isFinite(p.harness.medianStretch)
    ? `${p.harness.medianStretch.toFixed(2)}x (+${Math.round(p.harness.medianExcessMs)} ms)`
    : `- (${p.harness.samples} answers)`;

/**
 * What is printed instead of the table when the run's timings do not hold (harness.ts): why, each
 * run's measured stretch, and what to do. No figure that could be read as a result.
 */
export function formatRefusal(result: DemoResult): string {
  if (result.verdict.trusted) return "";
  const lines = [
    `No comparison printed: ${result.verdict.reason}`,
    "",
    table([
      ["the median answer's decode, against its simulated time", ...result.policies.map((p) => p.policy)],
      ["", ...result.policies.map(stretch)],
    ]),
    "",
    result.verdict.remedy,
  ];
  return lines.join("\n");
}

/** The side-by-side table, then per-node figures; or, if the timings do not hold, why not (formatRefusal). */
export function formatResult(result: DemoResult): string {
  if (!result.verdict.trusted) return formatRefusal(result);
  const ps = result.policies;
  const w = result.workload;
  const row = (label: string, f: (p: PolicyResult) => string) => [label, ...ps.map(f)];
  const nodeMinMax = (p: PolicyResult) => {
    const routed = p.nodes.map((n) => n.routed);
    return `${Math.min(...routed)} / ${Math.max(...routed)}`;
  };
  const lines: string[] = [];
  lines.push(
    `Workload: ${ps[0]?.requests ?? 0} requests, ${result.conversations} conversations, ${w.tenants} tenants x ${w.usersPerTenant} users, ` +
      `${w.documentsPerTenant} documents/tenant, seed ${w.seed}; ~${int(result.promptTokensOffered)} prompt tokens offered.`,
  );
  lines.push(
    `Fleet: ${result.fleetFile} at time factor ${result.timeFactor} (every duration / ${result.timeFactor}; TTFTs below are wall ms, ` +
      `x${result.timeFactor} for model time); ${w.requestsPerSecond} req/s of model time, at most ${result.concurrency} in flight.`,
  );
  lines.push("");
  lines.push(
    table([
      ["", ...ps.map((p) => p.policy)],
      row("cache hit rate (nodes' cached_tokens)", (p) => pct(p.hitRate)),
      row("prefill tokens computed", (p) => int(p.prefillTokens)),
      row("prompt tokens", (p) => int(p.promptTokens)),
      row("TTFT p50 (ms)", (p) => p.ttftP50Ms.toFixed(0)),
      row("TTFT p99 (ms)", (p) => p.ttftP99Ms.toFixed(0)),
      row("TTFT mean (ms)", (p) => p.ttftMeanMs.toFixed(0)),
      row("requests per node min / max", nodeMinMax),
      row("requests per node max / mean (worst region)", (p) => p.requestSpread.toFixed(2)),
      row("prefill tokens per node max / mean (worst region)", (p) => p.prefillSpread.toFixed(2)),
      row("index agreed with the nodes' caches", (p) => pct(p.indexAgreement)),
      row("index corrections / silent restarts found", (p) => `${p.indexCorrections} / ${p.silentRestarts}`),
      row("429s waited out (Retry-After), then sent again", (p) => String(p.retriedAfter429)),
      row("errors", (p) => String(p.errors)),
      row("wall time (s)", (p) => p.wallSeconds.toFixed(1)),
      row(`decode time / simulated (median; <= ${MAX_DECODE_STRETCH}x)`, stretch),
    ]),
  );
  lines.push("");
  const decisionNames = [...new Set(ps.flatMap((p) => Object.keys(p.decisions)))].sort();
  lines.push(table([["decisions", ...ps.map((p) => p.policy)], ...decisionNames.map((d) => row(d, (p) => String(p.decisions[d] ?? 0)))]));
  lines.push("");
  const nodeIds = ps[0]?.nodes.map((n) => `${n.region}/${n.node}`) ?? [];
  lines.push(
    table([
      ["per node: requests, hit rate, prefill tokens", ...ps.map((p) => p.policy)],
      ...nodeIds.map((id) =>
        row(id, (p) => {
          const n = p.nodes.find((x) => `${x.region}/${x.node}` === id);
          return n ? `${n.routed} req  ${pct(n.hitRate)}  ${int(n.prefillTokens)}` : "-";
        }),
      ),
    ]),
  );
  for (const p of ps) {
    if (p.errorSamples.length) lines.push("", `${p.policy} errors:`, ...p.errorSamples.map((e) => `  ${e}`));
    const failed = p.nodes.flatMap((n) => Object.entries(n.failures).map(([reason, count]) => `${n.region}/${n.node} ${reason} ${count}`));
    if (failed.length)
      lines.push("", `${p.policy}: nodes that failed before the first byte (the router tried another): ${failed.join(", ")}`);
  }
  return lines.join("\n");
}

/** The --json output: the whole result, each policy's per-request results only if `withRequests`. */
export function formatJson(result: DemoResult, withRequests: boolean): string {
  const policies = result.policies.map((p) => (withRequests ? p : { ...p, results: undefined }));
  return JSON.stringify({ ...result, policies }, null, 2);
}
