/**
 * Whether CompatCanary scored warmpath as it scored the node warmpath fronts, probe by probe.
 *
 * Two reports agree on a probe when its outcome (pass / warn / fail), its finding (CompatCanary's
 * summary with the counts in it masked) and, for a failure, the HTTP status it failed on are the
 * same. Counts are masked because they describe the endpoint, not what warmpath did to an answer:
 * warmpath lists every model its regions serve where a node lists its own ("Discovered 2 models"
 * vs "1"; the probe checks the selected model is listed), and a sampling engine's answers vary in
 * length from one request to the next. The counts and any error bodies that differ are kept as
 * notes (evidence, not outcome), so the report shows them.
 */
import type { CanaryReport, ProbeResult } from "./canary.ts";

/** A probe on which the two reports disagree, and why. */
export interface Disagreement {
  id: string;
  why: string;
}

/** The summary with its numbers masked: the finding, not the endpoint's counts. */
export const finding = (summary: string): string => summary.replace(/\d+/g, "N");

const failedOn = (r: ProbeResult): number | undefined => (r.status === "fail" ? r.error?.httpStatus : undefined);

/** Every probe on which warmpath's report differs from the node's; empty when they agree. */
export function disagreements(node: CanaryReport, warmpath: CanaryReport): Disagreement[] {
  const out: Disagreement[] = [];
  const mine = new Map(warmpath.results.map((r) => [r.id, r]));
  for (const n of node.results) {
    const w = mine.get(n.id);
    if (!w) {
      out.push({ id: n.id, why: "not run against warmpath" });
      continue;
    }
    if (w.status !== n.status) out.push({ id: n.id, why: `node ${n.status}, warmpath ${w.status}: ${w.summary}` });
    else if (finding(w.summary) !== finding(n.summary)) out.push({ id: n.id, why: `node "${n.summary}", warmpath "${w.summary}"` });
    else if (failedOn(w) !== failedOn(n))
      out.push({ id: n.id, why: `failed on HTTP ${failedOn(n)} at the node, ${failedOn(w)} at warmpath` });
  }
  for (const w of warmpath.results) if (!node.results.some((n) => n.id === w.id)) out.push({ id: w.id, why: "not run against the node" });
  return out;
}

/** Where the two reports' evidence differs though the outcome is the same: counts, error bodies. */
export function evidenceNotes(node: CanaryReport, warmpath: CanaryReport): string[] {
  const notes: string[] = [];
  for (const n of node.results) {
    const w = warmpath.results.find((r) => r.id === n.id);
    if (!w || w.status !== n.status) continue;
    if (w.summary !== n.summary && finding(w.summary) === finding(n.summary)) {
      notes.push(`\`${n.id}\`: the node "${n.summary}", warmpath "${w.summary}"`);
    }
    const nb = n.error?.responseBody;
    const wb = w.error?.responseBody;
    if (nb !== undefined && wb !== undefined && nb !== wb) notes.push(`\`${n.id}\`: the node answered \`${nb}\`, warmpath \`${wb}\``);
  }
  return notes;
}
