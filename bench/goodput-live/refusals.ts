/**
 * warmpath's refusals in a run, counted where nothing is dropped (pure).
 *
 * A refused request writes one `refusal` log line, but those lines are bounded (20 a second per
 * status and code per isolate, the rest only counted in a `refusals_suppressed` summary:
 * docs/OBSERVABILITY.md, "Refusals"), and it writes no decision line. So the bench counts them from
 * the edge's `warmpath_edge_refusals_total` (GET /metrics: every refusal once, by status, code and
 * reason; `npm start`'s edge is one isolate, so its counter is the whole run's), and checks that
 * count against its own client's: an answer with an error status and no `x-warmpath-node` header
 * is one the edge gave without a node.
 */
import type { RequestRecord } from "./client.ts";

const COUNTER = /^warmpath_edge_refusals_total\{([^}]*)\}\s+(\S+)$/;
const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g;

/** `warmpath_edge_refusals_total` in Prometheus' text format, by `<status> <code> <reason>`. */
export function edgeRefusals(prometheus: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of prometheus.split("\n")) {
    const m = COUNTER.exec(line.trim());
    if (!m) continue;
    const labels = Object.fromEntries([...m[1]!.matchAll(LABEL)].map((l) => [l[1], l[2]]));
    const key = `${labels.status} ${labels.code} ${labels.reason}`;
    out[key] = (out[key] ?? 0) + Number(m[2]);
  }
  return out;
}

/** What a counter counted between two readings, by key (a key absent before counted from 0). */
export function counted(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
}

/** The refusals as the client saw them: an error status without a node, by `<status> <code>`. */
export function clientRefusals(records: ReadonlyArray<Pick<RequestRecord, "status" | "code" | "node">>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of records) {
    if (r.status === undefined || r.status < 400 || r.node !== undefined) continue;
    const key = `${r.status} ${r.code ?? "-"}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

/** The router's refusals (by `<status> <code> <reason>`) summed by `<status> <code>`, as the client keys them. */
export function byStatusAndCode(refusals: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, n] of Object.entries(refusals)) {
    const key = k.split(" ").slice(0, 2).join(" ");
    out[key] = (out[key] ?? 0) + n;
  }
  return out;
}

/** Where the router's count and the client's differ (empty: they agree), as `<status> <code>: router N, client M`. */
export function refusalMismatches(router: Record<string, number>, client: Record<string, number>): string[] {
  const mine = byStatusAndCode(router);
  const keys = [...new Set([...Object.keys(mine), ...Object.keys(client)])].sort();
  return keys.filter((k) => (mine[k] ?? 0) !== (client[k] ?? 0)).map((k) => `${k}: router ${mine[k] ?? 0}, client ${client[k] ?? 0}`);
}
