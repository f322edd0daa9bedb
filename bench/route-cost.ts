/**
 * Micro-benchmark of the region Durable Object's per-request work: RegionRouter.route (prefix
 * index walk, candidate scoring, policy, speculative insert) plus firstByte and complete, on a
 * warm index, for several fleet sizes and prompt lengths, then for indices filled to 10^4, 10^5
 * and 10^6 node-block entries over 8, 64 and 256 nodes (with the index's memory per entry), and
 * the memory a request in flight holds (its ticket), and the cost by how many tenants are active. A
 * Durable Object is single-threaded and serves roughly 500-1,000 requests/s in production, so
 * this cost (plus RPC overhead) is the region's ceiling. Writes bench/ROUTE_COST.md.
 *
 *   node --expose-gc bench/route-cost.ts [--requests N] [--index-sizes 10000,...] [--index-nodes 8,...] [--out FILE]
 */
import { parseArgs } from "node:util";
import { writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_REGION_SETTINGS, RegionRouter } from "../src/core/region/index.ts";
import { DEFAULT_PREFIX_SETTINGS, hashCanonicalText } from "../src/core/prefix.ts";
import { hashToHex } from "../src/core/hash.ts";
import { DEFAULT_MAX_INDEX_ENTRIES, indexMemoryBound, PrefixIndex } from "../src/core/prefix-index.ts";
import { entityText, KIND } from "./text.ts";
import { percentile } from "../src/core/stats.ts";
import { GROWTH_MIN_HISTORY_MS } from "../src/core/region/tenant-growth.ts";
import { ACTIVE_WINDOW_MS, MAX_TRACKED_TENANTS } from "../src/core/region/fair-share.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "20000" },
    "index-sizes": { type: "string", default: "10000,100000,1000000" },
    "index-nodes": { type: "string", default: "8,64,256" },
    tenants: { type: "string", default: "1,10,100,1000" },
    out: { type: "string", default: join(REPO, "bench", "ROUTE_COST.md") },
  },
});
const requests = Number(values.requests);
const indexSizes = values["index-sizes"]!.split(",").filter(Boolean).map(Number);
const indexNodes = values["index-nodes"]!.split(",").filter(Boolean).map(Number);
const tenantCounts = values.tenants!.split(",").filter(Boolean).map(Number);
const blockTokens = DEFAULT_PREFIX_SETTINGS.blockChars / DEFAULT_PREFIX_SETTINGS.charsPerToken;
/** Requests kept in flight: each completes (first byte, then done) when this many newer ones have arrived. */
const IN_FLIGHT = 64;
/** Simulated ms between requests in the by-tenants rows: 1,000 tenants each send every 5 s, all active (10 s windows). */
const TENANT_STEP_MS = 5;
/**
 * In the by-tenants rows a request's first byte comes this many requests (40 ms) after it, so
 * that the nodes' queues stay within the admission's objective and requests are placed, as in a
 * region below saturation (the other rows route without admission, and give first bytes late).
 */
const FIRST_BYTE_AFTER = 8;
/** Blocks per filler prompt (the index-size rows fill the index with these before timing). */
const FILL_BLOCKS = 100;

