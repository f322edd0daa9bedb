/**
 * `npm run bench:budget`: how far a tenant's budget is overshot under concurrent load, on the real
 * local system (docs/USAGE.md, "How it is enforced, and how far it can be overshot").
 *
 *   node bench/budget.ts [--quick] [--out FILE]   # default bench/BUDGET.md; --quick: one flush
 *                                                # interval, one load, into .tmp/bench-budget-quick/
 *   node bench/budget.ts --flush 4000 --clients 16 [--budget 450000] [--repeats 4] --out FILE
 *                                                # one case again (each flag overrides the defaults)
 *
 * The system is scripts/system.ts with `runtime: "workerd"`: the deploy bundles, the edge and each
 * region's worker in a workerd process of its own, the budget ledger in the first region's worker
 * and reached from the other over its service binding, as deployed; the default simulated fleet
 * (three nodes in each of wrangler.toml's two development regions), TIME_FACTOR times faster than
 * real time. Its configuration is wrangler.toml's development one (scripts/demo/policy-config.ts)
 * with `usage.flush_interval_ms` = F and one tenant per run, each with its own API key and a
 * `tokens_per_day` budget: budgets are per UTC day and kept in storage, so no run inherits
 * another's spend. One system per flush interval (it is global configuration, fixed at start), the
 * load levels run on it one after the other.
 *
 * A run: C clients in closed loop, half pinned to each region (`x-warmpath-region`), alternating
 * non-streamed and streamed chat completions (streamed ones with `stream_options.include_usage`),
 * until each region's last REFUSALS_TO_STOP answers are all 429 `insufficient_quota`. Every
 * answer's carried usage is kept; then GET /admin/usage?tenant=... must hold exactly their sum
 * (the ledger's exactness under concurrency: the benchmark fails if it does not), and the
 * overshoot (ledger - budget) is set against the bound docs/USAGE.md states, computed from the
 * run's own measurements: (spend rate outside the refusing object) x 2 x (F + one round trip) +
 * requests in flight (every client's, each up to the largest answer seen). Twice: another region's
 * spend reaches the budget ledger up to F + a round trip late, and the ledger's totals reach this
 * object up to F + a round trip after that.
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

const { values: flags } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    out: { type: "string" },
    flush: { type: "string" },
    clients: { type: "string" },
    budget: { type: "string" },
    repeats: { type: "string" },
  },
});
const list = (s: string | undefined) => s?.split(",").map((v) => Number(v.trim()));
const QUICK = flags.quick;
const OUT = flags.out ?? (QUICK ? join(ROOT, ".tmp", "bench-budget-quick", "BUDGET.md") : join(ROOT, "bench", "BUDGET.md"));

/** `usage.flush_interval_ms` of each system. */
const FLUSH_INTERVALS_MS = list(flags.flush) ?? (QUICK ? [250] : [250, 1_000, 4_000]);
/** Concurrent clients of each run, half pinned to each region. */
const CLIENTS = list(flags.clients) ?? (QUICK ? [4] : [4, 16]);
/**
 * The tenant's `tokens_per_day` budget by load level: ~10-20 s of its spend on this 2-core machine
 * (a budget too small for the load would end a run within a flush interval or two).
 */
const BUDGET_TOKENS: Record<number, number> = flags.budget
  ? Object.fromEntries(CLIENTS.map((c) => [c, Number(flags.budget)]))
  : QUICK
    ? { 4: 60_000 }
    : { 4: 180_000, 16: 450_000 };
/** Runs of each flush interval and load, each with a tenant of its own: the overshoot depends on where the flushes fall. */
const REPEATS = flags.repeats ? Number(flags.repeats) : QUICK ? 1 : 2;
for (const c of CLIENTS)
  if (!(c >= 2 && c % 2 === 0 && BUDGET_TOKENS[c]! > 0))
    throw new Error(`clients ${c}: an even number, at least 2, with a budget (--budget)`);
/** The fleet runs this many times faster than real time (decode 30 tokens/s x 20). */
const TIME_FACTOR = 20;
const MODEL = "llama-3.1-8b-instruct";
/** Each request's prompt: ~1,200 characters, ~300 tokens to the simulated nodes (4 characters a token). */
const PROMPT = "Summarise the account's recent activity. ".repeat(29);
const MAX_TOKENS = 32;
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
  clients: number;
}

const tenantFor = (flushMs: number, clients: number, repeat: number): RunTenant => {
  const id = `bench-f${flushMs}-c${clients}-r${repeat}`;
  return { id, repeat, key: `wp-${id}-local-only`, budget: BUDGET_TOKENS[clients]!, clients };
};

