/**
 * The statistics of one policy's run: token-weighted hit rate, TTFT percentiles, per-node load
 * spread, decision counts, and the cross-checks that make a run trustworthy (the router's record
 * of usage against the client's, every answer's x-warmpath-policy). Pure: no I/O.
 */
import { percentile } from "../../src/core/stats.ts";
import type { AdminState } from "./admin-state.ts";
import type { HarnessStretch } from "./harness.ts";
import type { RequestResult } from "./send-request.ts";

/** A node's figures from the router's /admin/state (measured = the nodes' own usage). */
export interface NodeSummary {
  region: string;
  node: string;
  routed: number;
  measuredRequests: number;
  promptTokens: number;
  cachedTokens: number;
  /** promptTokens - cachedTokens: what the node actually prefilled. */
  prefillTokens: number;
  hitRate: number;
  decisions: Record<string, number>;
  /** Failures before the first byte, by reason (timeout, connection, ...), as the router counted them; the non-zero ones. */
  failures: Record<string, number>;
}

export interface PolicyResult {
  policy: string;
  requests: number;
  ok: number;
  errors: number;
  /** 429s (the fair share's `tenant_over_share`) waited out and sent again, as the SDKs do. */
  retriedAfter429: number;
  /** Token-weighted: sum of the nodes' cached_tokens / sum of prompt_tokens, over the answers. */
  hitRate: number;
  promptTokens: number;
  cachedTokens: number;
  prefillTokens: number;
  /** Nearest-rank percentiles (src/core/stats.ts), like the benchmark's. */
  ttftP50Ms: number;
  ttftP99Ms: number;
  ttftMeanMs: number;
  /** Wall seconds from the first request to the last answer. */
  wallSeconds: number;
  decisions: Record<string, number>;
  nodes: NodeSummary[];
  /**
   * Load spread: max/mean over a region's nodes of requests routed, and of prefill tokens
   * computed, the worst region's figure. Within a region, because tenants are pinned to regions:
   * how much traffic each region gets is the workload's doing, not the policy's.
   */
  requestSpread: number;
  prefillSpread: number;
  /** The hit rate the router's /admin/state recorded (cross-check of `hitRate`). */
  adminHitRate: number;
  /**
   * How often the router's index predicted the nodes' cached share within one engine block (of the
   * answers compared), and the corrections and silent restarts it made from their usage: the index
   * against the nodes' real caches, on the running system.
   */
  indexAgreement: number;
  indexCorrections: number;
  silentRestarts: number;
  /**
   * Health of the run itself: this process's event-loop delay p99 in ms (the client and the
   * fleet share it; past ~100 ms the host is too busy for the time factor and timings are
   * inflated).
   */
  eventLoopDelayP99Ms: number;
  /** How far the harness stretched the simulated decode (harness.ts): whether the timings hold. */
  harness: HarnessStretch;
  errorSamples: string[];
  results: RequestResult[];
}

export function summarize(
  policy: string,
  results: RequestResult[],
  state: AdminState,
  wallSeconds: number,
  health: { eventLoopDelayP99Ms: number; harness: HarnessStretch },
): PolicyResult {
  const ok = results.filter((r) => r.ok);
  const promptTokens = ok.reduce((n, r) => n + r.promptTokens!, 0);
  const cachedTokens = ok.reduce((n, r) => n + r.cachedTokens!, 0);
  const ttfts = ok.map((r) => r.ttftMs!);
  const sortedTtfts = [...ttfts].sort((a, b) => a - b);
  const decisions: Record<string, number> = {};
  for (const r of results) if (r.decision) decisions[r.decision] = (decisions[r.decision] ?? 0) + 1;
  const nodes: NodeSummary[] = state.regions.flatMap((region) =>
    region.nodes.map((n) => ({
      region: region.region,
      node: n.id,
      routed: n.metrics.routed,
      measuredRequests: n.metrics.measuredRequests,
      promptTokens: n.metrics.measuredPromptTokens,
      cachedTokens: n.metrics.measuredCachedTokens,
      prefillTokens: n.metrics.measuredPromptTokens - n.metrics.measuredCachedTokens,
      hitRate: n.metrics.measuredPromptTokens ? n.metrics.measuredCachedTokens / n.metrics.measuredPromptTokens : 0,
      decisions: Object.fromEntries(Object.entries(n.metrics.decisions).filter(([, v]) => v > 0)),
      failures: Object.fromEntries(Object.entries(n.metrics.failures).filter(([, v]) => v > 0)),
    })),
  );
  const spread = (value: (n: NodeSummary) => number) => {
    let worst = 0;
    for (const region of new Set(nodes.map((n) => n.region))) {
      const values = nodes.filter((n) => n.region === region).map(value);
      const mean = values.reduce((a, b) => a + b, 0) / values.length;
      if (mean > 0) worst = Math.max(worst, Math.max(...values) / mean);
    }
    return worst;
  };
  const allMetrics = state.regions.flatMap((r) => r.nodes.map((n) => n.metrics));
  const total = (f: (m: (typeof allMetrics)[number]) => number) => allMetrics.reduce((n, m) => n + f(m), 0);
  const adminPrompt = nodes.reduce((n, x) => n + x.promptTokens, 0);
  const adminCached = nodes.reduce((n, x) => n + x.cachedTokens, 0);
  const errorSamples = [...new Set(results.filter((r) => !r.ok).map((r) => r.error ?? "unknown"))].slice(0, 5);
  // A response answered under another policy would mean the configuration did not take.
  const wrongPolicy = ok.filter((r) => r.policy !== undefined && r.policy !== policy).length;
  if (wrongPolicy > 0) errorSamples.unshift(`${wrongPolicy} answers carried x-warmpath-policy other than ${policy}`);
  return {
    policy,
    requests: results.length,
    ok: ok.length - wrongPolicy,
    errors: results.length - ok.length + wrongPolicy,
    retriedAfter429: results.reduce((n, r) => n + (r.retries ?? 0), 0),
    hitRate: promptTokens ? cachedTokens / promptTokens : 0,
    promptTokens,
    cachedTokens,
    prefillTokens: promptTokens - cachedTokens,
    ttftP50Ms: percentile(sortedTtfts, 0.5),
    ttftP99Ms: percentile(sortedTtfts, 0.99),
    ttftMeanMs: ttfts.reduce((a, b) => a + b, 0) / Math.max(1, ttfts.length),
    wallSeconds,
    decisions,
    nodes,
    requestSpread: spread((n) => n.routed),
    prefillSpread: spread((n) => n.prefillTokens),
    adminHitRate: adminPrompt ? adminCached / adminPrompt : 0,
    indexAgreement:
      total((m) => m.agreed) /
      Math.max(
        1,
        total((m) => m.compared),
      ),
    indexCorrections: total((m) => m.corrections),
    silentRestarts: total((m) => m.silentRestarts),
    ...health,
    errorSamples,
    results,
  };
}
