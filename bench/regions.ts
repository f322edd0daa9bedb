/**
 * The cross-region benchmark: `node bench/regions.ts [--quick] [--out FILE]` (npm run bench:regions).
 *
 * Three GPU regions (us-east, eu-west, ap-northeast; 4 nodes each, the trace-replay benchmark's
 * node model) and clients at three sites beside them, with round trips from a matrix of
 * great-circle distances (src/core/region-select.ts: 0.015 ms per km, plus LOCAL_ROUND_TRIP_MS).
 * The workload: long shared documents (16k-64k tokens) that start at one site (their first
 * requests come from there) and then are asked about from every site, over a background of short
 * chat requests at each site. Every request is decided by the production RegionRouter of the region
 * the edge chose; the edge chooses either the nearest region (today's rule) or, for long prompts,
 * a farther region whose digest shows it holds more of the prefix (src/core/warm-region.ts), with
 * digests refreshed every DIGEST_TTL_MS as the worker does. A client's time to first token is the
 * simulated TTFT plus its round trip to the region.
 *
 * Deterministic; writes bench/REGIONS.md.
 */
import { parseArgs } from "node:util";
import { writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_FLEET, simulate, type Dispatcher, type Fleet, type FleetConfig, type Live, type SimNode } from "./fleet.ts";
import { RouterDispatcher } from "./router-driver.ts";
import { ENGINE_BLOCK_TOKENS, engineBlocks } from "./workloads/generator.ts";
import { entityText, KIND } from "./text.ts";
import type { BenchRequest } from "./workloads/types.ts";
import { prefixKey, DEFAULT_PREFIX_SETTINGS } from "../src/core/prefix.ts";
import { canonicalText, type CanonicalMessage } from "../src/core/canonical.ts";
import { seededRandom, zipfSampler } from "../src/core/random.ts";
import { percentile } from "../src/core/stats.ts";
import { ROUND_TRIP_MS_PER_KM, distanceKm } from "../src/core/region-select.ts";
import { DIGEST_TTL_MS, warmestRegion } from "../src/core/warm-region.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: { quick: { type: "boolean", default: false }, out: { type: "string" }, speeds: { type: "string", default: "1,3" } },
  strict: true,
});
const quick = values.quick!;
const out = values.out ?? join(REPO, quick ? ".tmp" : "bench", quick ? "REGIONS.quick.md" : "REGIONS.md");
const speeds = values.speeds!.split(",").map(Number);

/** Regions and client sites (one site beside each region). */
const PLACES = [
  { name: "us-east", lat: 39.04, lon: -77.49 },
  { name: "eu-west", lat: 50.11, lon: 8.68 },
  { name: "ap-northeast", lat: 35.68, lon: 139.69 },
];
/** A client's round trip to a region in its own metro (access network, last mile), ms. */
const LOCAL_ROUND_TRIP_MS = 5;
const NODES_PER_REGION = 4;
const CHARS_PER_TOKEN = 4;

/** Round trip from client site `s` to region `r`, ms. */
function roundTrip(s: number, r: number): number {
  const a = PLACES[s]!;
  const b = PLACES[r]!;
  return LOCAL_ROUND_TRIP_MS + distanceKm(a.lat, a.lon, b.lat, b.lon) * ROUND_TRIP_MS_PER_KM;
}

interface Workload {
  requests: BenchRequest[];
  /** Per request: the client site, and the document (-1 for a short chat request). */
  site: number[];
  doc: number[];
}

/**
 * Long documents, each starting at one site and later asked about from all three, over short
 * chat traffic at every site. At x1: ~0.5 document questions and ~1.5 chat requests a second per
 * site.
 */
function workload(): Workload {
  const rnd = seededRandom(0xd0c5);
  const durationMs = (quick ? 300 : 1_200) * 1000;
  const documents = quick ? 12 : 36;
  const docTokens = Array.from({ length: documents }, () => 16_000 + Math.floor(rnd() * 48_000));
  const docSite = Array.from({ length: documents }, (_, d) => d % PLACES.length);
  // A document appears at a random time in the first half and is local to its site for 2 minutes.
  const docStart = Array.from({ length: documents }, () => rnd() * durationMs * 0.5);
  const LOCAL_PHASE_MS = 120_000;
  const docOf = zipfSampler(documents, 0.8, rnd);
  const items: Array<{ at: number; site: number; doc: number; q: number }> = [];
  let q = 0;
  const exp = (mean: number) => -Math.log(1 - rnd()) * mean;
  // Document questions: 1.5/s in all (~0.5 per site).
  for (let t = exp(667); t < durationMs; t += exp(667)) {
    const d = docOf();
    if (t < docStart[d]!) continue;
    const site = t < docStart[d]! + LOCAL_PHASE_MS ? docSite[d]! : Math.floor(rnd() * PLACES.length);
    items.push({ at: t, site, doc: d, q: q++ });
  }
  // Short chat: 4.5/s in all (~1.5 per site), 1-2k tokens, no shared document.
  for (let t = exp(222); t < durationMs; t += exp(222)) items.push({ at: t, site: Math.floor(rnd() * PLACES.length), doc: -1, q: q++ });
  items.sort((a, b) => a.at - b.at);

  const system = entityText(KIND.system, 1, 400 * CHARS_PER_TOKEN);
  const requests: BenchRequest[] = [];
  const site: number[] = [];
  const doc: number[] = [];
  for (const [id, it] of items.entries()) {
    const question = entityText(KIND.userTurn, it.q, (it.doc >= 0 ? 200 : 1_000 + (it.q % 1_000)) * CHARS_PER_TOKEN);
    const content = it.doc >= 0 ? entityText(KIND.document, it.doc, docTokens[it.doc]! * CHARS_PER_TOKEN) + "\n\n" + question : question;
    const messages: CanonicalMessage[] = [
      { role: "system", content: system },
      { role: "user", content },
    ];
    const prompt = { kind: "chat" as const, messages };
    const key = prefixKey(prompt, { model: "bench-model", namespace: "tenant-0" }, DEFAULT_PREFIX_SETTINGS);
    requests.push({
      id,
      arrival: it.at,
      sessionKey: undefined,
      hashes: key.hashes,
      promptTokens: key.promptTokens,
      trueBlocks: engineBlocks(canonicalText(prompt)),
      outputTokens: 100,
    });
    site.push(it.site);
    doc.push(it.doc);
  }
  return { requests, site, doc };
}

