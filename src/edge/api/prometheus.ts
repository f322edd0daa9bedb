/**
 * The regions' state in Prometheus' text exposition format (version 0.0.4), rendered from the
 * region snapshots the admin API serves. Names follow what vLLM and SGLang users know (a
 * `warmpath_` prefix, `_total` counters, `_seconds` histograms, one label set per region and
 * node); every metric is documented in docs/OBSERVABILITY.md ("Prometheus metrics").
 */
import type { RegionSnapshotAnswer as RegionSnapshot } from "../../contracts/admin.ts";
import { continuationOutcomeSchema, streamFailureSchema } from "../../contracts/routing.ts";
import { LATENCY_BUCKETS_MS, MATCHED_BLOCKS_BUCKETS } from "../../core/region/index.ts";
import { Exposition, type Labels } from "./exposition.ts";

/** Renders every region's snapshot. */
export function renderPrometheus(
  regions: readonly RegionSnapshot[],
  now: number,
  refusals: ReadonlyArray<{ status: number; code: string; reason: string; count: number }> = [],
): string {
  const e = new Exposition();
  for (const r of refusals) {
    e.add(
      "warmpath_edge_refusals_total",
      "counter",
      "Requests the edge answered without a node, each counted once, by status, code and what refused it (reason: invalid-request, authentication, permission, not-found, unknown-model, edge-rate-limit, and the regions' rate-limited, over-budget, over-share, shed, saturated, no-node, failed, region-unavailable, no-region, unknown-response): this edge isolate's since it started (every request locally; in production, Analytics Engine has every isolate's).",
      { status: String(r.status), code: r.code, reason: r.reason },
      r.count,
    );
  }
  for (const r of regions) {
    const region = { region: r.region };
    e.add("warmpath_index_entries", "gauge", "Node-block entries in the region's prefix index.", region, r.index.entries);
    e.add("warmpath_index_capacity_entries", "gauge", "Hard bound on the region's prefix index entries.", region, r.index.capacity);
    e.add(
      "warmpath_index_evictions_total",
      "counter",
      "Index entries evicted because a node's believed cache (or the index's bound) was full.",
      region,
      r.index.evictions,
    );
    e.add(
      "warmpath_retries_total",
      "counter",
      "Requests placed on another node after one failed before its first byte.",
      region,
      r.retries,
    );
    // Every other region as a source from the start (0 until a failover), so the series exists
    // before the first one: a rate() or an alert over it needs no special case.
    const sources = new Set([...regions.map((o) => o.region).filter((o) => o !== r.region), ...Object.keys(r.failovers)]);
    for (const from of sources) {
      e.add(
        "warmpath_failovers_total",
        "counter",
        "Requests taken over from a nearer region, by that region.",
        { ...region, from },
        r.failovers[from] ?? 0,
      );
    }
    // Every reason and outcome from the start (0 until a stream fails), as for failovers: the series
    // exists before the first failure, so a rate() or an alert over it needs no special case.
    // 6 reasons x 7 outcomes: 42 series a region. A key outside the contract (none is written
    // today) is still exported after them.
    const continuations = new Map<string, number>();
    for (const reason of streamFailureSchema.options) {
      for (const outcome of continuationOutcomeSchema.options) continuations.set(`${reason}:${outcome}`, 0);
    }
    for (const [key, count] of Object.entries(r.continuations ?? {})) continuations.set(key, count);
    for (const [key, count] of continuations) {
      const [reason, outcome] = key.split(":");
      e.add(
        "warmpath_stream_continuations_total",
        "counter",
        "Streams whose node failed after the first byte, by how it failed and what became of them (continued on another node, or why not).",
        { ...region, reason: reason ?? "", outcome: outcome ?? "" },
        count,
      );
    }
    e.add("warmpath_inflight_requests_region", "gauge", "Requests in flight in the region (tickets held).", region, r.inflight);
    const rejected: Record<string, number> = {
      saturated: r.rejected.saturated,
      no_node: r.rejected.noNode,
      over_share: r.rejected.overShare,
      rate_limited: r.rejected.rateLimited,
      over_budget: r.rejected.overBudget,
      shed: r.rejected.shed ?? 0,
    };
    for (const [reason, count] of Object.entries(rejected)) {
      e.add("warmpath_rejections_total", "counter", "Requests the region could not place, by reason.", { ...region, reason }, count);
    }
    if (r.goodput) admissionMetrics(e, region, r.goodput, r.queue);
    for (const [tenant, t] of Object.entries(r.tenants)) {
      const labels = { ...region, tenant };
      e.add("warmpath_tenant_requests_total", "counter", "Requests routed in the region, by tenant.", labels, t.requests);
      e.add("warmpath_tenant_prompt_tokens_total", "counter", "Prompt tokens routed (estimated), by tenant.", labels, t.promptTokens);
      e.add(
        "warmpath_tenant_predicted_cached_tokens_total",
        "counter",
        "Prompt tokens predicted cached, by tenant.",
        labels,
        t.predictedCachedTokens,
      );
      e.add(
        "warmpath_tenant_measured_prompt_tokens_total",
        "counter",
        "Prompt tokens of answers that reported cached tokens, by tenant.",
        labels,
        t.measuredPromptTokens,
      );
      e.add(
        "warmpath_tenant_measured_cached_tokens_total",
        "counter",
        "Cached prompt tokens the nodes reported, by tenant.",
        labels,
        t.measuredCachedTokens,
      );
      e.add(
        "warmpath_tenant_generation_tokens_total",
        "counter",
        "Completion tokens the nodes reported, by tenant.",
        labels,
        t.completionTokens,
      );
    }
    for (const n of r.nodes) {
      const node = { region: r.region, node: n.id };
      const m = n.metrics;
      for (const [decision, count] of Object.entries(m.decisions)) {
        e.add("warmpath_requests_total", "counter", "Requests routed to the node, by decision.", { ...node, decision }, count);
      }
      const outcomes: Record<string, number> = {
        ok: m.completed,
        refused: m.refused,
        failed: m.failed,
        stream_error: m.streamErrors,
        cancelled: m.cancelled,
      };
      for (const [outcome, count] of Object.entries(outcomes)) {
        e.add("warmpath_request_outcomes_total", "counter", "Completed requests, by how they ended.", { ...node, outcome }, count);
      }
      e.add("warmpath_prompt_tokens_total", "counter", "Prompt tokens routed (the router's estimate).", node, m.promptTokens);
      e.add(
        "warmpath_predicted_cached_tokens_total",
        "counter",
        "Prompt tokens the router predicted cached.",
        node,
        m.predictedCachedTokens,
      );
      e.add(
        "warmpath_measured_prompt_tokens_total",
        "counter",
        "Prompt tokens of answers that reported cached tokens.",
        node,
        m.measuredPromptTokens,
      );
      e.add(
        "warmpath_measured_cached_tokens_total",
        "counter",
        "Cached prompt tokens the node reported (prefill saved).",
        node,
        m.measuredCachedTokens,
      );
      e.add(
        "warmpath_prefill_tokens_computed_total",
        "counter",
        "Prompt tokens the node reported computing (measured prompt minus cached).",
        node,
        m.measuredPromptTokens - m.measuredCachedTokens,
      );
      e.add("warmpath_generation_tokens_total", "counter", "Completion tokens the node reported.", node, m.completionTokens);
      const agreement: Record<string, number> = { agreed: m.agreed, disagreed: m.compared - m.agreed };
      for (const [result, count] of Object.entries(agreement)) {
        e.add("warmpath_index_agreement_total", "counter", "Answers compared with the prediction, by result.", { ...node, result }, count);
      }
      e.add(
        "warmpath_index_corrections_total",
        "counter",
        "Evictions the node's answers showed, corrected in the index.",
        node,
        m.corrections,
      );
      e.add("warmpath_silent_restarts_total", "counter", "Cache losses found without a new boot id.", node, m.silentRestarts);
      for (const [reason, count] of Object.entries(m.failures)) {
        e.add("warmpath_node_failures_total", "counter", "Failures before the first byte, by reason.", { ...node, reason }, count);
      }
      e.add("warmpath_node_cooldowns_total", "counter", "Cool-downs started after a failure.", node, m.cooldowns);
      e.add("warmpath_node_inflight_requests", "gauge", "Requests this router has in flight on the node.", node, n.load.inflight);
      e.add("warmpath_node_prefilling_requests", "gauge", "Requests sent and not yet answered with a first byte.", node, n.load.prefilling);
      e.add(
        "warmpath_node_prefill_queue_tokens",
        "gauge",
        "Modelled uncached prefill tokens queued on the node.",
        node,
        n.load.workAheadTokens,
      );
      e.add("warmpath_node_prefill_tokens_per_second", "gauge", "The node's learned prefill rate.", node, n.load.prefillTokensPerSecond);
      e.add("warmpath_node_index_blocks", "gauge", "Base blocks the index believes the node holds.", node, n.indexBlocks);
      e.add("warmpath_node_available", "gauge", "1 if the node may take requests now.", node, n.available ? 1 : 0);
      e.add("warmpath_node_consecutive_failures", "gauge", "Failures in a row (cool-down doubles with each).", node, n.consecutiveFailures);
      for (const state of ["closed", "open", "half-open"] as const) {
        e.add(
          "warmpath_node_breaker",
          "gauge",
          "1 for the node's circuit breaker state (closed, open, half-open).",
          { ...node, state },
          n.breaker === state ? 1 : 0,
        );
      }
      if (n.load.report) {
        e.add("warmpath_node_running_requests", "gauge", "Requests running, as the node last reported.", node, n.load.report.running);
        e.add("warmpath_node_waiting_requests", "gauge", "Requests waiting, as the node last reported.", node, n.load.report.waiting);
        e.add(
          "warmpath_node_kv_cache_usage_ratio",
          "gauge",
          "KV cache usage, as the node last reported (0..1).",
          node,
          n.load.report.kvUsage,
        );
        e.add("warmpath_node_load_report_age_seconds", "gauge", "Age of the node's last load report.", node, n.load.report.ageMs / 1000);
      }
      e.histogram(
        "warmpath_time_to_first_byte_seconds",
        "Dispatch to the node's first body byte.",
        node,
        LATENCY_BUCKETS_MS,
        m.firstByteHistogram,
        m.firstByteMsSum,
        1 / 1000,
      );
      e.histogram(
        "warmpath_request_duration_seconds",
        "Dispatch to completion.",
        node,
        LATENCY_BUCKETS_MS,
        m.durationHistogram,
        m.durationMsSum,
        1 / 1000,
      );
      e.histogram(
        "warmpath_prefix_matched_blocks",
        "Believed cached prefix at dispatch, in blocks.",
        node,
        MATCHED_BLOCKS_BUCKETS,
        m.matchedBlocksHistogram,
        m.matchedBlocksSum,
      );
    }
  }
  e.add("warmpath_scrape_timestamp_seconds", "gauge", "When this page was rendered.", {}, Math.floor(now / 1000));
  return e.text();
}

