/**
 * `npm run bench:budget`: how far a tenant's budget is overshot under concurrent load, on the real
 * local system (docs/USAGE.md, "How it is enforced, and how far it can be overshot").
 *
 *   node bench/budget.ts [--quick] [--out FILE]   # default bench/BUDGET.md; --quick: one flush
 *                                                # interval, one load, into .tmp/bench-budget-quick/
 *   node bench/budget.ts --flush 4000 --clients 16 [--budget 450000] [--repeats 4] [--regions 1] --out FILE
 *                                                # cases again (each flag overrides the defaults)
 *
 * The system is scripts/system.ts with `runtime: "workerd"`: the deploy bundles, the edge and each
 * region's worker in a workerd process of its own, the budget ledger in the first region's worker
 * and reached from the other over its service binding, as deployed; the default simulated fleet
 * (three nodes in each of wrangler.toml's two development regions), TIME_FACTOR times faster than
 * real time. Its configuration is wrangler.toml's development one (scripts/demo/policy-config.ts)
 * with `usage.flush_interval_ms` = F and one tenant per run, each with its own API key and a
 * `tokens_per_day` budget: budgets are per UTC day and kept in storage, so no run inherits
 * another's spend. One system per flush interval (it is global configuration, fixed at start), the
 * runs on it one after the other.
 *
 * A run: C clients per region in closed loop, pinned to one region (`x-warmpath-region`: the whole
 * load on one region object, where concurrency alone could overshoot) or to each of two (C in
 * each: the other region's spend reaches the refusing object late), alternating non-streamed and
 * streamed chat completions (streamed ones with `stream_options.include_usage`), until each used
 * region's last REFUSALS_TO_STOP answers are all 429 `insufficient_quota` for a spent budget (a
 * refusal for what requests in flight hold is waited out, as its Retry-After says). Every answer's
 * carried usage is kept; then GET /admin/usage?tenant=... must hold exactly their sum (the
 * ledger's exactness under concurrency: the benchmark fails if it does not), and the overshoot
 * (ledger - budget) is set against the bound docs/USAGE.md states, computed from the run's own
 * measurements: per region object, one request's hold (the last admitted with nothing else in
 * flight) plus what each request in flight used beyond its hold (the prompt's misestimate); with
 * two regions, plus (spend rate outside the refusing object) x 2 x (F + one round trip) and the
 * other region's requests in flight (one hold each): another region's spend reaches the budget
 * ledger up to F + a round trip late, the ledger's totals reach this object up to F + a round trip
 * after that, and holds are local to the object that admits them.
 */
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { dirname, join, relative } from "node:path";
import { parseArgs } from "node:util";
import * as prettier from "prettier";
import type { UsageRow } from "../src/contracts/usage.ts";
import { devConfigWithPolicy, regionNames } from "../scripts/demo/policy-config.ts";
import { ROOT, startSystem, type System } from "../scripts/system.ts";
import { percentile } from "../src/core/stats.ts";
import { canonicalText } from "../src/core/canonical.ts";
import { DEFAULT_PREFIX_SETTINGS } from "../src/core/prefix.ts";
import { CORRECTION_WINDOW, MAX_PROMPT_FACTOR } from "../src/core/usage/reservations.ts";

const { values: flags } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    out: { type: "string" },
    flush: { type: "string" },
    clients: { type: "string" },
    budget: { type: "string" },
    repeats: { type: "string" },
    regions: { type: "string" },
  },
});
const list = (s: string | undefined) => s?.split(",").map((v) => Number(v.trim()));
const QUICK = flags.quick;
const OUT = flags.out ?? (QUICK ? join(ROOT, ".tmp", "bench-budget-quick", "BUDGET.md") : join(ROOT, "bench", "BUDGET.md"));

/** `usage.flush_interval_ms` of each system. */
const FLUSH_INTERVALS_MS = list(flags.flush) ?? (QUICK ? [250] : [250, 1_000, 4_000]);
/** Concurrent clients per region of each run. */
const CLIENTS = list(flags.clients) ?? (QUICK ? [4] : [1, 2, 4, 8, 16, 32, 64]);
/** Regions loaded at once: 1 (the whole load on one object) and 2 (C clients in each). */
const REGION_COUNTS = (list(flags.regions) ?? (QUICK ? [2] : [1, 2])) as Array<1 | 2>;
/**
 * The tenant's `tokens_per_day` budget by clients per region: several seconds of its spend on this
 * 2-core machine (a budget too small for the load would end a run within a flush interval or two).
 */