/** Three regions behind one edge: the edge picks a region per request, that region's router picks the node. */
class RegionsDispatcher implements Dispatcher {
  readonly name: string;
  private readonly regions: RouterDispatcher[];
  private readonly regionOfLive = new WeakMap<Live, number>();
  /** The edge's digests (checkpoint hash -> tokens) and rates, as of its last refresh. */
  private digests: Array<{ hashes: Map<string, number>; rate: number }> = [];
  private refreshedAt = -Infinity;
  /** Per request id: the region chosen. */
  readonly chosen: number[] = [];

  private readonly warm: boolean;
  private readonly w: Workload;

  constructor(warm: boolean, w: Workload) {
    this.warm = warm;
    this.w = w;
    this.name = warm ? "warm-prefix" : "nearest";
    this.regions = PLACES.map(
      (_, r) =>
        new RouterDispatcher("warmpath", { name: "warmpath" }, DEFAULT_FLEET.prefillRate, {
          nodes: (n: SimNode) => Math.floor(n.index / NODES_PER_REGION) === r,
        }),
    );
  }

  init(fleet: Fleet): void {
    for (const r of this.regions) r.init(fleet);
  }

  route(l: Live, now: number): number {
    const s = this.w.site[l.req.id]!;
    const order = PLACES.map((_, r) => r).sort((a, b) => roundTrip(s, a) - roundTrip(s, b));
    let region = order[0]!;
    if (this.warm) {
      if (now - this.refreshedAt >= DIGEST_TTL_MS) this.refresh(now);
      const choice = warmestRegion(
        order.map((r) => ({
          roundTripMs: roundTrip(s, r),
          digest: this.digests[r]!.hashes,
          prefillTokensPerSecond: this.digests[r]!.rate,
        })),
        l.req.hashes,
        l.req.promptTokens,
      );
      if (choice) region = order[choice.index]!;
    }
    this.regionOfLive.set(l, region);
    this.chosen[l.req.id] = region;
    return this.regions[region]!.route(l, now);
  }

  private refresh(now: number): void {
    this.refreshedAt = now;
    this.digests = this.regions.map((r) => {
      const d = r.regionRouter.digest();
      return { hashes: new Map(d.entries.map((e) => [e.hash, e.tokens])), rate: d.prefillTokensPerSecond };
    });
  }

  firstToken(l: Live, now: number): void {
    this.regions[this.regionOfLive.get(l)!]!.firstToken(l, now);
  }

  complete(l: Live, now: number): void {
    this.regions[this.regionOfLive.get(l)!]!.complete(l, now);
  }

  report(node: SimNode, now: number): void {
    this.regions[Math.floor(node.index / NODES_PER_REGION)]!.report(node, now);
  }
}

interface Result {
  policy: string;
  speed: number;
  docTtft: { mean: number; p50: number; p99: number };
  chatTtft: { mean: number; p50: number; p99: number };
  prefillTokens: number;
  hitRate: number;
  movedShare: number;
  /** Changes of region between consecutive requests for one document from one site, per such pair. */
  switches: number;
}

function stats(xs: number[]): { mean: number; p50: number; p99: number } {
  const sorted = [...xs].sort((a, b) => a - b);
  return { mean: xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length), p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) };
}

