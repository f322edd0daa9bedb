/**
 * `npm run demo`: the same multi-tenant workload (scripts/workload.ts) through the whole running
 * system twice, once with the sticky-session policy and once with warmpath's default policy, and
 * a side-by-side table of what the nodes measured.
 *
 * Each run boots a fresh system (scripts/system.ts: `wrangler dev` + the simulated fleet, empty
 * caches) whose configuration is wrangler.toml's development WARMPATH_CONFIG with every region's
 * `policy` set to the policy under test. That configuration is the only difference between the
 * runs: the demo has no routing code of its own.
 *
 * Replay: requests are sent at their arrival times (model time divided by the time factor), open
 * loop, with at most `concurrency` in flight; a conversation's next turn also waits for the
 * previous turn's answer. Tenant t authenticates with development key t mod 2 and is pinned to
 * region floor(t / 2) mod regions (x-warmpath-region); the user is the x-session-id.
 *
 *   npm run demo [-- --quick] [-- --requests 1000] [-- --seed 1] [-- --rate 8] [-- --time-factor 5]
 *                [-- --concurrency 64] [-- --policies sticky,warmpath] [-- --fleet FILE] [-- --json [--json-requests]] [-- --verbose]
 *
 * Exits non-zero if any request failed. docs/demo.md explains the knobs and how to read the table.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { parse } from "smol-toml";
import { DEV_ADMIN_TOKEN, DEV_API_KEY, ROOT, startSystem, type System } from "./system.ts";
import { DEFAULT_WORKLOAD, generateWorkload, type Workload, type WorkloadOptions, type WorkloadRequest } from "./workload.ts";

/** The development tenants' API keys (wrangler.toml): tenant t of the workload uses key t mod 2. */
export const DEV_API_KEYS = [DEV_API_KEY, "wp-dev-key-2-local-only"] as const;

export const DEMO_POLICIES = ["sticky", "warmpath"] as const;

export interface DemoOptions {
  /** Workload knobs (scripts/workload.ts); unset ones take DEFAULT_WORKLOAD's values. */
  workload?: Partial<WorkloadOptions>;
  /** Divides every fleet duration and the arrival schedule. Default 5. */
  timeFactor?: number;
  /** Most requests in flight at once. Default 64. */
  concurrency?: number;
  /** Policies to compare, in order. Default sticky, then warmpath. */
  policies?: readonly string[];
  /** Fleet file. Default fleet/fleet.default.json. */
  fleetFile?: string;
  /** Progress lines (stderr in the CLI). */
  progress?: (line: string) => void;
  /** wrangler dev's output lines (the CLI's --verbose). */
  routerOutput?: (line: string) => void;
}

/** What one request measured, client side. */
export interface RequestResult {
  id: number;
  tenant: number;
  user: string;
  turn: number;
  ok: boolean;
  error?: string;
  status?: number;
  region?: string;
  node?: string;
  decision?: string;
  policy?: string;
  prefixMatch?: string;
  /** Wall ms from sending to the first content chunk. */
  ttftMs?: number;
  /** Wall ms from sending to the end of the stream. */
  latencyMs?: number;
  /** Wall ms the request waited past its scheduled arrival (previous turn or concurrency bound). */
  delayMs?: number;
  promptTokens?: number;
  cachedTokens?: number;
}

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
}

export interface PolicyResult {
  policy: string;
  requests: number;
  ok: number;
  errors: number;
  /** Token-weighted: sum of the nodes' cached_tokens / sum of prompt_tokens, over the answers. */
  hitRate: number;
  promptTokens: number;
  cachedTokens: number;
  prefillTokens: number;
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
   * Health of the run itself: wrangler dev reloads during the replay (a watched source file
   * changed: the region objects lost their state, results are not comparable), and this
   * process's event-loop delay p99 in ms (the client and the fleet share it; past ~100 ms the
   * host is too busy for the time factor and timings are inflated).
   */
  routerReloads: number;
  eventLoopDelayP99Ms: number;
  errorSamples: string[];
  results: RequestResult[];
}