/** wrangler.toml's development configuration, flush interval F and one budgeted tenant per run. */
function benchConfig(flushMs: number, tenants: RunTenant[]): Record<string, unknown> {
  const config = devConfigWithPolicy("warmpath") as { tenants: Array<Record<string, unknown>> } & Record<string, unknown>;
  config.usage = { flush_interval_ms: flushMs };
  for (const t of tenants) config.tenants.push({ id: t.id, api_key_sha256: [sha256(t.key)], budget: { tokens_per_day: t.budget } });
  return config;
}

/** Prompt plus completion tokens of a usage object, if it has them. */
function usageTokens(u: unknown): number | undefined {
  const usage = u as { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined;
  if (typeof usage?.prompt_tokens !== "number" || typeof usage.completion_tokens !== "number") return undefined;
  return usage.prompt_tokens + usage.completion_tokens;
}

/** One chat completion from the tenant, pinned to `region`: its status and the usage it carried. */
async function ask(system: System, tenant: RunTenant, region: string, stream: boolean, n: number, t0: number): Promise<Answer> {
  const sentAt = performance.now() - t0;
  const body = {
    model: MODEL,
    max_tokens: MAX_TOKENS,
    messages: [{ role: "user", content: `[${tenant.id} ${region} ${n}] ${PROMPT}` }],
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  };
  const done = (a: Omit<Answer, "region" | "stream" | "sentAt" | "endedAt">): Answer => ({
    region,
    stream,
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
      return done({ status: res.status, code, tokens: 0 });
    }
    let tokens: number | undefined;
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
    return tokens === undefined ? done({ status: 200, tokens: 0, noUsage: true }) : done({ status: 200, tokens });
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
  clients: number;
  repeat: number;
  tenant: string;
  budget: number;
  ledgerTokens: number;
  ledgerRequests: number;
  answerTokens: number;
  answered: number;
  refused: number;
  /** Answers neither 200 nor 429 `insufficient_quota`, by code. */
  otherAnswers: Record<string, number>;
  overshoot: number;
  /** Seconds from the run's start to each region's first 429 `insufficient_quota`. */
  firstRefusalS: Record<string, number>;
  /** Requests sent after the first refusal anywhere reached its client, and answered 200, per region. */
  admittedAfter: Record<string, number>;
  tokensAfter: number;
  lastRegion: string;
  /** Each region's spend rate (tokens/s) in the second half of the time before the first refusal. */
  rates: Record<string, number>;
  /** The spend rate outside the refusing object: the larger of the two regions'. */
  rateOutside: number;
  /** One round trip: the run's median 429 latency (client, edge, region worker, object and back), ms. */
  rttMs: number;
  largestAnswer: number;
  inFlightTokens: number;
  bound: number;
  durationS: number;
  requests: number;
}

/** One run: the tenant's clients until both regions refuse, then the ledger against the answers. */
async function run(system: System, tenant: RunTenant, flushMs: number, regions: [string, string]): Promise<RunResult> {
  const answers: Answer[] = [];
  const lastByRegion = new Map<string, Answer[]>(regions.map((r) => [r, []]));
  const refusing = (r: string) => {
    const last = lastByRegion.get(r)!;
    return last.length >= REFUSALS_TO_STOP && last.every((a) => a.status === 429 && a.code === "insufficient_quota");
  };
  let stop = false;
  const t0 = performance.now();
  let n = 0;
  const client = async (i: number) => {
    const region = regions[i % 2]!;
    let stream = i % 4 >= 2; // each region gets both kinds from its first two clients on
    while (!stop) {
      if (performance.now() - t0 > RUN_TIMEOUT_MS) throw new Error(`${tenant.id}: both regions did not refuse within ${RUN_TIMEOUT_MS} ms`);
      const a = await ask(system, tenant, region, stream, n++, t0);
      stream = !stream;
      answers.push(a);
      const last = lastByRegion.get(region)!;
      last.push(a);
      if (last.length > REFUSALS_TO_STOP) last.shift();
      if (refusing(regions[0]) && refusing(regions[1])) stop = true;
    }
  };
  await Promise.all(Array.from({ length: tenant.clients }, (_, i) => client(i)));
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

  const refusals = answers.filter((a) => a.status === 429 && a.code === "insufficient_quota");
  const firstRefusal = Object.fromEntries(
    regions.map((r) => [r, Math.min(...refusals.filter((a) => a.region === r).map((a) => a.endedAt))]),
  );
  const firstAnywhere = Math.min(...Object.values(firstRefusal));
  const lastRegion = firstRefusal[regions[0]]! >= firstRefusal[regions[1]]! ? regions[0] : regions[1];
  const after = ok.filter((a) => a.sentAt > firstAnywhere);
  // Each region's steady spend rate: its answers in the second half of the time before the first
  // refusal (past the start-up). The rate outside the refusing object is the other region's; the
  // larger of the two is taken, whichever refused last.
  const firstSent = Math.min(...answers.map((a) => a.sentAt));
  const from = (firstSent + firstAnywhere) / 2;
  const rates = Object.fromEntries(
    regions.map((r) => {
      const tokens = ok.filter((a) => a.region === r && a.endedAt > from && a.endedAt <= firstAnywhere).reduce((s, a) => s + a.tokens, 0);
      return [r, tokens / ((firstAnywhere - from) / 1000)];
    }),
  );
  const rateOutside = Math.max(...Object.values(rates));
  const rttMs = percentile(
    refusals.map((a) => a.endedAt - a.sentAt).sort((x, y) => x - y),
    0.5,
  );
  const largestAnswer = Math.max(...ok.map((a) => a.tokens));
  const inFlightTokens = tenant.clients * largestAnswer;
  const bound = rateOutside * ((2 * (flushMs + rttMs)) / 1000) + inFlightTokens;
  const otherAnswers: Record<string, number> = {};
  for (const a of answers)
    if (a.status !== 200 && !(a.status === 429 && a.code === "insufficient_quota")) {
      const k = `${a.status} ${a.code ?? ""}`.trim();
      otherAnswers[k] = (otherAnswers[k] ?? 0) + 1;
    }
  return {
    flushMs,
    clients: tenant.clients,
    repeat: tenant.repeat,
    tenant: tenant.id,
    budget: tenant.budget,
    ledgerTokens: ledger.tokens,
    ledgerRequests: ledger.requests,
    answerTokens,
    answered: ok.length,
    refused: refusals.length,
    otherAnswers,
    overshoot: ledger.tokens - tenant.budget,
    firstRefusalS: Object.fromEntries(regions.map((r) => [r, firstRefusal[r]! / 1000])),
    admittedAfter: Object.fromEntries(regions.map((r) => [r, after.filter((a) => a.region === r).length])),
    tokensAfter: after.reduce((s, a) => s + a.tokens, 0),
    lastRegion,
    rates,
    rateOutside,
    rttMs,
    largestAnswer,
    inFlightTokens,
    bound,
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
    const tenants = CLIENTS.flatMap((c) => Array.from({ length: REPEATS }, (_, i) => tenantFor(flushMs, c, i + 1)));
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
  return [
    "# Budget overshoot under concurrent load",
    "",
    `Generated by \`${meta.command}\` (bench/budget.ts) on ${meta.generatedAt.slice(0, 16).replace("T", " ")} UTC in ${meta.seconds} s; machine: ${meta.machine}. This file is regenerated by that command, never edited by hand.`,
    "",
    "What it measures: how far a tenant's daily token budget is overshot when concurrent clients spend it in two regions at once, on the real workers, against the bound docs/USAGE.md states; and that the usage ledger holds exactly what the answers carried (the benchmark fails if it does not).",
    "",
    "## Parameters",
    "",
    `- **System**: scripts/system.ts with \`runtime: "workerd"\`: the deploy bundles, the edge and each region's worker in a workerd process of its own (the budget ledger \`warmpath#spend\` in ${a}'s worker, reached from ${b}'s over its \`BUDGET_LEDGER\` binding); one system per flush interval, started afresh (its own Durable Object storage), its runs one after the other.`,
    `- **Configuration**: wrangler.toml's development configuration (regions ${a} and ${b}, prices as there), \`usage.flush_interval_ms\` = F, and one tenant per run (\`bench-f<F>-c<clients>-r<run>\`, its own API key) with \`budget = { tokens_per_day = B }\`.`,
    `- **Fleet**: fleet/fleet.default.json (three nodes in each region), ${TIME_FACTOR}x real time (decode ${30 * TIME_FACTOR} tokens/s a request).`,
    `- **Flush intervals F**: ${FLUSH_INTERVALS_MS.join(", ")} ms. **Clients**: ${CLIENTS.join(", ")} in closed loop, half pinned to each region with \`x-warmpath-region\`. **Budgets B**: ${CLIENTS.map((c) => `${int(BUDGET_TOKENS[c]!)} tokens with ${c} clients`).join(", ")}. **Runs** of each: ${REPEATS}.`,
    `- **Requests**: \`${MODEL}\` chat completions, a ${PROMPT.length + 30}-character prompt (about ${Math.round((PROMPT.length + 30) / 4)} tokens), \`max_tokens\` ${MAX_TOKENS}; each client alternates non-streamed and streamed ones (\`stream_options.include_usage\`); a request's tokens are the prompt and completion tokens its answer carried (the whole answer's \`usage\`, or the stream's usage event).`,
    `- **End of a run**: when each region's last ${REFUSALS_TO_STOP} answers are all 429 \`insufficient_quota\` (at most ${RUN_TIMEOUT_MS / 1000} s, else the benchmark fails).`,
    `- **Ledger**: GET /admin/usage?tenant=... after the run (read again for up to ${LEDGER_SETTLE_MS / 1000} s until it holds every answer's bill): its prompt plus completion tokens, estimated ones included, must equal the sum of the answers' usage, and its requests the 200 answers; else the benchmark fails.`,
    "",
    "## Results",
    "",
    "| F (ms) | clients | run | budget B | ledger tokens | answers' usage | ledger = answers | overshoot (tokens) | overshoot (% of B) | bound (tokens) | within bound | admitted after first refusal |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |",
    ...results.map(
      (r) =>
        `| ${r.flushMs} | ${r.clients} | ${r.repeat} | ${int(r.budget)} | ${int(r.ledgerTokens)} | ${int(r.answerTokens)} | ${r.ledgerTokens === r.answerTokens ? "yes" : "NO"} | ${int(r.overshoot)} | ${pct(r.overshoot, r.budget)} | ${int(r.bound)} | ${r.overshoot <= r.bound ? "yes" : "NO"} | ${r.admittedAfter[a]! + r.admittedAfter[b]!} |`,
    ),
    "",
    `The ledger held exactly the answers' usage in every run. Overshoot within the bound in ${within} of ${results.length} runs${
      over.length
        ? ` (over it: ${over.map((r) => `F = ${r.flushMs} ms, ${r.clients} clients, run ${r.repeat}: ${int(r.overshoot)} against ${int(r.bound)}, ${(r.overshoot / r.bound).toFixed(2)}x`).join("; ")})`
        : ""
    }; the largest overshoot, ${int(worst.overshoot)} tokens (${pct(worst.overshoot, worst.budget)} of B), at F = ${worst.flushMs} ms with ${worst.clients} clients.`,
    "",
    "### Each run in detail",
    "",
    `| F (ms) | clients | run | run (s) | requests | answered | refused | other answers | first 429 ${a} (s) | first 429 ${b} (s) | admitted after first refusal (${a} / ${b}) | their tokens | spend rate ${a} / ${b} (tokens/s) | round trip (ms) | in flight (tokens) | overshoot in time of outside spend (ms) |`,
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...results.map(
      (r) =>
        `| ${r.flushMs} | ${r.clients} | ${r.repeat} | ${r.durationS.toFixed(1)} | ${r.requests} | ${r.answered} | ${r.refused} | ${
          Object.entries(r.otherAnswers)
            .map(([k, v]) => `${k}: ${v}`)
            .join(", ") || "none"
        } | ${r.firstRefusalS[a]!.toFixed(2)} | ${r.firstRefusalS[b]!.toFixed(2)} | ${r.admittedAfter[a]} / ${r.admittedAfter[b]} | ${int(r.tokensAfter)} | ${int(r.rates[a]!)} / ${int(r.rates[b]!)} | ${r.rttMs.toFixed(1)} | ${int(r.inFlightTokens)} | ${int((1000 * r.overshoot) / r.rateOutside)} |`,
    ),
    "",
    "## How to read it",
    "",
    "- **overshoot** = the ledger's tokens less B. It is never negative: an object refuses only once what it knows was spent reaches B, and it knows no more than was spent.",
    "- **bound**, docs/USAGE.md's: (spend rate outside the refusing object) x 2 x (F + one round trip) + requests in flight (the other region's report up to F + a round trip late at the budget ledger, the ledger's totals up to as late again at this object), from the run's own figures: the _spend rate_ of a region is the tokens its answers carried a second over the second half of the time before the first refusal (past the start-up), and the rate outside is the larger of the two regions'; _one round trip_ is the run's median 429 latency (client, edge, region worker, object and back: more hops than an object's call to the budget ledger); _in flight_ is every client with a request in flight, each at the largest answer seen.",
    "- **admitted after first refusal**: requests sent after the first 429 `insufficient_quota` anywhere reached its client, and answered 200 (in either region); _their tokens_, what those answers carried.",
    "- **first 429**: seconds from the run's first request to the region's first refusal; the gap between the two regions' is how long the second took to hear of the first's spend.",
    "- **overshoot in time of outside spend**: the overshoot divided by the rate outside, to set against F + one round trip (the in-flight requests are part of it).",
    "- Times are on a shared machine and vary from run to run; the figures to compare are the overshoot and the bound of the same run.",
    "",
  ].join("\n");
}

await main();
process.exit(0);