const BUDGET_TOKENS: Record<number, number> = flags.budget
  ? Object.fromEntries(CLIENTS.map((c) => [c, Number(flags.budget)]))
  : { 1: 20_000, 2: 30_000, 4: 60_000, 8: 100_000, 16: 150_000, 32: 200_000, 64: 250_000 };
/** Runs of each case, each with a tenant of its own: the overshoot depends on where the flushes fall. */
const REPEATS = flags.repeats ? Number(flags.repeats) : QUICK ? 1 : 2;
for (const c of CLIENTS)
  if (!(c >= 1 && Number.isInteger(c) && BUDGET_TOKENS[c]! > 0))
    throw new Error(`clients ${c}: a whole number, at least 1, with a budget (--budget)`);
for (const r of REGION_COUNTS) if (r !== 1 && r !== 2) throw new Error(`regions ${r}: 1 or 2`);
/** The fleet runs this many times faster than real time (decode 30 tokens/s x 20). */
const TIME_FACTOR = 20;
const MODEL = "llama-3.1-8b-instruct";
/** Each request's prompt: ~1,200 characters, ~300 tokens to the simulated nodes (4 characters a token). */
const PROMPT = "Summarise the account's recent activity. ".repeat(29);
const MAX_TOKENS = 32;
/** The router's estimate of a request's prompt (as the edge makes it: canonical characters / 4): with MAX_TOKENS, what each request holds. */
const estimateOf = (content: string) =>
  Math.max(
    1,
    Math.ceil(canonicalText({ kind: "chat", messages: [{ role: "user", content }] }).length / DEFAULT_PREFIX_SETTINGS.charsPerToken),
  );
/** A run ends when each region's last this-many answers are all 429 `insufficient_quota`. */
const REFUSALS_TO_STOP = 5;
/** A run that has not ended by then fails the benchmark. */
const RUN_TIMEOUT_MS = 120_000;
const REQUEST_TIMEOUT_MS = 30_000;
/** How long the ledger may take to hold the last bills (they reach the region objects just after the answers). */
const LEDGER_SETTLE_MS = 15_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

interface Answer {
  region: string;
  stream: boolean;
  /** ms since the run's start: when the request was sent, and when its answer ended. */
  sentAt: number;
  endedAt: number;
  status: number;
  /** The error's code (`insufficient_quota`), for an answer that is not 200. */
  code?: string | undefined;
  /** A 429 `insufficient_quota` for what requests in flight hold (not a spent budget): its Retry-After (s). */
  heldRetryAfter?: number | undefined;
  /** The router's estimate of its prompt; with MAX_TOKENS, what it held before the object's prompt correction. */
  estimate: number;
  /** Prompt tokens its answer carried (200 only). */
  promptTokens: number;
  /** Prompt plus completion tokens the answer carried (200 only). */
  tokens: number;
  /** A 200 answer that carried no usage (it would be billed estimated: the comparison would not hold). */
  noUsage?: boolean;
}

interface RunTenant {
  id: string;
  repeat: number;
  key: string;
  budget: number;
  /** Clients per region. */
  clients: number;
  /** Regions loaded. */
  regions: 1 | 2;
}

const tenantFor = (flushMs: number, regions: 1 | 2, clients: number, repeat: number): RunTenant => {
  const id = `bench-f${flushMs}-g${regions}-c${clients}-r${repeat}`;
  return { id, repeat, key: `wp-${id}-local-only`, budget: BUDGET_TOKENS[clients]!, clients, regions };
};

/** wrangler.toml's development configuration, flush interval F and one budgeted tenant per run. */
function benchConfig(flushMs: number, tenants: RunTenant[]): Record<string, unknown> {
  const config = devConfigWithPolicy("warmpath") as { tenants: Array<Record<string, unknown>> } & Record<string, unknown>;
  config.usage = { flush_interval_ms: flushMs };
  for (const t of tenants) config.tenants.push({ id: t.id, api_key_sha256: [sha256(t.key)], budget: { tokens_per_day: t.budget } });
  return config;
}