export interface DemoResult {
  timeFactor: number;
  concurrency: number;
  workload: WorkloadOptions;
  conversations: number;
  promptTokensOffered: number;
  policies: PolicyResult[];
}

/** wrangler.toml's development configuration with every region's policy set to `policy`. */
export function devConfigWithPolicy(policy: string): Record<string, unknown> {
  const toml = parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as { vars?: { WARMPATH_CONFIG?: unknown } };
  const base = toml.vars?.WARMPATH_CONFIG;
  if (!base || typeof base !== "object") throw new Error("wrangler.toml has no [vars.WARMPATH_CONFIG]");
  const config = structuredClone(base) as { regions: Array<Record<string, unknown>> } & Record<string, unknown>;
  for (const region of config.regions) region.policy = { name: policy };
  return config;
}

/** Region names of a configuration, in order. */
function regionNames(config: Record<string, unknown>): string[] {
  return (config.regions as Array<{ name: string }>).map((r) => r.name);
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A FIFO counting semaphore. */
class Semaphore {
  private free: number;
  private readonly waiting: Array<() => void> = [];
  constructor(n: number) {
    this.free = n;
  }
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

interface Usage {
  prompt_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

/** Sends one streamed request and measures it. Never throws. */
export async function sendRequest(
  url: string,
  request: WorkloadRequest,
  headers: Record<string, string>,
): Promise<Omit<RequestResult, "id" | "tenant" | "user" | "turn" | "delayMs">> {
  const sent = performance.now();
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(request.body),
    });
    const meta = {
      status: res.status,
      region: res.headers.get("x-warmpath-region") ?? undefined,
      node: res.headers.get("x-warmpath-node") ?? undefined,
      decision: res.headers.get("x-warmpath-decision") ?? undefined,
      policy: res.headers.get("x-warmpath-policy") ?? undefined,
      prefixMatch: res.headers.get("x-warmpath-prefix-match") ?? undefined,
    };
    if (!res.ok || !res.body) {
      const text = await res.text().catch(() => "");
      return { ok: false, ...meta, error: `HTTP ${res.status}: ${text.slice(0, 200)}` };
    }
    let ttftMs: number | undefined;
    let usage: Usage | undefined;
    let done = false;
    let buffer = "";
    const decoder = new TextDecoder();
    for await (const chunk of res.body) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") {
          done = true;
          continue;
        }
        const event = JSON.parse(data) as { choices?: Array<{ delta?: { content?: string } }>; usage?: Usage | null; error?: unknown };
        if (event.error) return { ok: false, ...meta, error: `stream error: ${JSON.stringify(event.error).slice(0, 200)}` };
        if (ttftMs === undefined && event.choices?.some((c) => (c.delta?.content ?? "") !== "")) ttftMs = performance.now() - sent;
        if (event.usage) usage = event.usage;
      }
    }
    const latencyMs = performance.now() - sent;
    if (!done) return { ok: false, ...meta, ttftMs, latencyMs, error: "stream ended without [DONE]" };
    if (ttftMs === undefined) return { ok: false, ...meta, latencyMs, error: "no content chunk" };
    if (!usage || typeof usage.prompt_tokens !== "number") return { ok: false, ...meta, ttftMs, latencyMs, error: "no usage chunk" };
    return {
      ok: true,
      ...meta,
      ttftMs,
      latencyMs,
      promptTokens: usage.prompt_tokens,
      cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    };
  } catch (e) {
    return {
      ok: false,
      latencyMs: performance.now() - sent,
      error: e instanceof Error ? `${e.message} ${String(e.cause ?? "")}` : String(e),
    };
  }
}

interface AdminState {
  regions: Array<{
    region: string;
    policy: string;
    nodes: Array<{
      id: string;
      metrics: {
        routed: number;
        decisions: Record<string, number>;
        measuredRequests: number;
        measuredPromptTokens: number;
        measuredCachedTokens: number;
      };
    }>;
  }>;
}

