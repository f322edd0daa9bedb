/**
 * The region's ledger (src/core/region/ledger.ts, history.ts, recent-decisions.ts): what the
 * dashboard opens with and what /metrics counts region-wide and per tenant, driven through the
 * RegionRouter as the Durable Object drives it.
 */
import { describe, expect, it } from "vitest";
import {
  DEFAULT_REGION_SETTINGS,
  HISTORY_BUCKET_MS,
  HISTORY_BUCKETS,
  RegionRouter,
  type RegionSettings,
} from "../../src/core/region/index.ts";
import { RegionHistory } from "../../src/core/region/history.ts";
import { RECENT_DECISIONS } from "../../src/core/region/recent-decisions.ts";

const T0 = 1_700_000_000_000;
const settings = (over: Partial<RegionSettings> = {}): RegionSettings => ({
  ...DEFAULT_REGION_SETTINGS,
  name: "r",
  blockTokens: 128,
  ...over,
});
const spec = (id: string) => ({ id, url: `http://${id}`, models: ["m"], kvCapacityTokens: 100_000, static: false, lastSeen: T0 });
const hashes = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}${i}`.padEnd(16, "0"));
const req = (p: string, over: object = {}) => ({ requestId: `id-${p}`, model: "m", hashes: hashes(p, 20), promptTokens: 2_560, ...over });

function placed(r: RegionRouter, p: string, now: number, over: object = {}) {
  const res = r.route(req(p, over), now);
  if (!res.ok) throw new Error(res.message);
  return res;
}

describe("region ledger", () => {
  it("keeps the last hour in buckets: requests when routed, tokens when answered, a refusal predicting nothing", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), T0);
    const first = placed(r, "p", T0);
    r.complete(first.ticket, { status: "ok", usage: { promptTokens: 2_600, cachedTokens: 0, completionTokens: 40 } }, T0 + 2_000);
    const second = placed(r, "p", T0 + 3_000);
    // Answered in the next bucket: its tokens are counted there, its routing here.
    r.complete(second.ticket, { status: "ok", usage: { promptTokens: 2_600, cachedTokens: 2_500, completionTokens: 60 } }, T0 + 12_000);
    const refused = placed(r, "other", T0 + 4_000);
    r.complete(refused.ticket, { status: "refused" }, T0 + 4_100);

    const view = r.historyView(T0 + 13_000);
    expect(view.bucketMs).toBe(HISTORY_BUCKET_MS);
    const [b1, b2] = view.buckets;
    // T0 starts a bucket: everything up to T0 + 10 s falls in the first one.
    expect(view.buckets).toHaveLength(2);
    expect(b1!.start).toBe(T0);
    const all = view.buckets.reduce(
      (s, b) => ({
        routed: s.routed + b.routed,
        prompt: s.prompt + b.promptTokens,
        predicted: s.predicted + b.predictedCachedTokens,
        cached: s.cached + b.measuredCachedTokens,
        decode: s.decode + (b.nodes.a?.decodeTokens ?? 0),
        prefill: s.prefill + (b.nodes.a?.prefillTokens ?? 0),
      }),
      { routed: 0, prompt: 0, predicted: 0, cached: 0, decode: 0, prefill: 0 },
    );
    // Three routed; only the two computed answers' prompts are predicted figures.
    expect(all).toEqual({ routed: 3, prompt: 2 * 2_560, predicted: 2_560, cached: 2_500, decode: 100, prefill: 2_600 + 100 });
    expect(b2!.start).toBeGreaterThan(b1!.start);
  });

  it("forgets what is older than an hour, whatever the ring slot holds", () => {
    const h = new RegionHistory();
    h.routed("a", T0);
    h.routed("a", T0 + HISTORY_BUCKET_MS);
    expect(h.buckets(T0 + HISTORY_BUCKET_MS)).toHaveLength(2);
    // An hour later the first slot is reused by a new bucket; the second is past the window.
    const later = T0 + HISTORY_BUCKETS * HISTORY_BUCKET_MS;
    h.routed("a", later);
    const buckets = h.buckets(later + HISTORY_BUCKET_MS);
    expect(buckets).toHaveLength(1);
    expect(buckets[0]!.routed).toBe(1);
    expect(buckets[0]!.start).toBe(later - (later % HISTORY_BUCKET_MS));
  });

  it("keeps the last decisions, newest first, with the candidates weighed and how each ended", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), T0);
    r.upsertNode(spec("b"), T0);
    const first = placed(r, "p", T0, { tenant: "acme" });
    r.firstByte(first.ticket, T0 + 80);
    r.complete(first.ticket, { status: "ok", usage: { promptTokens: 2_600, cachedTokens: 128, completionTokens: 5 } }, T0 + 300);
    const open = placed(r, "q", T0 + 400);
    const [latest, earlier] = r.historyView(T0 + 500).decisions;
    expect(latest).toMatchObject({ requestId: "id-q", node: open.nodeId, status: "in-flight", durationMs: null, tenant: null });
    expect(earlier).toMatchObject({
      requestId: "id-p",
      tenant: "acme",
      node: first.nodeId,
      decision: first.decision,
      status: "ok",
      firstByteMs: 80,
      durationMs: 300,
      measuredPromptTokens: 2_600,
      measuredCachedTokens: 128,
    });
    expect(earlier!.considered.map((c) => c.node).sort()).toEqual(["a", "b"]);

    // Each answered at once (a queue of 105 unanswered requests would meet the fair share).
    for (let i = 0; i < RECENT_DECISIONS + 5; i++) r.firstByte(placed(r, `n${i}`, T0 + 1_000 + i).ticket, T0 + 1_000 + i);
    const decisions = r.historyView(T0 + 2_000).decisions;
    expect(decisions).toHaveLength(RECENT_DECISIONS);
    expect(decisions[0]!.requestId).toBe(`id-n${RECENT_DECISIONS + 4}`);
    expect(decisions.at(-1)!.requestId).toBe("id-n5");
  });

  it("tells a stream's first token from a whole answer's first byte, from how the completion reports it", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), T0);
    const usage = { promptTokens: 2_600, cachedTokens: 0, completionTokens: 5 };
    // Streamed: the first byte is reported on its own, ahead of the end.
    const streamed = placed(r, "s", T0);
    r.firstByte(streamed.ticket, T0 + 90);
    const open = r.historyView(T0 + 100).decisions[0]!;
    expect(open).toMatchObject({ requestId: "id-s", status: "in-flight", firstByteMs: 90, firstByteKind: "stream" });
    r.complete(streamed.ticket, { status: "ok", usage }, T0 + 900);
    // Non-streamed: the first byte comes with the completion, the answer whole.
    const whole = placed(r, "w", T0 + 1_000);
    r.complete(whole.ticket, { status: "ok", usage, firstByteMsAgo: 5 }, T0 + 1_700);
    // A non-streamed refusal is a whole answer too; a failure before the first byte has none.
    const refused = placed(r, "x", T0 + 2_000);
    r.complete(refused.ticket, { status: "refused", firstByteMsAgo: 0 }, T0 + 2_040);
    const failed = placed(r, "f", T0 + 3_000);
    r.complete(failed.ticket, { status: "failed", reason: "timeout" }, T0 + 3_500);
    const byId = new Map(r.historyView(T0 + 4_000).decisions.map((d) => [d.requestId, d]));
    expect(byId.get("id-s")).toMatchObject({ status: "ok", firstByteMs: 90, firstByteKind: "stream", durationMs: 900 });
    expect(byId.get("id-w")).toMatchObject({ status: "ok", firstByteMs: 695, firstByteKind: "whole", durationMs: 700 });
    expect(byId.get("id-x")).toMatchObject({ status: "refused", firstByteMs: 40, firstByteKind: "whole" });
    expect(byId.get("id-f")).toMatchObject({ status: "failed", firstByteMs: null, firstByteKind: null });
  });

  it("lets a request in flight outlive its place among the recent decisions: its end still counts, its answer keeps its candidates", () => {
    const r = new RegionRouter(settings({ maxInflightPerNode: 1_000, maxQueueSeconds: 1e6 }));
    r.upsertNode(spec("a"), T0);
    r.upsertNode(spec("b"), T0);
    const old = placed(r, "old", T0);
    for (let i = 0; i < RECENT_DECISIONS; i++) placed(r, `n${i}`, T0 + 1 + i);
    const decisions = r.historyView(T0 + 200).decisions;
    expect(decisions.some((d) => d.requestId === "id-old")).toBe(false);
    expect(decisions.every((d) => d.considered.length === 2)).toBe(true);
    expect(old.considered.map((c) => c.node).sort()).toEqual(["a", "b"]);
    expect(r.complete(old.ticket, { status: "ok", usage: { promptTokens: 2_600, cachedTokens: 0, completionTokens: 5 } }, T0 + 300)).toBe(
      true,
    );
    const measured = r.snapshot(T0 + 300).nodes.reduce((n, node) => n + node.metrics.measuredPromptTokens, 0);
    expect(measured).toBe(2_600);
  });

  it("records a rejection with the candidates that made the region saturated", () => {
    const r = new RegionRouter(settings({ maxQueueSeconds: 1 }));
    r.upsertNode(spec("a"), T0);
    placed(r, "big", T0, { promptTokens: 50_000 });
    expect(r.route(req("next"), T0).ok).toBe(false);
    const [rejected] = r.historyView(T0).decisions;
    expect(rejected).toMatchObject({ requestId: "id-next", node: null, decision: "saturated", status: "rejected" });
    expect(rejected!.considered[0]!.node).toBe("a");
    expect(rejected!.considered[0]!.estimatedTtftMs).toBeGreaterThan(1_000);
    expect(r.snapshot(T0).rejected.saturated).toBe(1);
    expect(r.historyView(T0).buckets[0]!.rejected).toBe(1);
  });

  it("counts retries, failovers by source, cool-downs and failures by reason", () => {
    const r = new RegionRouter(settings({ failureCooldownMs: 1_000 }));
    r.upsertNode(spec("a"), T0);
    r.upsertNode(spec("b"), T0);
    const first = placed(r, "q", T0, { failoverFrom: "near" });
    expect(first.decision).toBe("failover");
    r.complete(first.ticket, { status: "failed", reason: "timeout" }, T0 + 10);
    // A retry within the failover region is still the failover's (that is why it came here).
    const retry = placed(r, "q", T0 + 10, { failoverFrom: "near", exclude: [first.nodeId] });
    expect(retry.decision).toBe("failover");
    const local = placed(r, "z", T0 + 20, { exclude: [first.nodeId] });
    expect(local.decision).toBe("retry");
    const snap = r.snapshot(T0 + 20);
    expect(snap.retries).toBe(2);
    expect(snap.failovers).toEqual({ near: 2 });
    const failedNode = snap.nodes.find((n) => n.id === first.nodeId)!.metrics;
    expect(failedNode.failures).toMatchObject({ timeout: 1, connection: 0, "http-5xx": 0 });
    expect(failedNode.cooldowns).toBe(1);
  });

  it("counts tokens per tenant, measured from the nodes and predicted net of refusals", () => {
    const r = new RegionRouter(settings());
    r.upsertNode(spec("a"), T0);
    const ok = placed(r, "p", T0, { tenant: "acme" });
    r.complete(ok.ticket, { status: "ok", usage: { promptTokens: 2_600, cachedTokens: 0, completionTokens: 7 } }, T0 + 1);
    const hit = placed(r, "p", T0 + 2, { tenant: "acme" });
    const refused = placed(r, "p", T0 + 3, { tenant: "acme" });
    r.complete(refused.ticket, { status: "refused" }, T0 + 4);
    r.complete(hit.ticket, { status: "ok", usage: { promptTokens: 2_600, cachedTokens: 2_560, completionTokens: 3 } }, T0 + 5);
    expect(r.snapshot(T0 + 5).tenants.acme).toEqual({
      requests: 3,
      promptTokens: 2 * 2_560,
      predictedCachedTokens: hit.predictedCachedTokens,
      measuredPromptTokens: 5_200,
      measuredCachedTokens: 2_560,
      completionTokens: 10,
    });
  });
});
