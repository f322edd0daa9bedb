/**
 * The counters a scenario reads: the fleet's first bytes by tag (duplicated generations) and the
 * router's `warmpath_stream_continuations_total`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { System } from "../system.ts";

/**
 * First bytes the fleet's nodes sent per tag, summed over every node (up or down): `first_byte_tags`
 * counts generations started, `continued_tags` continuations of an interrupted answer, which start
 * none (fleet/first-bytes.ts). `duplicated` reads the first only: a continuation is no duplicate, a
 * request started from scratch after its first byte (on another node or the same) still is.
 */
export function tagCounts(
  states: ReadonlyArray<{ first_byte_tags: Record<string, number>; continued_tags?: Record<string, number> }>,
  record: "first_byte_tags" | "continued_tags",
): Map<string, number> {
  const counts = new Map<string, number>();
  for (const state of states) {
    for (const [tag, k] of Object.entries(state[record] ?? {})) counts.set(tag, (counts.get(tag) ?? 0) + k);
  }
  return counts;
}

/** Tags among `tags` whose generation a node started more than once. */
export function duplicatedTags(tags: readonly string[], firstBytes: ReadonlyMap<string, number>): string[] {
  return tags.filter((t) => (firstBytes.get(t) ?? 0) > 1);
}

/** The router's `warmpath_stream_continuations_total` in Prometheus' text, summed over regions, by `<reason> <outcome>`. */
export function continuationCounts(prometheus: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of prometheus.split("\n")) {
    const m = /^warmpath_stream_continuations_total\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]));
    const key = `${labels.reason} ${labels.outcome}`;
    out[key] = (out[key] ?? 0) + Number(m[2]);
  }
  return out;
}

/**
 * A counter's increase from `before` to `after`, by key. One that went down was reset (its region's
 * object, or the process holding it, started again): it counts from 0, so what it counted before
 * the reset in the scenario is not in the increase.
 */
export function increase(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v >= (before[k] ?? 0) ? v - (before[k] ?? 0) : v;
    if (d > 0) out[k] = d;
  }
  return out;
}

/** The router's continuation counters now (GET /metrics; retried while a restarted worker comes back). */
export async function routerContinuations(s: System): Promise<Record<string, number>> {
  for (let i = 0; ; i++) {
    try {
      const res = await fetch(`${s.url}/metrics`);
      if (res.ok) return continuationCounts(await res.text());
      throw new Error(`GET /metrics: ${res.status} ${await res.text()}`);
    } catch (e) {
      if (i >= 40) throw e;
      await sleep(250);
    }
  }
}