async function adminState(url: string): Promise<AdminState> {
  const res = await fetch(`${url}/admin/state`, { headers: { authorization: `Bearer ${DEV_ADMIN_TOKEN}` } });
  if (!res.ok) throw new Error(`/admin/state: HTTP ${res.status}`);
  return (await res.json()) as AdminState;
}

/**
 * Replays the workload against a running system at `url`. `regions` maps tenants to regions
 * (tenant t goes to regions[floor(t / 2) % regions.length], with key t % 2).
 */
export async function replay(
  url: string,
  workload: Workload,
  options: { timeFactor: number; concurrency: number; regions: readonly string[]; progress?: (line: string) => void },
): Promise<RequestResult[]> {
  const { timeFactor, concurrency, regions } = options;
  const slots = new Semaphore(concurrency);
  const finished = new Map<number, Promise<void>>();
  const results: RequestResult[] = new Array(workload.requests.length);
  const start = performance.now();
  let completed = 0;
  const tasks = workload.requests.map((r) => {
    const task = (async () => {
      const due = start + r.at / timeFactor;
      await sleep(Math.max(0, due - performance.now()));
      if (r.previous !== undefined) await finished.get(r.previous);
      await slots.acquire();
      const delayMs = performance.now() - due;
      const headers: Record<string, string> = {
        authorization: `Bearer ${DEV_API_KEYS[r.tenant % DEV_API_KEYS.length]}`,
        "x-session-id": r.user,
        "x-warmpath-region": regions[Math.floor(r.tenant / DEV_API_KEYS.length) % regions.length]!,
      };
      try {
        const m = await sendRequest(url, r, headers);
        results[r.id] = { id: r.id, tenant: r.tenant, user: r.user, turn: r.turn, delayMs, ...m };
      } finally {
        slots.release();
      }
      if (++completed % 100 === 0) options.progress?.(`  ${completed}/${workload.requests.length} requests`);
    })();
    finished.set(r.id, task);
    return task;
  });
  await Promise.all(tasks);
  return results;
}

function summarize(
  policy: string,
  results: RequestResult[],
  state: AdminState,
  wallSeconds: number,
  health: { routerReloads: number; eventLoopDelayP99Ms: number },
): PolicyResult {
  const ok = results.filter((r) => r.ok);
  const promptTokens = ok.reduce((n, r) => n + r.promptTokens!, 0);
  const cachedTokens = ok.reduce((n, r) => n + r.cachedTokens!, 0);
  const ttfts = ok.map((r) => r.ttftMs!);
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
    hitRate: promptTokens ? cachedTokens / promptTokens : 0,
    promptTokens,
    cachedTokens,
    prefillTokens: promptTokens - cachedTokens,
    ttftP50Ms: percentile(ttfts, 50),
    ttftP99Ms: percentile(ttfts, 99),
    ttftMeanMs: ttfts.reduce((a, b) => a + b, 0) / Math.max(1, ttfts.length),
    wallSeconds,
    decisions,
    nodes,
    requestSpread: spread((n) => n.routed),
    prefillSpread: spread((n) => n.prefillTokens),
    adminHitRate: adminPrompt ? adminCached / adminPrompt : 0,
    ...health,
    errorSamples,
    results,
  };
}

/** The system currently up, so that an interrupted demo still tears it down. */
let current: System | undefined;

/**
 * Last resort if this process dies with a system up (an uncaught error, a closed pipe): wrangler
 * runs in its own process group, so it would outlive us. `exit` handlers must be synchronous.
 */