const gc = (globalThis as { gc?: () => void }).gc;
/** Live JS heap plus ArrayBuffers (the index's typed arrays live there), after a full collection; undefined without --expose-gc. */
function liveBytes(): number | undefined {
  if (!gc) return undefined;
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/** Prompts sharing one of 20 system prompts, each with its own tail: realistic partial matches. */
function prompts(chars: number, count: number): { hashes: string[]; promptTokens: number }[] {
  const out = [];
  for (let i = 0; i < count; i++) {
    const text = entityText(KIND.system, i % 20, Math.floor(chars / 2)) + entityText(KIND.userTurn, i, chars - Math.floor(chars / 2));
    const key = hashCanonicalText(text, "bench", DEFAULT_PREFIX_SETTINGS);
    out.push({ hashes: key.hashes, promptTokens: key.promptTokens });
  }
  return out;
}

/**
 * Routes distinct prompts of {@link FILL_BLOCKS} blocks that share nothing (each completed at
 * once) until the index holds `target` entries (or stops growing). Returns the entries.
 */
function fill(router: RegionRouter, target: number, now: number): number {
  let entries = 0;
  for (let i = 0; ;) {
    for (const end = i + 1_000; i < end; i++) {
      const hashes = Array.from({ length: FILL_BLOCKS }, (_, b) => hashToHex({ hi: 0x8000_0000 | (i >>> 8), lo: ((i & 0xff) << 24) | b }));
      const r = router.route({ requestId: `fill-${i}`, model: "m", hashes, promptTokens: FILL_BLOCKS * blockTokens }, now);
      if (!r.ok) continue;
      router.firstByte(r.ticket, now);
      router.complete(r.ticket, { status: "ok" }, now);
    }
    const next = router.snapshot(now).index.entries;
    if (next >= target * 0.99 || next <= entries) return next;
    entries = next;
  }
}

interface Measured {
  median: number;
  p99: number;
  perSecond: number;
  entries: number;
  blocks: number;
  /** The share of the timed requests placed on a node (with tenants: the rest were queued past the run or shed). */
  placed: number;
  /** Index memory per entry (the index-size rows): live-byte delta across the fill over the entries. */
  bytesPerEntry?: number | undefined;
}

/** A region's router with `nodes` nodes of `kvCapacityTokens` each, never saturated, its index cap raised to `indexEntries`. */
function benchRouter(nodes: number, kvCapacityTokens: number, indexEntries = 0): RegionRouter {
  const router = new RegionRouter({
    ...DEFAULT_REGION_SETTINGS,
    name: "bench",
    blockTokens,
    maxInflightPerNode: Infinity,
    maxQueueSeconds: Infinity,
    maxIndexEntries: Math.max(DEFAULT_MAX_INDEX_ENTRIES, indexEntries),
  });
  for (let n = 0; n < nodes; n++) {
    router.configureNode({ id: `node-${n}`, url: `http://n${n}`, models: ["m"], kvCapacityTokens, static: true, lastSeen: 0 }, 0);
  }
  return router;
}

/**
 * Times `requests` routes (after a warm-up) of prompts of `chars` characters over `nodes` nodes.
 * With `indexEntries`, the nodes' KV capacities add up to that many blocks, the index's cap is
 * raised to it when it is above the default, and the index is filled to it before the warm-up.
 */
function measure(nodes: number, chars: number, requests: number, poolSize: number, indexEntries?: number, tenants = 0): Measured {
  const router = benchRouter(nodes, indexEntries === undefined ? 500_000 : Math.ceil(indexEntries / nodes) * blockTokens, indexEntries);
  const pool = prompts(chars, poolSize);
  let bytesPerEntry: number | undefined;
  if (indexEntries !== undefined) {
    const before = liveBytes();
    const filled = fill(router, indexEntries, 0);
    const after = liveBytes();
    bytesPerEntry = before === undefined || after === undefined ? undefined : (after - before) / filled;
  }
  const times: number[] = [];
  const inflight: string[] = [];
  /** With tenants: requests placed and not yet at their first byte, which comes FIRST_BYTE_AFTER requests later. */
  const prefilling: string[] = [];
  let placed = 0;
  let now = 0;
  // With tenants, warmed past the history the growth rule needs (tenant-growth.ts), so that every timed request is judged by it.
  const step = tenants > 0 ? TENANT_STEP_MS : 2;
  const warmup = tenants > 0 ? Math.ceil(GROWTH_MIN_HISTORY_MS / step) : Math.min(5_000, requests / 4);
  for (let i = 0; i < warmup + requests; i++) {
    const p = pool[i % pool.length]!;
    now += step; // 500 requests/s (200 with tenants)
    const req = {
      requestId: String(i),
      model: "m",
      hashes: p.hashes,
      promptTokens: p.promptTokens,
      sessionKey: `u${i % 500}`,
      ...(tenants > 0 ? { tenant: `t${i % tenants}` } : {}),
    };
    // With tenants, the path a region object takes (admission on, its default): the region's
    // queue, each tenant's share of the demand and its growth, then the fair share and placement.
    // Timed with the queue's answers it lets out (a queued request is placed there, as the object
    // serves its queue after each event): every request's placement is in some request's time.
    const t0 = process.hrtime.bigint();
    const r = tenants > 0 ? router.admit(req, now) : router.route(req, now);
    const released = tenants > 0 ? router.drainQueue(now) : [];
    const t1 = process.hrtime.bigint();
    if (i >= warmup) times.push(Number(t1 - t0) / 1000);
    const tickets = r.ok === true ? [r.ticket] : [];
    for (const out of released) if (out.result.ok) tickets.push(out.result.ticket);
    if (i >= warmup) placed += tickets.length;
    if (tenants > 0) {
      prefilling.push(...tickets);
      while (prefilling.length > FIRST_BYTE_AFTER) {
        const first = prefilling.shift()!;
        router.firstByte(first, now);
        inflight.push(first);
      }
    } else inflight.push(...tickets);
    // Requests stay in flight for a while (here: the next IN_FLIGHT requests), so nodes carry load.
    if (inflight.length > IN_FLIGHT) {
      const done = inflight.shift()!;
      if (tenants === 0) router.firstByte(done, now);
      router.complete(done, { status: "ok" }, now);
    }
  }
  times.sort((a, b) => a - b);
  const median = percentile(times, 0.5);
  const mean = times.reduce((s, t) => s + t, 0) / times.length;
  return {
    median,
    p99: percentile(times, 0.99),
    perSecond: 1e6 / mean,
    entries: router.snapshot(now).index.entries,
    placed: placed / requests,
    blocks: pool[0]!.hashes.length,
    bytesPerEntry,
  };
}

/** Live bytes per entry of a bare PrefixIndex filled to `cap` entries of distinct blocks over 8 nodes (needs --expose-gc). */
function bytesPerEntry(cap: number): number | undefined {
  const before = liveBytes();
  if (before === undefined) return undefined;
  const index = new PrefixIndex(cap);
  for (let n = 0; n < 8; n++) index.setNode(`node-${n}`, cap);
  for (let i = 0; index.size < cap; i++) {
    const hashes = Array.from({ length: 100 }, (_, b) => (i * 100 + b).toString(16).padStart(16, "0"));
    index.insert(`node-${i % 8}`, hashes);
  }
  const bytes = (liveBytes()! - before) / index.size;
  return index.size > 0 ? bytes : undefined;
}

/** Prompt sizes whose tickets are measured. */
const TICKET_CHARS = [10_000, 100_000, 512_000, 4_000_000];
/** Requests held in flight to measure a ticket's memory. */
const TICKET_SAMPLE = 2_000;

/**
 * Live bytes per request in flight (its ticket), for one prompt of `chars` routed again and again
 * (so the index does not grow) and never completed. Each route gets its own copy of the hashes, as
 * each RPC call to the object deserializes its own (structuredClone: V8's serializer, as RPC uses).
 */
function bytesPerTicket(chars: number): { blocks: number; bytes: number } | undefined {
  const router = benchRouter(8, 500_000);
  const [p] = prompts(chars, 1);
  const ask = (i: number) => ({ requestId: `t${i}`, model: "m", hashes: structuredClone(p!.hashes), promptTokens: p!.promptTokens });
  // The first routes fill the index, the ledger's bounded rings and the JIT: not a ticket's cost.
  for (let i = 0; i < 500; i++) {
    const r = router.route(ask(i), i);
    if (r.ok) router.complete(r.ticket, { status: "ok" }, i);
  }
  const before = liveBytes();
  if (before === undefined) return undefined;
  const held: string[] = [];
  for (let i = 0; i < TICKET_SAMPLE; i++) {
    const r = router.route(ask(500 + i), 500 + i);
    if (r.ok) held.push(r.ticket);
  }
  const bytes = (liveBytes()! - before) / held.length;
  return { blocks: p!.hashes.length, bytes };
}

const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

const rows = [];
for (const nodes of [8, 32]) for (const chars of [10_000, 100_000]) rows.push({ nodes, chars, ...measure(nodes, chars, requests, 2_000) });
// Long contexts, ~128k and ~1M tokens: fewer, larger prompts (the index holds only a few such prompts per node).
for (const chars of [512_000, 4_000_000]) rows.push({ nodes: 8, chars, ...measure(8, chars, Math.max(200, requests / 20), 40) });
const sized = [];
for (const size of indexSizes) {
  for (const nodes of indexNodes) {
    const row = { size, nodes, ...measure(nodes, 10_000, requests, 2_000, size) };
    console.error(
      `index ${fmt(size)} x ${nodes} nodes: ${row.median.toFixed(1)} µs median, ${row.bytesPerEntry?.toFixed(1) ?? "?"} B/entry`,
    );
    sized.push(row);
  }
}
const byTenants = [];
for (const tenants of tenantCounts) {
  const row = { tenants, ...measure(8, 10_000, requests, 2_000, undefined, tenants) };
  console.error(`${fmt(tenants)} tenants: ${row.median.toFixed(1)} µs median`);
  byTenants.push(row);
}
const atDefault = bytesPerEntry(DEFAULT_MAX_INDEX_ENTRIES);
const tickets = TICKET_CHARS.map((chars) => ({ chars, ...bytesPerTicket(chars) }));
for (const t of tickets) console.error(`ticket, ${fmt(t.chars)} characters: ${t.bytes?.toFixed(0) ?? "?"} B (${t.blocks} blocks)`);
const md = [
  "# Region Durable Object: routing cost per request\n",
  `Generated by \`npm run bench:route\` (\`node --expose-gc bench/route-cost.ts\`) on Node ${process.version}, ${cpus()[0]?.model ?? "unknown CPU"}. Timings vary by machine (and by what else it runs); rerun to refresh.\n`,
  `Work per request: \`RegionRouter.route\` (walk the prefix index, score every node, run warmpath's policy, credit the load model, insert the prompt's blocks into the index), then \`firstByte\` and \`complete\` of an earlier request (${IN_FLIGHT} stay in flight; one request every 2 ms of simulated time): what the region Durable Object does in memory per request, without the RPC overhead. ${requests} requests after ${Math.min(5_000, requests / 4)} of warm-up (for the two long-context rows, 512,000 and 4,000,000 characters, ~128k and ~1M tokens: ${Math.max(200, requests / 20)} requests over 40 prompts); prompts share one of 20 system prompts (half their length) and have their own tail; 500,000-token KV capacity per node. Blocks grow past the first 512 (src/core/block-layout.ts), so a 1M-token prompt is ~1,500 index entries, not ~8,000.\n`,
  "| nodes | prompt characters | blocks | median µs | p99 µs | requests/s of CPU | index entries |",
  "|---:|---:|---:|---:|---:|---:|---:|",
  ...rows.map(
    (r) =>
      `| ${r.nodes} | ${r.chars.toLocaleString("en-US")} | ${r.blocks} | ${r.median.toFixed(1)} | ${r.p99.toFixed(1)} | ${fmt(r.perSecond)} | ${r.entries.toLocaleString("en-US")} |`,
  ),
  "",
  "## By index size\n",
  `The same request (10,000 characters, 20 blocks; the same prompts) on an index filled first: each node's KV capacity is its share of the size (${fmt(blockTokens)} tokens per block), and the index's cap (\`max_index_entries\`, default ${fmt(DEFAULT_MAX_INDEX_ENTRIES)}) is raised to the size when the size is above it (the 10^6 rows: \`max_index_entries = 1000000\`). The fill routes distinct ${FILL_BLOCKS}-block prompts that share nothing (the index's worst case for memory: one block per entry) until the index holds the size; then ${Math.min(5_000, requests / 4)} requests of warm-up and ${requests} timed. Bytes per entry: the live JS heap plus ArrayBuffers (the index's typed arrays) after the fill less before it, over the entries; the rest of the region object's state does not grow with the index.\n`,
  "| index entries | nodes | median µs | p99 µs | requests/s of CPU | entries after | bytes per entry | index MiB |",
  "|---:|---:|---:|---:|---:|---:|---:|---:|",
  ...sized.map(
    (r) =>
      `| ${fmt(r.size)} | ${r.nodes} | ${r.median.toFixed(1)} | ${r.p99.toFixed(1)} | ${fmt(r.perSecond)} | ${fmt(r.entries)} | ${r.bytesPerEntry === undefined ? "-" : r.bytesPerEntry.toFixed(1)} | ${r.bytesPerEntry === undefined ? "-" : mib(r.bytesPerEntry * r.entries)} |`,
  ),
  "",
  "## By active tenants\n",
  `The first table's request (8 nodes, 10,000 characters) from several tenants in turn, each of weight 1 and without a class of its own (request i is tenant i mod N), one request every ${TENANT_STEP_MS} ms of simulated time, through the path a region object takes: \`RegionRouter.admit\` with admission on (its default: the region's queue, then placement) and the queue's answers it lets out (\`drainQueue\`, timed with it), its first byte ${FIRST_BYTE_AFTER} requests later and its end ${IN_FLIGHT} after that. Every tenant is active (it sent within the last ${fmt(ACTIVE_WINDOW_MS / 1000)} s), so the region's fair share (src/core/region/fair-share.ts), its tenants' demand (tenant-demand.ts) and their growth (tenant-growth.ts) weigh each request against all of them; they keep their sums as tenants come and go (decaying-sum.ts, active-demand.ts), so that costs the same for 10 tenants or 1,000. Warmed for ${fmt(GROWTH_MIN_HISTORY_MS / 1000)} s of simulated time first (the history the growth rule needs), then ${requests} timed. The tenants a region tracks are bounded (${fmt(MAX_TRACKED_TENANTS)} each in the fair share, the demand and the growth rules; idle ones are forgotten first). _placed_: the timed requests placed on a node (none is shed here).\n`,
  "| active tenants | median µs | p99 µs | requests/s of CPU | placed |",
  "|---:|---:|---:|---:|---:|",
  ...byTenants.map(
    (r) => `| ${fmt(r.tenants)} | ${r.median.toFixed(1)} | ${r.p99.toFixed(1)} | ${fmt(r.perSecond)} | ${(100 * r.placed).toFixed(1)}% |`,
  ),
  "",
  atDefault === undefined
    ? "Index memory: run with `node --expose-gc` to measure."
    : `Index memory: ${atDefault.toFixed(1)} bytes per node-block entry for a bare index filled to the default cap of ${fmt(DEFAULT_MAX_INDEX_ENTRIES)} entries (distinct blocks over 8 nodes: ${mib(atDefault * DEFAULT_MAX_INDEX_ENTRIES)} MiB). The layout (src/core/prefix-index.ts) interns each block once as its 64-bit hash in flat typed arrays; the Map-based index before it measured ~200 bytes per entry here, so 10^6 entries would have been ~200 MB, over a Durable Object's 128 MB.`,
  "",
  `Hard bound (\`indexMemoryBound\`): the index's arrays never exceed ${mib(indexMemoryBound(DEFAULT_MAX_INDEX_ENTRIES))} MiB at the default cap and ${mib(indexMemoryBound(1_000_000))} MiB (${(indexMemoryBound(1_000_000) / 1e6).toFixed(1)} MB) at 10^6 entries, whatever the traffic: they grow by half up to the cap plus one prompt's blocks and no further, and the cap holds after every call (test/core/prefix-index.test.ts; at 10^6, bench/test/index-bound.test.ts).`,
  "",
  "## Memory per request in flight\n",
  `A request in flight holds a ticket in the region object until it completes: what it was predicted to cost, its place in the load model and the ledger, and its prompt's block hashes, joined into one string (16 bytes a block; src/core/region/tickets.ts \`Ticket.chain\`). Measured: one prompt routed ${fmt(TICKET_SAMPLE)} times over 8 nodes (after 500 to fill the index and the ledger's bounded rings) and never completed, each route with its own copy of the hashes as each RPC call deserializes its own; the live heap's growth over the requests. Tickets are bounded by \`max_inflight_per_node\` per node (default 256) and expire after \`request_timeout_ms\`.\n`,
  "| prompt characters | blocks | bytes per request in flight |",
  "|---:|---:|---:|",
  ...tickets.map((t) => `| ${fmt(t.chars)} | ${t.blocks ?? "-"} | ${t.bytes === undefined ? "-" : fmt(t.bytes)} |`),
  "",
  "Reading: a Durable Object handles roughly 500-1,000 requests/s in production, mostly bounded by RPC and scheduling; the routing work itself must stay a small fraction of the 1-2 ms that allows per request.",
  "",
];
writeFileSync(values.out!, md.join("\n"));
console.log(md.join("\n"));
