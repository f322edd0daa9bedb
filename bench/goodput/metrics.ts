/**
 * Goodput of one run (issue 30's definitions): the share of ALL requests, refused ones included,
 * whose first token came within its objective (Live.objectiveMs, the same formula and fleet rate
 * for every router), also weighted by prompt tokens; per class and per tenant; and why the others
 * missed (refused, by reason; or placed and late).
 */
import type { Fleet, Live } from "../fleet.ts";
import { percentile } from "../../src/core/stats.ts";

/** Counts of one group of requests (all, a class, a tenant). */
export interface GroupFigures {
  offered: number;
  /** First token within its objective. */
  good: number;
  /** Placed on a node but first token after its objective. */
  late: number;
  refused: number;
  /** Refusals by reason. */
  refusedBy: Record<string, number>;
  promptTokens: number;
  goodTokens: number;
  /** good / offered (NaN when none offered). */
  goodput: number;
  /** goodTokens / promptTokens. */
  tokenGoodput: number;
}

export interface GoodputRun {
  workload: string;
  /** Offered load, a multiple of the fleet's capacity. */
  load: number;
  /** The arrival-rate multiplier that load is. */
  speed: number;
  noise: number;
  router: string;
  /** A variant of the workload (the flood scenario), or "" for the plain one. */
  variant: string;
  all: GroupFigures;
  byClass: Record<string, GroupFigures>;
  byTenant: Record<string, GroupFigures>;
  /** Among requests placed late, the mean lateness (first token minus deadline), ms. */
  lateMeanMs: number;
  /** Among requests held before being placed, how many, and their mean hold (ms). */
  heldPlaced: number;
  heldMeanMs: number;
  /** Median TTFT of the good requests (ms). */
  goodTtftP50: number;
  /** Token-weighted prefix hit rate over placed requests. */
  hitRate: number;
  /** Fleet prefill busy time / (nodes x arrival span). */
  prefillBusy: number;
  /** Wall time of the run, ms (not in the written results: they must be deterministic). */
  wallMs: number;
  /**
   * Each request's outcome in workload order (`g` within its objective, `l` late, `r` refused),
   * when asked for: what compares two routers request by request (not in the written results).
   */
  outcomes?: string;
}

/** Each request's outcome, one character per request: `g` within objective, `l` late, `r` refused. */
export function outcomesOf(lives: readonly Live[]): string {
  let s = "";
  for (const l of lives) s += inTime(l) ? "g" : l.refused !== undefined ? "r" : "l";
  return s;
}

function emptyGroup(): GroupFigures {
  return { offered: 0, good: 0, late: 0, refused: 0, refusedBy: {}, promptTokens: 0, goodTokens: 0, goodput: NaN, tokenGoodput: NaN };
}

function finish(g: GroupFigures): GroupFigures {
  g.refusedBy = sortKeys(g.refusedBy);
  g.goodput = g.offered > 0 ? g.good / g.offered : NaN;
  g.tokenGoodput = g.promptTokens > 0 ? g.goodTokens / g.promptTokens : NaN;
  return g;
}

/** Whether a request's first token came within its objective. */
export function inTime(l: Live): boolean {
  return l.refused === undefined && Number.isFinite(l.firstToken) && l.firstToken - l.arrival <= l.objectiveMs!;
}

export function goodputOf(
  lives: readonly Live[],
  fleet: Fleet,
  meta: Pick<GoodputRun, "workload" | "load" | "speed" | "noise" | "router" | "variant" | "wallMs">,
): GoodputRun {
  const all = emptyGroup();
  const byClass: Record<string, GroupFigures> = {};
  const byTenant: Record<string, GroupFigures> = {};
  let lateSum = 0;
  let heldPlaced = 0;
  let heldSum = 0;
  let prompt = 0;
  let cached = 0;
  const goodTtfts: number[] = [];
  for (const l of lives) {
    const cls = l.req.priority ?? "standard";
    const tenant = l.req.tenant ?? "-";
    const groups = [all, (byClass[cls] ??= emptyGroup()), (byTenant[tenant] ??= emptyGroup())];
    const good = inTime(l);
    for (const g of groups) {
      g.offered++;
      g.promptTokens += l.req.promptTokens;
      if (good) {
        g.good++;
        g.goodTokens += l.req.promptTokens;
      } else if (l.refused !== undefined) {
        g.refused++;
        g.refusedBy[l.refused] = (g.refusedBy[l.refused] ?? 0) + 1;
      } else g.late++;
    }
    if (l.refused !== undefined) continue;
    prompt += l.req.promptTokens;
    cached += l.cachedTokens;
    if (good) goodTtfts.push(l.firstToken - l.arrival);
    else lateSum += l.firstToken - l.arrival - l.objectiveMs!;
    if (l.placedAt! > l.arrival) {
      heldPlaced++;
      heldSum += l.placedAt! - l.arrival;
    }
  }
  finish(all);
  for (const g of Object.values(byClass)) finish(g);
  for (const g of Object.values(byTenant)) finish(g);
  goodTtfts.sort((a, b) => a - b);
  const span = lives.length > 1 ? lives[lives.length - 1]!.arrival - lives[0]!.arrival : 1;
  const busy = fleet.nodes.reduce((a, n) => a + n.prefillBusyMs, 0);
  return {
    ...meta,
    all,
    byClass: sortKeys(byClass),
    byTenant: sortKeys(byTenant),
    lateMeanMs: all.late > 0 ? lateSum / all.late : 0,
    heldPlaced,
    heldMeanMs: heldPlaced > 0 ? heldSum / heldPlaced : 0,
    goodTtftP50: percentile(goodTtfts, 0.5),
    hitRate: prompt > 0 ? cached / prompt : 0,
    prefillBusy: busy / (fleet.nodes.length * span),
  };
}

function sortKeys<T>(o: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