function killCurrentSync(): void {
  const pid = current?.router.pid;
  if (pid === undefined || current?.router.exitCode !== null) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

/** Stops the system currently up, if any (SIGINT/SIGTERM in the CLI). */
export async function stopCurrent(): Promise<void> {
  const system = current;
  current = undefined;
  await system?.stop();
}

/** Runs the workload once per policy, each on a freshly booted system. */
export async function runDemo(options: DemoOptions = {}): Promise<DemoResult> {
  const timeFactor = options.timeFactor ?? 5;
  const concurrency = options.concurrency ?? 64;
  const policies = options.policies ?? DEMO_POLICIES;
  const progress = options.progress ?? (() => {});
  const workload = generateWorkload(options.workload);
  const offered = workload.requests.reduce((n, r) => n + r.body.messages.reduce((m, x) => m + x.content.length, 0), 0) / 4;
  progress(
    `workload: ${workload.requests.length} requests, ${workload.conversations} conversations, ${workload.options.tenants} tenants, ` +
      `~${Math.round(offered / 1000)}k prompt tokens over ${(workload.requests.at(-1)!.at / 1000 / timeFactor).toFixed(1)} s (time factor ${timeFactor})`,
  );
  const out: PolicyResult[] = [];
  for (const policy of policies) {
    const config = devConfigWithPolicy(policy);
    progress(`[${policy}] booting the router and the fleet (policy = "${policy}" in every region)...`);
    let replaying = false;
    let routerReloads = 0;
    const system = await startSystem({
      port: 0,
      config,
      timeFactorScale: timeFactor,
      fleetFile: options.fleetFile,
      onRouterOutput: (line) => {
        if (replaying && /Reloading local server/i.test(line)) routerReloads++;
        options.routerOutput?.(line);
      },
    });
    current = system;
    process.on("exit", killCurrentSync);
    try {
      progress(`[${policy}] replaying...`);
      const loop = monitorEventLoopDelay({ resolution: 10 });
      loop.enable();
      replaying = true;
      const started = performance.now();
      const results = await replay(system.url, workload, { timeFactor, concurrency, regions: regionNames(config), progress });
      const wallSeconds = (performance.now() - started) / 1000;
      replaying = false;
      loop.disable();
      const health = { routerReloads, eventLoopDelayP99Ms: loop.percentile(99) / 1e6 };
      // Usage reaches the region objects after each stream ends (waitUntil): wait until all is recorded.
      const ok = results.filter((r) => r.ok).length;
      let state = await adminState(system.url);
      const deadline = Date.now() + 5000;
      const measured = (s: AdminState) => s.regions.reduce((n, r) => n + r.nodes.reduce((m, x) => m + x.metrics.measuredRequests, 0), 0);
      while (measured(state) < ok && Date.now() < deadline) {
        await sleep(100);
        state = await adminState(system.url);
      }
      const summary = summarize(policy, results, state, wallSeconds, health);
      progress(
        `[${policy}] done in ${wallSeconds.toFixed(1)} s: hit rate ${(summary.hitRate * 100).toFixed(1)}%, ${summary.errors} errors`,
      );
      out.push(summary);
    } finally {
      process.off("exit", killCurrentSync);
      // Unless an interrupt (stopCurrent) is already stopping it.
      if (current === system) {
        current = undefined;
        await system.stop();
      }
    }
  }
  return {
    timeFactor,
    concurrency,
    workload: workload.options,
    conversations: workload.conversations,
    promptTokensOffered: offered,
    policies: out,
  };
}

// ---------------------------------------------------------------------------------------------
// Output

const int = (n: number) => Math.round(n).toLocaleString("en-US");
const pct = (n: number) => `${(n * 100).toFixed(1)}%`;

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return rows.map((r) => r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("   ")).join("\n");
}

/** The side-by-side table, then per-node figures. */
export function formatResult(result: DemoResult): string {
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
    `Fleet: fleet/fleet.default.json at time factor ${result.timeFactor} (every duration / ${result.timeFactor}; TTFTs below are wall ms, ` +
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
      row("errors", (p) => String(p.errors)),
      row("wall time (s)", (p) => p.wallSeconds.toFixed(1)),
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
    if (p.routerReloads > 0) {
      lines.push(
        "",
        `WARNING (${p.policy}): wrangler dev reloaded the worker ${p.routerReloads}x during the run (a source file changed); discard this run.`,
      );
    }
    if (p.eventLoopDelayP99Ms > 100) {
      lines.push(
        "",
        `WARNING (${p.policy}): event-loop delay p99 ${p.eventLoopDelayP99Ms.toFixed(0)} ms: this machine is too busy for time factor ${result.timeFactor}; ` +
          "latencies are inflated (try --time-factor 2).",
      );
    }
  }
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------
// CLI