/** Prompt plus completion tokens of a usage object, and its prompt tokens, if it has them. */
function usageTokens(u: unknown): { tokens: number; prompt: number } | undefined {
  const usage = u as { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined;
  if (typeof usage?.prompt_tokens !== "number" || typeof usage.completion_tokens !== "number") return undefined;
  return { tokens: usage.prompt_tokens + usage.completion_tokens, prompt: usage.prompt_tokens };
}

/** One chat completion from the tenant, pinned to `region`: its status and the usage it carried. */
async function ask(system: System, tenant: RunTenant, region: string, stream: boolean, n: number, t0: number): Promise<Answer> {
  const sentAt = performance.now() - t0;
  const content = `[${tenant.id} ${region} ${n}] ${PROMPT}`;
  const estimate = estimateOf(content);
  const body = {
    model: MODEL,
    max_tokens: MAX_TOKENS,
    messages: [{ role: "user", content }],
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  };
  const done = (
    a: Omit<Answer, "region" | "stream" | "sentAt" | "endedAt" | "estimate" | "promptTokens"> & { promptTokens?: number },
  ): Answer => ({
    region,
    stream,
    estimate,
    promptTokens: 0,
    sentAt,
    endedAt: performance.now() - t0,
    ...a,
  });
  try {
    const res = await fetch(`${system.url}/v1/chat/completions`, {
      method: "POST",
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json", "x-warmpath-region": region },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status !== 200) {
      const code = /"code":"([^"]+)"/.exec(text)?.[1] ?? "unknown";
      const held = code === "insufficient_quota" && text.includes("held by its requests in flight");
      return done({ status: res.status, code, tokens: 0, heldRetryAfter: held ? Number(res.headers.get("retry-after") ?? 1) : undefined });
    }
    let tokens: { tokens: number; prompt: number } | undefined;
    if (!stream) tokens = usageTokens((JSON.parse(text) as { usage?: unknown }).usage);
    else {
      // The usage event: the last data line with a usage object (docs/API.md).
      for (const line of text.split("\n")) {
        if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
        const event = JSON.parse(line.slice(6)) as { usage?: unknown; error?: { code?: string } };
        if (event.error) return done({ status: 200, code: `stream ${event.error.code ?? "error"}`, tokens: 0, noUsage: true });
        tokens = usageTokens(event.usage) ?? tokens;
      }
    }
    return tokens === undefined
      ? done({ status: 200, tokens: 0, noUsage: true })
      : done({ status: 200, tokens: tokens.tokens, promptTokens: tokens.prompt });
  } catch (e) {
    return done({ status: 0, code: `client: ${(e as Error).message}`, tokens: 0 });
  }
}