/**
 * Admission (docs/ADMISSION.md): answers within their objective, late and shed by class, tenant and
 * reason, the time queued, and the queue's depth. Goodput is within / (within + late + shed).
 */
function admissionMetrics(e: Exposition, region: Labels, g: NonNullable<RegionSnapshot["goodput"]>, queue: RegionSnapshot["queue"]): void {
  const classes = Object.entries(g.classes);
  for (const [priority, c] of classes) {
    const labels = { ...region, priority };
    for (const [outcome, count] of [
      ["within", c.within],
      ["late", c.late],
    ] as const) {
      e.add(
        "warmpath_objective_answers_total",
        "counter",
        "Answers whose first byte reached the region within their time-to-first-token objective, or late, by class.",
        { ...labels, outcome },
        count,
      );
    }
    for (const [reason, count] of Object.entries(c.shed)) {
      e.add(
        "warmpath_shed_total",
        "counter",
        "Requests shed because no node could meet their objective, by class and reason.",
        { ...labels, reason },
        count,
      );
    }
    e.add("warmpath_queued_requests_total", "counter", "Requests placed after waiting in the region's queue, by class.", labels, c.queued);
    e.add(
      "warmpath_queue_wait_seconds_total",
      "counter",
      "Time those requests spent in the region's queue, by class.",
      labels,
      c.queuedMs / 1000,
    );
  }
  for (const [tenant, t] of Object.entries(g.tenants)) {
    const labels = { ...region, tenant };
    e.add(
      "warmpath_tenant_objective_answers_total",
      "counter",
      "Answers within their objective, or late, by tenant.",
      { ...labels, outcome: "within" },
      t.within,
    );
    e.add(
      "warmpath_tenant_objective_answers_total",
      "counter",
      "Answers within their objective, or late, by tenant.",
      { ...labels, outcome: "late" },
      t.late,
    );
    e.add("warmpath_tenant_shed_total", "counter", "Requests shed, by tenant.", labels, t.shed);
    for (const [reason, n] of Object.entries(t.demoted ?? {}))
      e.add(
        "warmpath_tenant_demoted_total",
        "counter",
        "Requests ranked below the class they asked for, by tenant and why: over its share of the demand, past its commitment, or past its usual rate.",
        { ...labels, reason },
        n,
      );
  }
  if (queue) {
    classes.forEach(([priority], i) => {
      e.add(
        "warmpath_queue_depth",
        "gauge",
        "Requests waiting in the region's queue, by class.",
        { ...region, priority },
        queue.depth[i] ?? 0,
      );
    });
    e.add("warmpath_queue_blocks", "gauge", "Prompt blocks held by the region's queue (its memory bound).", region, queue.blocks);
  }
}