/** --quick: a smaller, faster run (well under a minute). */
export const QUICK_WORKLOAD: Partial<WorkloadOptions> = { requests: 400 };

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: "string" },
      seed: { type: "string" },
      "time-factor": { type: "string" },
      concurrency: { type: "string" },
      rate: { type: "string" },
      fleet: { type: "string" },
      policies: { type: "string" },
      quick: { type: "boolean", default: false },
      json: { type: "boolean", default: false },
      verbose: { type: "boolean", default: false },
      "json-requests": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(`npm run demo [-- options]

  --quick              ${QUICK_WORKLOAD.requests} requests instead of ${DEFAULT_WORKLOAD.requests} (about half a minute in all)
  --requests N         total requests (default ${DEFAULT_WORKLOAD.requests})
  --seed N             workload seed (default ${DEFAULT_WORKLOAD.seed})
  --rate R             mean arrivals per second of model time (default ${DEFAULT_WORKLOAD.requestsPerSecond})
  --time-factor F      run the fleet and the schedule F times faster than real time (default 5)
  --concurrency N      most requests in flight (default 64)
  --policies A,B       policies to compare (default sticky,warmpath)
  --fleet FILE         fleet file (default fleet/fleet.default.json)
  --json               machine-readable result on stdout (--json-requests: with every request)
  --verbose            wrangler dev's output on stderr
Other workload knobs: scripts/workload.ts (DEFAULT_WORKLOAD), docs/demo.md.`);
    return;
  }
  const num = (name: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number`);
    return n;
  };
  const workload: Partial<WorkloadOptions> = values.quick ? { ...QUICK_WORKLOAD } : {};
  const requests = num("requests", values.requests);
  const seed = num("seed", values.seed);
  const rate = num("rate", values.rate);
  if (requests !== undefined) workload.requests = Math.round(requests);
  if (seed !== undefined) workload.seed = Math.round(seed);
  if (rate !== undefined) workload.requestsPerSecond = rate;
  let interrupted = false;
  const interrupt = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\n${signal}: stopping the router and the fleet...`);
    void stopCurrent().finally(() => process.exit(130));
  };
  process.on("SIGINT", interrupt);
  process.on("SIGTERM", interrupt);
  const result = await runDemo({
    workload,
    timeFactor: num("time-factor", values["time-factor"]),
    concurrency: values.concurrency === undefined ? undefined : Math.round(num("concurrency", values.concurrency)!),
    policies: values.policies
      ?.split(",")
      .map((x) => x.trim())
      .filter(Boolean),
    fleetFile: values.fleet,
    progress: (line) => console.error(line),
    routerOutput: values.verbose ? (line) => console.error(`[router] ${line}`) : undefined,
  });
  if (values.json) {
    const policies = result.policies.map((p) => (values["json-requests"] ? p : { ...p, results: undefined }));
    console.log(JSON.stringify({ ...result, policies }, null, 2));
  } else {
    console.log("\n" + formatResult(result));
  }
  const failed = result.policies.reduce((n, p) => n + p.errors, 0);
  if (failed > 0) {
    console.error(`\n${failed} requests failed`);
    process.exitCode = 1;
  }
  if (result.policies.some((p) => p.routerReloads > 0)) {
    console.error("\nwrangler dev reloaded the worker during a run (a source file changed): the figures are not comparable");
    process.exitCode = 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main()
    .catch((e) => {
      console.error(e instanceof Error ? (e.stack ?? e.message) : e);
      process.exitCode = 1;
    })
    // Keep-alive sockets would hold the process open for a few seconds after the last request.
    .finally(() => process.exit());
}