/** What GET /admin/usage holds for a tenant today: tokens (estimated ones included) and requests. */
async function ledgerOf(system: System, tenant: string): Promise<{ tokens: number; requests: number; estimated: number }> {
  const res = await fetch(`${system.url}/admin/usage?tenant=${encodeURIComponent(tenant)}`, { headers: { accept: "application/json" } });
  if (!res.ok) throw new Error(`GET /admin/usage?tenant=${tenant} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  const rows = ((await res.json()) as { data: UsageRow[] }).data;
  const sum = (f: (r: UsageRow) => number) => rows.reduce((s, r) => s + f(r), 0);
  return {
    tokens: sum((r) => r.prompt_tokens + r.completion_tokens + r.estimated_prompt_tokens + r.estimated_completion_tokens),
    requests: sum((r) => r.requests),
    estimated: sum((r) => r.estimated_requests),
  };
}

export interface RunResult {
  flushMs: number;
  /** Regions loaded, and clients in each. */
  regions: 1 | 2;
  clients: number;
  repeat: number;
  tenant: string;
  budget: number;
  ledgerTokens: number;
  ledgerRequests: number;
  answerTokens: number;
  answered: number;
  /** 429 `insufficient_quota` for a spent budget, and for what requests in flight held. */
  refused: number;
  refusedHeld: number;
  /** Answers neither 200 nor 429 `insufficient_quota`, by code. */
  otherAnswers: Record<string, number>;
  overshoot: number;
  /** Seconds from the run's start to each loaded region's first 429 for a spent budget. */
  firstRefusalS: Record<string, number>;
  /** Requests sent after the first spent-budget refusal anywhere reached its client, and answered 200, per region. */
  admittedAfter: Record<string, number>;
  tokensAfter: number;
  /** Each loaded region's spend rate (tokens/s) in the second half of the time before the first refusal. */
  rates: Record<string, number>;
  /** The spend rate outside the refusing object (two regions: the larger of the two; one: none). */
  rateOutside: number;
  /** One round trip: the run's median 429 latency (client, edge, region worker, object and back), ms. */
  rttMs: number;
  largestAnswer: number;
  largestHold: number;
  /** The most one answer in flight at the end used beyond its hold (the prompt's misestimate left after the object's correction, less the unused max_tokens; 0 if none did). */
  largestExcess: number;
  /** The bound's terms: one request's hold per object, each client's excess, the other region's spend in the exchange's lag. */
  holdTerm: number;
  excessTerm: number;
  lagTerm: number;
  bound: number;
  /** What the bound was before requests held anything: each client's request in flight at the largest answer, instead of one hold per object. */
  oldBound: number;
  durationS: number;
  requests: number;
}

/** Each region object's prompt ratios as the bench replicates them, carried from run to run (the objects live through the system's runs). */
const ratioWindows = new Map<string, number[]>();

/** One run: the tenant's clients until every loaded region refuses, then the ledger against the answers. */
async function run(system: System, tenant: RunTenant, flushMs: number, allRegions: [string, string]): Promise<RunResult> {
  const regions = allRegions.slice(0, tenant.regions);
  const answers: Answer[] = [];
  const lastByRegion = new Map<string, Answer[]>(regions.map((r) => [r, []]));
  const spentRefusal = (a: Answer) => a.status === 429 && a.code === "insufficient_quota" && a.heldRetryAfter === undefined;
  const refusing = (r: string) => {
    const last = lastByRegion.get(r)!;
    return last.length >= REFUSALS_TO_STOP && last.every(spentRefusal);
  };
  let stop = false;
  const t0 = performance.now();
  let n = 0;
  const client = async (i: number) => {
    const region = regions[i % regions.length]!;
    // Each region gets both kinds from its first two clients on.
    let stream = Math.floor(i / regions.length) % 2 === 1;
    while (!stop) {
      if (performance.now() - t0 > RUN_TIMEOUT_MS) throw new Error(`${tenant.id}: the regions did not refuse within ${RUN_TIMEOUT_MS} ms`);
      const a = await ask(system, tenant, region, stream, n++, t0);
      stream = !stream;
      answers.push(a);
      // A refusal for what requests in flight hold says when to try again: a client waits that long.
      if (a.heldRetryAfter !== undefined) {
        await sleep(a.heldRetryAfter * 1000);
        continue;
      }
      const last = lastByRegion.get(region)!;
      last.push(a);
      if (last.length > REFUSALS_TO_STOP) last.shift();
      if (regions.every(refusing)) stop = true;
    }
  };
  await Promise.all(Array.from({ length: tenant.clients * regions.length }, (_, i) => client(i)));
  const durationS = (performance.now() - t0) / 1000;

  const ok = answers.filter((a) => a.status === 200);
  const noUsage = ok.filter((a) => a.noUsage);
  if (noUsage.length)
    throw new Error(
      `${tenant.id}: ${noUsage.length} answers carried no usage (${JSON.stringify(noUsage.slice(0, 3))}): the comparison cannot hold`,
    );
  const answerTokens = ok.reduce((s, a) => s + a.tokens, 0);

  // The ledger: read until it holds every answer's bill (they arrive just after the answers end).
  let ledger = await ledgerOf(system, tenant.id);
  const deadline = Date.now() + LEDGER_SETTLE_MS;
  while ((ledger.tokens !== answerTokens || ledger.requests !== ok.length) && Date.now() < deadline) {
    await sleep(250);
    ledger = await ledgerOf(system, tenant.id);
  }
  if (ledger.tokens !== answerTokens || ledger.requests !== ok.length || ledger.estimated !== 0)
    throw new Error(
      `${tenant.id} (flush ${flushMs} ms, ${tenant.clients} clients): the usage ledger is not exact: GET /admin/usage holds ` +
        `${ledger.tokens} tokens over ${ledger.requests} requests (${ledger.estimated} estimated), the answers carried ` +
        `${answerTokens} tokens over ${ok.length} answers (read for ${LEDGER_SETTLE_MS / 1000} s after the last answer)`,
    );

  const refusals = answers.filter(spentRefusal);
  const held = answers.filter((a) => a.heldRetryAfter !== undefined);
  const firstRefusal = Object.fromEntries(
    regions.map((r) => [r, Math.min(...refusals.filter((a) => a.region === r).map((a) => a.endedAt))]),
  );
  const firstAnywhere = Math.min(...Object.values(firstRefusal));
  const after = ok.filter((a) => a.sentAt > firstAnywhere);
  // Each region's steady spend rate: its answers in the second half of the time before the first
  // refusal (past the start-up). With two regions the rate outside the refusing object is the
  // other region's; the larger of the two is taken, whichever refused last.
  const firstSent = Math.min(...answers.map((a) => a.sentAt));
  const from = (firstSent + firstAnywhere) / 2;
  const rates = Object.fromEntries(
    regions.map((r) => {
      const tokens = ok.filter((a) => a.region === r && a.endedAt > from && a.endedAt <= firstAnywhere).reduce((s, a) => s + a.tokens, 0);
      return [r, tokens / ((firstAnywhere - from) / 1000)];
    }),
  );
  const rateOutside = regions.length > 1 ? Math.max(...Object.values(rates)) : 0;
  const rttMs = percentile(
    refusals.map((a) => a.endedAt - a.sentAt).sort((x, y) => x - y),
    0.5,
  );
  const largestAnswer = Math.max(...ok.map((a) => a.tokens));
  // Each answer's hold as its object computed it: the estimate widened by the largest prompt ratio
  // of the model's last CORRECTION_WINDOW bills settled there before it was sent
  // (src/core/usage/reservations.ts PromptCorrection), plus MAX_TOKENS.
  const holds = new Map<Answer, number>();
  for (const region of regions) {
    const settled = ok.filter((a) => a.region === region).sort((x, y) => x.endedAt - y.endedAt);
    const window = ratioWindows.get(region) ?? [];
    let next = 0;
    const timeline = [...answers.filter((a) => a.region === region)].sort((x, y) => x.sentAt - y.sentAt);
    for (const a of timeline) {
      while (next < settled.length && settled[next]!.endedAt < a.sentAt) {
        const b = settled[next++]!;
        window.push(Math.min(MAX_PROMPT_FACTOR, b.promptTokens / b.estimate));
        if (window.length > CORRECTION_WINDOW) window.shift();
      }
      const factor = Math.max(1, ...window);
      holds.set(a, a.estimate + Math.ceil(a.estimate * (factor - 1)) + MAX_TOKENS);
    }
    while (next < settled.length) {
      const b = settled[next++]!;
      window.push(Math.min(MAX_PROMPT_FACTOR, b.promptTokens / b.estimate));
      if (window.length > CORRECTION_WINDOW) window.shift();
    }
    ratioWindows.set(region, window);
  }
  const largestHold = Math.max(...answers.map((a) => holds.get(a)!));
  // The requests in flight when a region's budget ran out (its first spent-budget refusal was
  // sent), or admitted after: they are what the excess can come from.
  const ranOut = Object.fromEntries(regions.map((r) => [r, Math.min(...refusals.filter((a) => a.region === r).map((a) => a.sentAt))]));
  const atTheEnd = ok.filter((a) => a.endedAt >= ranOut[a.region]!);
  const largestExcess = Math.max(0, ...atTheEnd.map((a) => a.tokens - holds.get(a)!));
  const clients = tenant.clients * regions.length;
  // docs/USAGE.md's bound: per object one request's hold (the last one admitted with nothing else
  // of the tenant's in flight, on what was left), plus what every request in flight used beyond its
  // hold; with two regions, the other's spend over twice the exchange's lag.
  const holdTerm = regions.length * Math.max(largestHold, largestAnswer);
  const excessTerm = clients * largestExcess;
  // Holds are local to their object: the other region's requests in flight are unseen here until billed.
  const lagTerm = rateOutside * ((2 * (flushMs + rttMs)) / 1000) + (regions.length > 1 ? tenant.clients * largestHold : 0);
  const bound = holdTerm + excessTerm + lagTerm;
  const oldBound = lagTerm + clients * largestAnswer;
  const otherAnswers: Record<string, number> = {};
  for (const a of answers)
    if (a.status !== 200 && !(a.status === 429 && a.code === "insufficient_quota")) {
      const k = `${a.status} ${a.code ?? ""}`.trim();
      otherAnswers[k] = (otherAnswers[k] ?? 0) + 1;
    }
  return {
    flushMs,
    regions: tenant.regions,
    clients: tenant.clients,
    repeat: tenant.repeat,
    tenant: tenant.id,
    budget: tenant.budget,
    ledgerTokens: ledger.tokens,
    ledgerRequests: ledger.requests,
    answerTokens,
    answered: ok.length,
    refused: refusals.length,
    refusedHeld: held.length,
    otherAnswers,
    overshoot: ledger.tokens - tenant.budget,
    firstRefusalS: Object.fromEntries(regions.map((r) => [r, firstRefusal[r]! / 1000])),
    admittedAfter: Object.fromEntries(regions.map((r) => [r, after.filter((a) => a.region === r).length])),
    tokensAfter: after.reduce((s, a) => s + a.tokens, 0),
    rates,
    rateOutside,
    rttMs,
    largestAnswer,
    largestHold,
    largestExcess,
    holdTerm,
    excessTerm,
    lagTerm,
    bound,
    oldBound,
    durationS,
    requests: answers.length,
  };
}

async function main(): Promise<void> {
  const started = Date.now();
  // The command as run, but for where it wrote.
  const args = process.argv.slice(2).filter((a, i, all) => a !== "--out" && all[i - 1] !== "--out" && !a.startsWith("--out="));
  const regions = regionNames(devConfigWithPolicy("warmpath")).slice(0, 2) as [string, string];
  const results: RunResult[] = [];
  for (const flushMs of FLUSH_INTERVALS_MS) {
    const tenants = REGION_COUNTS.flatMap((g) =>
      CLIENTS.flatMap((c) => Array.from({ length: REPEATS }, (_, i) => tenantFor(flushMs, g, c, i + 1))),
    );
    ratioWindows.clear();
    const system = await startSystem({
      port: 0,
      runtime: "workerd",
      noAssets: true,
      timeFactorScale: TIME_FACTOR,
      config: benchConfig(flushMs, tenants),
    });
    try {
      for (const tenant of tenants) {
        const r = await run(system, tenant, flushMs, regions);
        results.push(r);
        console.log(JSON.stringify({ event: "budget_run", ...r }));
      }
    } finally {
      await system.stop();
    }
  }
  const meta = {
    command: ["npm run bench:budget", ...(args.length ? ["--", ...args] : [])].join(" "),
    generatedAt: new Date().toISOString(),
    seconds: Math.round((Date.now() - started) / 1000),
    machine: `${cpus().length} cores (${cpus()[0]?.model ?? "?"}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB, Node ${process.version}`,
    regions,
  };
  mkdirSync(dirname(OUT), { recursive: true });
  // Formatted as the repository's Markdown is (npm test checks it).
  const options = (await prettier.resolveConfig(OUT)) ?? {};
  writeFileSync(OUT, await prettier.format(render(meta, results), { ...options, parser: "markdown" }));
  console.log(`wrote ${relative(ROOT, OUT)} in ${meta.seconds} s`);
}

const int = (n: number) => Math.round(n).toLocaleString("en-US");
const pct = (part: number, whole: number) => `${((100 * part) / whole).toFixed(1)}%`;

function render(
  meta: { command: string; generatedAt: string; seconds: number; machine: string; regions: [string, string] },
  results: RunResult[],
): string {
  const [a, b] = meta.regions;
  const within = results.filter((r) => r.overshoot <= r.bound).length;
  const worst = results.reduce((w, r) => (r.overshoot / r.budget > w.overshoot / w.budget ? r : w), results[0]!);
  const over = results.filter((r) => r.overshoot > r.bound);
  const where = (r: RunResult) => (r.regions === 1 ? a : `${a} + ${b}`);
  const one = results.filter((r) => r.regions === 1);
  const worstOne = one.length ? one.reduce((w, r) => (r.overshoot > w.overshoot ? r : w), one[0]!) : undefined;
  return [
    "# Budget overshoot under concurrent load",
    "",
    `Generated by \`${meta.command}\` (bench/budget.ts) on ${meta.generatedAt.slice(0, 16).replace("T", " ")} UTC in ${meta.seconds} s; machine: ${meta.machine}. This file is regenerated by that command, never edited by hand.`,
    "",
    "What it measures: how far a tenant's daily token budget is overshot when concurrent clients spend it, in one region (every request on one region object) and in two at once, on the real workers, against the bound docs/USAGE.md states; and that the usage ledger holds exactly what the answers carried (the benchmark fails if it does not). Each budgeted request holds its estimated prompt plus its `max_tokens` from its admission until its bill (reserve, then settle).",
    "",
    "## Parameters",
    "",
    `- **System**: scripts/system.ts with \`runtime: "workerd"\`: the deploy bundles, the edge and each region's worker in a workerd process of its own (the budget ledger \`warmpath#spend\` in ${a}'s worker, reached from ${b}'s over its \`BUDGET_LEDGER\` binding); one system per flush interval, started afresh (its own Durable Object storage), its runs one after the other.`,
    `- **Configuration**: wrangler.toml's development configuration (regions ${a} and ${b}, prices as there), \`usage.flush_interval_ms\` = F, and one tenant per run (\`bench-f<F>-g<regions>-c<clients>-r<run>\`, its own API key) with \`budget = { tokens_per_day = B }\` (\`reserve_max_tokens\` at its default; every request sets \`max_tokens\`).`,
    `- **Fleet**: fleet/fleet.default.json (three nodes in each region), ${TIME_FACTOR}x real time (decode ${30 * TIME_FACTOR} tokens/s a request).`,
    `- **Flush intervals F**: ${FLUSH_INTERVALS_MS.join(", ")} ms. **Regions loaded**: ${REGION_COUNTS.map((g) => (g === 1 ? `one (${a})` : `two (${a}, ${b})`)).join(" and ")}. **Clients per region C**: ${CLIENTS.join(", ")}, in closed loop, pinned with \`x-warmpath-region\`. **Budgets B**: ${CLIENTS.map((c) => `${int(BUDGET_TOKENS[c]!)} tokens at C = ${c}`).join(", ")}. **Runs** of each: ${REPEATS}.`,
    `- **Requests**: \`${MODEL}\` chat completions, a ${PROMPT.length + 30}-character prompt (about ${Math.round((PROMPT.length + 30) / 4)} tokens), \`max_tokens\` ${MAX_TOKENS}; each client alternates non-streamed and streamed ones (\`stream_options.include_usage\`); a request's tokens are the prompt and completion tokens its answer carried (the whole answer's \`usage\`, or the stream's usage event). A 429 for what requests in flight hold is waited out for its Retry-After (1 s), as a client would.`,
    `- **End of a run**: when each loaded region's last ${REFUSALS_TO_STOP} answers are all 429 \`insufficient_quota\` for a spent budget (at most ${RUN_TIMEOUT_MS / 1000} s, else the benchmark fails).`,
    `- **Ledger**: GET /admin/usage?tenant=... after the run (read again for up to ${LEDGER_SETTLE_MS / 1000} s until it holds every answer's bill): its prompt plus completion tokens, estimated ones included, must equal the sum of the answers' usage, and its requests the 200 answers; else the benchmark fails.`,
    "",
    "## Results",
    "",
    "| F (ms) | regions | C | run | budget B | ledger tokens | answers' usage | ledger = answers | overshoot (tokens) | overshoot (% of B) | bound (tokens) | within bound | bound before holds |",
    "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |",
    ...results.map(
      (r) =>
        `| ${r.flushMs} | ${where(r)} | ${r.clients} | ${r.repeat} | ${int(r.budget)} | ${int(r.ledgerTokens)} | ${int(r.answerTokens)} | ${r.ledgerTokens === r.answerTokens ? "yes" : "NO"} | ${int(r.overshoot)} | ${pct(r.overshoot, r.budget)} | ${int(r.bound)} | ${r.overshoot <= r.bound ? "yes" : "NO"} | ${int(r.oldBound)} |`,
    ),
    "",
    `The ledger held exactly the answers' usage in every run. Overshoot within the bound in ${within} of ${results.length} runs${
      over.length
        ? ` (over it: ${over.map((r) => `F = ${r.flushMs} ms, ${where(r)}, C = ${r.clients}, run ${r.repeat}: ${int(r.overshoot)} against ${int(r.bound)}, ${(r.overshoot / r.bound).toFixed(2)}x`).join("; ")})`
        : ""
    }; the largest overshoot, ${int(worst.overshoot)} tokens (${pct(worst.overshoot, worst.budget)} of B), in ${where(worst)} at F = ${worst.flushMs} ms with C = ${worst.clients}.${
      worstOne
        ? ` On one region object the largest was ${int(worstOne.overshoot)} tokens (C = ${worstOne.clients}), whatever the concurrency: one request's hold is ${int(worstOne.largestHold)} tokens.`
        : ""
    }`,
    "",
    "### Each run in detail",
    "",
    `| F (ms) | regions | C | run | run (s) | requests | answered | refused: spent / held | other answers | first 429 ${a} (s) | first 429 ${b} (s) | admitted after first refusal | their tokens | spend rate ${a} / ${b} (tokens/s) | round trip (ms) | bound: one hold per object + excess + lag (tokens) |`,
    "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ...results.map(
      (r) =>
        `| ${r.flushMs} | ${where(r)} | ${r.clients} | ${r.repeat} | ${r.durationS.toFixed(1)} | ${r.requests} | ${r.answered} | ${r.refused} / ${r.refusedHeld} | ${
          Object.entries(r.otherAnswers)
            .map(([k, v]) => `${k}: ${v}`)
            .join(", ") || "none"
        } | ${r.firstRefusalS[a]?.toFixed(2) ?? "-"} | ${r.firstRefusalS[b]?.toFixed(2) ?? "-"} | ${Object.values(r.admittedAfter).reduce((s, v) => s + v, 0)} | ${int(r.tokensAfter)} | ${int(r.rates[a] ?? 0)} / ${r.rates[b] === undefined ? "-" : int(r.rates[b])} | ${r.rttMs.toFixed(1)} | ${int(r.holdTerm)} + ${int(r.excessTerm)} + ${int(r.lagTerm)} |`,
    ),
    "",
    "## How to read it",
    "",
    "- **overshoot** = the ledger's tokens less B. An object refuses once what it knows was spent reaches B, or what is spent and held by the tenant's requests in flight there leaves no room for the request's own hold.",
    "- **bound**, docs/USAGE.md's, from the run's own figures: per region object loaded, _one request's hold_ (the largest hold or answer: the last request, admitted with nothing else of the tenant's in flight there on what was left); plus _excess_, each client's request in flight at the most one answer in flight when its region's budget ran out (or admitted after) used beyond its hold (a hold is the router's prompt estimate widened by the largest prompt ratio of the model's last 32 bills in that object, plus `max_tokens`: replicated here from the answers; 0 when no such answer overran); with two regions, plus _lag_: (spend rate outside the refusing object) x 2 x (F + one round trip), the other region's report up to F + a round trip late at the budget ledger, the ledger's totals up to as late again at this object, and the other region's requests in flight (its clients, each at one hold: holds are local to the object that admits them, so this object does not see them until they are billed). The _spend rate_ of a region is the tokens its answers carried a second over the second half of the time before the first refusal (past the start-up); _one round trip_ is the run's median 429 latency (client, edge, region worker, object and back: more hops than an object's call to the budget ledger).",
    "- **bound before holds**: the bound this benchmark stated when nothing was held for requests in flight: the lag term plus every client's request in flight at the largest answer; it grew with the clients, the bound with holds does not (but for the excess term).",
    "- **refused: spent / held**: 429 `insufficient_quota` for a spent budget, and for what the tenant's requests in flight held (Retry-After 1 s).",
    "- **admitted after first refusal**: requests sent after the first spent-budget 429 anywhere reached its client, and answered 200 (in either region); _their tokens_, what those answers carried.",
    "- **first 429**: seconds from the run's first request to the region's first spent-budget refusal.",
    "- Times are on a shared machine and vary from run to run; the figures to compare are the overshoot and the bound of the same run.",
    "",
  ].join("\n");
}

await main();
process.exit(0);