const w = workload();
const fleet: FleetConfig = { ...DEFAULT_FLEET, nodes: NODES_PER_REGION * PLACES.length };
const results: Result[] = [];
for (const speed of speeds) {
  for (const warm of [false, true]) {
    const d = new RegionsDispatcher(warm, w);
    const { lives } = simulate(w.requests, speed, fleet, ENGINE_BLOCK_TOKENS, d);
    const doc: number[] = [];
    const chat: number[] = [];
    let prompt = 0;
    let cached = 0;
    let moved = 0;
    let docRequests = 0;
    const last = new Map<string, number>();
    let switches = 0;
    let pairs = 0;
    for (const l of lives) {
      const s = w.site[l.req.id]!;
      const r = d.chosen[l.req.id]!;
      const ttft = l.firstToken - l.arrival + roundTrip(s, r);
      prompt += l.req.promptTokens;
      cached += l.cachedTokens;
      const docId = w.doc[l.req.id]!;
      if (docId >= 0) {
        doc.push(ttft);
        docRequests++;
        const nearest = PLACES.map((_, i) => i).sort((a, b) => roundTrip(s, a) - roundTrip(s, b))[0];
        if (r !== nearest) moved++;
        const key = `${docId}/${s}`;
        const before = last.get(key);
        if (before !== undefined) {
          pairs++;
          if (before !== r) switches++;
        }
        last.set(key, r);
      } else chat.push(ttft);
    }
    results.push({
      policy: d.name,
      speed,
      docTtft: stats(doc),
      chatTtft: stats(chat),
      prefillTokens: prompt - cached,
      hitRate: cached / prompt,
      movedShare: moved / Math.max(1, docRequests),
      switches: switches / Math.max(1, pairs),
    });
    process.stderr.write(
      `x${speed} ${d.name}: document TTFT mean ${(stats(doc).mean / 1000).toFixed(2)} s, moved ${(100 * moved) / docRequests}%\n`,
    );
  }
}

const ms = (x: number) => (x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${x.toFixed(0)} ms`);
const rtt = PLACES.map((a, s) => `| ${a.name} | ${PLACES.map((_, r) => roundTrip(s, r).toFixed(0)).join(" | ")} |`);
const lines = [
  "# Cache-aware choice across regions",
  "",
  `Generated by \`${["node bench/regions.ts", ...process.argv.slice(2)].join(" ")}\` (npm run bench:regions; do not edit by hand). Three regions of ${NODES_PER_REGION} nodes (the trace-replay benchmark's node model: ${DEFAULT_FLEET.prefillRate.toLocaleString("en-US")} prefill tokens/s each), clients at three sites beside them. ${w.requests.length.toLocaleString("en-US")} requests${quick ? " (quick slice)" : ""}: questions about long documents (16k-64k tokens, Zipf popularity) that are asked from their home site for their first two minutes and then from every site, and short chat requests (1-2k tokens) at every site. Each request is placed by the production RegionRouter of the region the edge chose. \`nearest\`: today's rule. \`warm-prefix\`: a long prompt goes first to a farther region whose digest holds more of its prefix when the saving beats the extra round trip by 2x + 50 ms (src/core/warm-region.ts), digests refreshed every ${DIGEST_TTL_MS / 1000} s. Client TTFT = simulated TTFT + the client's round trip to the region.`,
  "",
  "Round trips (ms), client site by region:",
  "",
  `| site | ${PLACES.map((p) => p.name).join(" | ")} |`,
  `|---|${PLACES.map(() => "---:").join("|")}|`,
  ...rtt,
  "",
  "| load | edge rule | document TTFT mean | p50 | p99 | chat TTFT mean | chat p99 | prefill computed (M tokens) | hit rate | documents sent past the nearest region | region switches per (document, site) step |",
  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ...results.map(
    (r) =>
      `| x${r.speed} | ${r.policy} | ${ms(r.docTtft.mean)} | ${ms(r.docTtft.p50)} | ${ms(r.docTtft.p99)} | ${ms(r.chatTtft.mean)} | ${ms(r.chatTtft.p99)} | ${(r.prefillTokens / 1e6).toFixed(1)} | ${(100 * r.hitRate).toFixed(1)}% | ${(100 * r.movedShare).toFixed(1)}% | ${r.switches.toFixed(3)} |`,
  ),
  "",
  ...speeds.map((speed) => {
    const near = results.find((r) => r.speed === speed && r.policy === "nearest")!;
    const warm = results.find((r) => r.speed === speed && r.policy === "warm-prefix")!;
    return `At x${speed}: document questions ${ms(near.docTtft.mean)} -> ${ms(warm.docTtft.mean)} mean TTFT, ${ms(near.docTtft.p99)} -> ${ms(warm.docTtft.p99)} p99, ${((1 - warm.prefillTokens / near.prefillTokens) * 100).toFixed(0)}% less prefill computed; their median ${ms(near.docTtft.p50)} -> ${ms(warm.docTtft.p50)}: a question sent to the holder pays the extra round trip every time, where the nearest region pays one cold prefill and is then local. Chat requests (never looked up) ${ms(near.chatTtft.mean)} -> ${ms(warm.chatTtft.mean)} mean.`;
  }),
  "",
  "Not done: replicating a prefix to the nearest region once its own site's demand for it is sustained (it would keep the mean's gain and give back the median's round trip).",
  "",
];
writeFileSync(out, lines.join("\n"));
process.stderr.write(`wrote ${out}\n`);
