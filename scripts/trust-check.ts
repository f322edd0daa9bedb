/**
 * `npm run trust-check` (node scripts/trust-check.ts, on the Node.js 22 the npm scripts run): issue 31's attacks ("Trust the bill", its "Why"), tried again from
 * outside on the real local system, as a hostile client, a hostile or broken node and an operator;
 * writes docs/trust-check.md (what was tried, what the issue found before, what happens now, pass
 * or fail) and exits 1 if any check fails. It never changes the product: a failing check is a
 * finding to report.
 *
 *   npm run trust-check [-- --out docs/trust-check.md] [-- --only 1,2,...]
 *
 * Checks 1-7 run on one system as scripts/system.ts starts it with `runtime: "workerd"` (the deploy
 * bundles, the edge and each region's worker in a workerd process of its own, so a region worker's
 * loopback port exists to be forged at), the default simulated fleet (fleet/fleet.default.json)
 * plus this script's own hostile nodes: tiny OpenAI-compatible HTTP servers serving the model
 * `trust-hostile` (added to us-east), registered as the fleet's nodes register (agent/report-loop.ts,
 * the region's node token), whose behaviour each request picks by a `[[mode:...]]` marker in its
 * prompt, and which record every request they receive. Every check has tenants of its own (the
 * usage ledger is per tenant), all in a fresh temporary store. Check 8 starts the system as
 * `npm start` does (`runtime: "wrangler-dev"`, a state folder) twice on the same folder, then runs
 * `npm start` itself (scripts/start.ts) and a workerd-runtime system in child processes and kills
 * each with SIGKILL.
 *
 * `--child-workerd` (internal, check 8): start a workerd-runtime system without a fleet, print
 * `READY <url>` and wait to be killed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes, webcrypto } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { parseArgs } from "node:util";
import { execFileSync } from "node:child_process";
import * as prettier from "prettier";
import { startReportLoop, type ReportLoop } from "../agent/report-loop.ts";
import { DEV_API_KEY, DEV_API_KEY_2, DEV_INTERNAL_SECRET, DEV_NODE_TOKEN } from "../src/config/dev-credentials.ts";
import { encodeDispatch, regionPath } from "../src/contracts/region-service.ts";
import type { UsageRow } from "../src/contracts/usage.ts";
import { INTERNAL_AUTH_HEADER, signInternal, type InternalRole, type Subtle } from "../src/core/internal-auth.ts";
import { devConfigWithPolicy } from "./demo/policy-config.ts";
import { ROOT, startSystem, type System } from "./system.ts";
import { freePort } from "./ports.ts";

const { values: flags } = parseArgs({
  options: {
    out: { type: "string", default: join(ROOT, "docs", "trust-check.md") },
    only: { type: "string" },
    "child-workerd": { type: "boolean", default: false },
  },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const today = () => new Date().toISOString().slice(0, 10);
const fmt = (n: number) => n.toLocaleString("en-US");

// ------------------------------------------------------------------------------------------------
// Child mode (check 8c): a workerd-runtime system, killed by the parent with SIGKILL.
if (flags["child-workerd"]) {
  const system = await startSystem({ runtime: "workerd", port: 0, fleetFile: null, noAssets: true });
  console.log(`READY ${system.url}`);
  await new Promise(() => {});
}

/** The model only this script's hostile nodes serve (added to us-east). */
const HOSTILE_MODEL = "trust-hostile";
const FLEET_MODEL = "llama-3.1-8b-instruct";
const REGION = "us-east";
/** max_body_bytes, the schema's default (limits are not overridden here). */
const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Simulated fleet speed-up (decode 30 tokens/s x 10). */
const TIME_FACTOR = 10;
const HOSTILE_NODES = 3;

interface Tenant {
  id: string;
  key: string;
  budget?: Record<string, number>;
  rate_limits?: Record<string, number>;
}
const tenant = (id: string, extra: Omit<Tenant, "id" | "key"> = {}): Tenant => ({ id, key: `wp-${id}-local-only`, ...extra });
const T = {
  b20k: tenant("tc-budget-20k", { budget: { tokens_per_day: 20_000 } }),
  neg: tenant("tc-node-negative"),
  frac: tenant("tc-node-fractional"),
  huge: tenant("tc-node-huge", { budget: { tokens_per_day: 100_000 } }),
  negDie: tenant("tc-node-negative-then-dies"),
  soFalse: tenant("tc-so-false"),
  soNull: tenant("tc-so-null"),
  soEmpty: tenant("tc-so-empty"),
  soAbsent: tenant("tc-so-absent"),
  soTrue: tenant("tc-so-true"),
  cont: tenant("tc-continuation"),
  event: tenant("tc-big-event"),
  quota: tenant("tc-quota", { budget: { tokens_per_day: 400 } }),
  rl: tenant("tc-rate-limited", { rate_limits: { requests_per_minute: 1 } }),
  victim: tenant("tc-victim"),
  r3k: tenant("tc-restart-3k", { budget: { tokens_per_day: 3_000 } }),
};

function configWith(tenants: Tenant[]): Record<string, unknown> {
  const config = devConfigWithPolicy("warmpath") as { regions: Array<{ name: string; models: string[] }>; tenants: unknown[] } & Record<
    string,
    unknown
  >;
  config.regions.find((r) => r.name === REGION)!.models.push(HOSTILE_MODEL);
  for (const t of tenants)
    config.tenants.push({
      id: t.id,
      api_key_sha256: [sha256(t.key)],
      ...(t.budget ? { budget: t.budget } : {}),
      ...(t.rate_limits ? { rate_limits: t.rate_limits } : {}),
    });
  return config;
}

// ------------------------------------------------------------------------------------------------
// The hostile node: an OpenAI-compatible server whose behaviour the prompt's marker picks.

interface Received {
  node: string;
  path: string;
  bytes: number;
  mode: string;
  continuation: boolean;
  maxTokens: unknown;
  streamOptions: unknown;
  previousResponseId: unknown;
  at: number;
}

const received: Received[] = [];
/** The usage each mode reports (as a node would in its JSON answer or its last stream chunk). */
const MODE_USAGE: Record<string, Record<string, number>> = {
  neg: { prompt_tokens: -50, completion_tokens: -5, total_tokens: -55 },
  frac: { prompt_tokens: 12.5, completion_tokens: 2.5, total_tokens: 15 },
  huge: { prompt_tokens: 12, completion_tokens: 9e15, total_tokens: 9e15 + 12 },
  honest: { prompt_tokens: 123, completion_tokens: 9, total_tokens: 132 },
};
const HONEST_TEXT = ["Hello", " there", ", a fine", " answer."];

function modeOf(body: Record<string, unknown>): string {
  const text = JSON.stringify(body.messages ?? body.input ?? body.prompt ?? "").slice(0, 4096);
  return /\[\[mode:([a-z0-9-]+)\]\]/.exec(text)?.[1] ?? "honest";
}

const chunk = (model: string, delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-hostile", object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const usageChunk = (model: string, usage: unknown) =>
  `data: ${JSON.stringify({ id: "chatcmpl-hostile", object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model, choices: [], usage })}\n\n`;

async function write(res: ServerResponse, data: string): Promise<void> {
  if (!res.write(data)) await new Promise<void>((r) => res.once("drain", () => r()));
}

/** Streams `totalChars` of text in events of `perEvent` characters, then dies (the socket destroyed) or finishes. */
async function streamText(res: ServerResponse, model: string, totalChars: number, perEvent: number, die: boolean): Promise<void> {
  await write(res, chunk(model, { role: "assistant", content: "" }));
  const piece = "lorem ipsum dolor sit amet ".repeat(Math.ceil(perEvent / 27)).slice(0, perEvent);
  for (let sent = 0; sent < totalChars; sent += perEvent) await write(res, chunk(model, { content: piece }));
  if (die) {
    // Let what was written reach the router first: destroy() drops writes still queued.
    await sleep(200);
    res.socket?.destroy();
    return;
  }
  await write(res, chunk(model, {}, "stop"));
  res.end("data: [DONE]\n\n");
}

async function handle(name: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  const raw = Buffer.concat(parts);
  const path = (req.url ?? "/").split("?")[0]!;
  if (req.method === "GET") {
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ object: "list", data: [{ id: HOSTILE_MODEL, object: "model" }] }));
    return;
  }
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
  } catch {
    // recorded as sent
  }
  const continuation = body.continue_final_message === true;
  const mode = continuation ? "continuation" : modeOf(body);
  received.push({
    node: name,
    path,
    bytes: raw.length,
    mode,
    continuation,
    maxTokens: body.max_tokens ?? body.max_completion_tokens,
    streamOptions: "stream_options" in body ? body.stream_options : "(absent)",
    previousResponseId: body.previous_response_id,
    at: Date.now(),
  });
  const model = String(body.model ?? HOSTILE_MODEL);
  const askedUsage = (body.stream_options as { include_usage?: unknown } | null | undefined)?.include_usage === true;

  if (path === "/v1/responses") {
    const id = `resp_${randomBytes(12).toString("hex")}`;
    res.writeHead(200, { "content-type": "application/json" }).end(
      JSON.stringify({
        id,
        object: "response",
        created_at: Math.floor(Date.now() / 1000),
        status: "completed",
        model,
        output: [
          {
            type: "message",
            id: `msg_${id.slice(5)}`,
            status: "completed",
            role: "assistant",
            content: [{ type: "output_text", text: "Stored.", annotations: [] }],
          },
        ],
        usage: { input_tokens: 20, output_tokens: 2, total_tokens: 22 },
      }),
    );
    return;
  }
  if (body.stream !== true) {
    const usage = MODE_USAGE[mode] ?? MODE_USAGE.honest!;
    res.writeHead(200, { "content-type": "application/json" }).end(
      JSON.stringify({
        id: "chatcmpl-hostile",
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model,
        choices: [{ index: 0, message: { role: "assistant", content: "Hi." }, finish_reason: "stop" }],
        usage,
      }),
    );
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  switch (mode) {
    case "die10mb":
      return streamText(res, model, 10_000_000, 10_000, true);
    case "die300kb":
      return streamText(res, model, 300_000, 10_000, true);
    case "manyevents":
      return streamText(res, model, 8 * 1024 * 1024, 16 * 1024, false);
    case "bigevent": {
      // One event of 8 MiB of text, written in 16 KiB pieces (as a socket delivers it).
      await write(res, chunk(model, { role: "assistant", content: "" }));
      const event = chunk(model, { content: "x".repeat(8 * 1024 * 1024) });
      for (let i = 0; i < event.length; i += 16 * 1024) await write(res, event.slice(i, i + 16 * 1024));
      await write(res, chunk(model, {}, "stop"));
      res.end("data: [DONE]\n\n");
      return;
    }
    case "negdie":
      // Three tokens, then a usage chunk claiming -100000 completion tokens, then the node dies.
      for (const t of ["One", " two", " three"]) await write(res, chunk(model, { content: t }));
      await write(res, usageChunk(model, { prompt_tokens: 20, completion_tokens: -100_000, total_tokens: -99_980 }));
      await sleep(200);
      res.socket?.destroy();
      return;
    default: {
      await write(res, chunk(model, { role: "assistant", content: "" }));
      for (const t of HONEST_TEXT) await write(res, chunk(model, { content: t }));
      await write(res, chunk(model, {}, "stop"));
      // As vLLM: a usage chunk only when asked for.
      if (askedUsage) await write(res, usageChunk(model, MODE_USAGE.honest));
      res.end("data: [DONE]\n\n");
    }
  }
}

interface HostileNode {
  name: string;
  url: string;
  server: Server;
  loop: ReportLoop;
}

async function startHostileNode(routerUrl: string, name: string): Promise<HostileNode> {
  const server = createServer((req, res) => {
    handle(name, req, res).catch(() => res.socket?.destroy());
  });
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", () => r()));
  const url = `http://127.0.0.1:${port}`;
  const bootId = randomBytes(8).toString("hex");
  const loop = startReportLoop({
    routerUrl,
    token: DEV_NODE_TOKEN,
    node: { region: REGION, node_id: name },
    intervalMs: 2_000,
    report: () => ({
      node_id: name,
      region: REGION,
      url,
      models: [HOSTILE_MODEL],
      kv_capacity_tokens: 1_000_000,
      running: 0,
      waiting: 0,
      kv_usage: 0,
      boot_id: bootId,
      engine: "vllm",
    }),
    log: (e) => {
      if (e.event === "report_failing") console.log(`${name}: report failing: ${e.error}`);
    },
  });
  return { name, url, server, loop };
}

// ------------------------------------------------------------------------------------------------
// Client helpers.

interface Answer {
  status: number;
  code?: string;
  message?: string;
  text: string;
  headers: Headers;
  ms: number;
}

async function post(
  url: string,
  key: string,
  body: unknown,
  headers: Record<string, string> = {},
  path = "/v1/chat/completions",
): Promise<Answer> {
  const t0 = performance.now();
  try {
    const res = await fetch(`${url}${path}`, {
      method: "POST",
      signal: AbortSignal.timeout(180_000),
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-warmpath-region": REGION, ...headers },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    const err = /"code":"([^"]+)"/.exec(text);
    const msg = /"message":"([^"]*)"/.exec(text);
    return { status: res.status, code: err?.[1], message: msg?.[1], text, headers: res.headers, ms: performance.now() - t0 };
  } catch (e) {
    return { status: 0, code: `client: ${(e as Error).message}`, text: "", headers: new Headers(), ms: performance.now() - t0 };
  }
}

/** The data events of an SSE answer, parsed (the `[DONE]` left out). */
function events(text: string): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    try {
      out.push(JSON.parse(line.slice(6)) as Record<string, unknown>);
    } catch {
      out.push({ unparsed: line.length });
    }
  }
  return out;
}

interface Ledger {
  status: number;
  rows: UsageRow[];
  requests: number;
  prompt: number;
  completion: number;
  estimatedRequests: number;
  estimatedPrompt: number;
  estimatedCompletion: number;
  tokens: number;
  cost: number;
}

async function ledgerOf(url: string, tenantId: string): Promise<Ledger> {
  const res = await fetch(`${url}/admin/usage?tenant=${encodeURIComponent(tenantId)}`, { headers: { accept: "application/json" } });
  const rows = res.ok ? ((await res.json()) as { data: UsageRow[] }).data : [];
  const sum = (f: (r: UsageRow) => number) => rows.reduce((s, r) => s + f(r), 0);
  const l = {
    status: res.status,
    rows,
    requests: sum((r) => r.requests),
    prompt: sum((r) => r.prompt_tokens),
    completion: sum((r) => r.completion_tokens),
    estimatedRequests: sum((r) => r.estimated_requests),
    estimatedPrompt: sum((r) => r.estimated_prompt_tokens),
    estimatedCompletion: sum((r) => r.estimated_completion_tokens),
    cost: sum((r) => r.cost_usd + r.estimated_cost_usd),
  };
  return { ...l, tokens: l.prompt + l.completion + l.estimatedPrompt + l.estimatedCompletion };
}

/** The ledger once it has stopped changing (bills reach the region objects just after the answers). */
async function settledLedger(url: string, tenantId: string, expectRequests?: number): Promise<Ledger> {
  let last = await ledgerOf(url, tenantId);
  for (let i = 0; i < 30; i++) {
    await sleep(500);
    const now = await ledgerOf(url, tenantId);
    const stable = now.tokens === last.tokens && now.requests === last.requests;
    last = now;
    if (stable && (expectRequests === undefined || now.requests >= expectRequests) && i >= 2) break;
  }
  return last;
}

const ledgerText = (l: Ledger) =>
  `${fmt(l.requests)} request(s): node-counted ${fmt(l.prompt)} prompt + ${fmt(l.completion)} completion; estimated ${fmt(l.estimatedRequests)} request(s), ${fmt(l.estimatedPrompt)} + ${fmt(l.estimatedCompletion)} tokens; $${l.cost.toFixed(6)}`;

/** warmpath_edge_refusals_total by code (summed over reasons and statuses). */
async function refusalCounts(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith("warmpath_edge_refusals_total{")) continue;
    const code = /code="([^"]*)"/.exec(line)?.[1] ?? "";
    out.set(code, (out.get(code) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
  }
  return out;
}
const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

// ------------------------------------------------------------------------------------------------
// Results.

interface Result {
  n: number;
  title: string;
  tried: string;
  before: string;
  now: string;
  pass: boolean;
}
const results: Result[] = [];
const record = (r: Result) => {
  results.push(r);
  console.log(`check ${r.n} ${r.pass ? "PASS" : "FAIL"}: ${r.title}\n  ${r.now}`);
};
const only = flags.only ? new Set(flags.only.split(",").map(Number)) : undefined;
const wanted = (n: number) => !only || only.has(n);

/** Runs a check, recording a thrown error as its failure. */
async function check(n: number, title: string, tried: string, before: string, body: () => Promise<{ now: string; pass: boolean }>) {
  if (!wanted(n)) return;
  const t0 = Date.now();
  try {
    const r = await body();
    record({ n, title, tried, before, ...r });
  } catch (e) {
    record({ n, title, tried, before, now: `the check itself failed: ${(e as Error).stack ?? String(e)}`.slice(0, 1200), pass: false });
  }
  console.log(`  (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
}

// ------------------------------------------------------------------------------------------------
// /proc: processes, their descendants and the TCP ports they listen on (check 8).

function procTable(): Map<number, { ppid: number; pgrp: number; state: string }> {
  const out = new Map<number, { ppid: number; pgrp: number; state: string }>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const [state, ppid, pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(Number(name), { ppid: Number(ppid), pgrp: Number(pgrp), state: state! });
    } catch {
      // ended while we looked
    }
  }
  return out;
}

/** `root` and every live process under it (by parent, or in the process group of one of them). */
function tree(root: number): Set<number> {
  const table = procTable();
  const found = new Set<number>([root]);
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, p] of table)
      if (!found.has(pid) && (found.has(p.ppid) || found.has(p.pgrp)) && p.state !== "Z") {
        found.add(pid);
        grew = true;
      }
  }
  return found;
}

function alive(pids: Iterable<number>): number[] {
  const table = procTable();
  return [...pids].filter((pid) => {
    const p = table.get(pid);
    return p !== undefined && p.state !== "Z" && p.state !== "X";
  });
}

/** Listening TCP sockets: inode -> port. */
function listeningSockets(): Map<string, number> {
  const out = new Map<string, number>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== "0A") continue;
      out.set(f[9]!, parseInt(f[1]!.split(":")[1]!, 16));
    }
  }
  return out;
}

/** Ports the given processes listen on. */
function portsOf(pids: Iterable<number>): number[] {
  const sockets = listeningSockets();
  const ports = new Set<number>();
  for (const pid of pids) {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        const port = m ? sockets.get(m[1]!) : undefined;
        if (port !== undefined) ports.add(port);
      } catch {
        // closed while we looked
      }
    }
  }
  return [...ports].sort((a, b) => a - b);
}

const listening = (ports: number[]) => {
  const all = new Set(listeningSockets().values());
  return ports.filter((p) => all.has(p));
};

// ------------------------------------------------------------------------------------------------
// Checks 1-7: one workerd-runtime system.

const routerOutput: Array<{ at: number; line: string }> = [];

async function mainSystemChecks(): Promise<void> {
  if (![1, 2, 3, 4, 5, 6, 7].some(wanted)) return;
  const tenants = Object.values(T).filter((t) => t !== T.r3k);
  console.log("starting the system (runtime workerd, default fleet) ...");
  const system = await startSystem({
    runtime: "workerd",
    port: 0,
    timeFactorScale: TIME_FACTOR,
    noAssets: true,
    config: configWith(tenants),
    onRouterOutput: (line) => {
      routerOutput.push({ at: Date.now(), line });
      if (routerOutput.length > 200_000) routerOutput.splice(0, 100_000);
    },
  });
  const url = system.url;
  const hostile: HostileNode[] = [];
  try {
    for (let i = 1; i <= HOSTILE_NODES; i++) hostile.push(await startHostileNode(url, `hostile-${i}`));
    for (let i = 0; ; i++) {
      const state = (await (await fetch(`${url}/admin/state`)).json()) as {
        regions: Array<{ region: string; nodes: Array<{ id: string }> }>;
      };
      const ids = state.regions.find((r) => r.region === REGION)?.nodes.map((n) => n.id) ?? [];
      if (hostile.every((h) => ids.includes(h.name))) break;
      if (i > 100) throw new Error("the hostile nodes did not register");
      await sleep(200);
    }
    console.log(`system up at ${url}; ${HOSTILE_NODES} hostile nodes registered`);

    await check1(url);
    await check2(url);
    await check3(url);
    await check4(url);
    await check5(url);
    await check6(url, system);
    await check7(url);
  } finally {
    for (const h of hostile) {
      await h.loop.stop(false);
      h.server.closeAllConnections();
      h.server.close();
    }
    await system.stop();
  }
}

async function check1(url: string) {
  const BUDGET = 20_000;
  const CLIENTS = 40;
  const MAX_TOKENS = 400;
  await check(
    1,
    "Budget under concurrency",
    `${CLIENTS} concurrent non-streamed chat completions (${FLEET_MODEL} on the simulated fleet, one region object: us-east), each a unique ~2,000-token prompt and max_tokens ${MAX_TOKENS}, from a tenant with tokens_per_day ${fmt(BUDGET)}; then the tenant's ledger (GET /admin/usage) once settled.`,
    "All 40 answered; 401,789 tokens spent (20.1x the budget): nothing was reserved for requests in flight.",
    async () => {
      const prompt = "Summarise the quarterly ledger entries, line by line. ".repeat(148); // ~8,000 characters
      const answers = await Promise.all(
        Array.from({ length: CLIENTS }, (_, i) =>
          post(url, T.b20k.key, { model: FLEET_MODEL, max_tokens: MAX_TOKENS, messages: [{ role: "user", content: `[${i}] ${prompt}` }] }),
        ),
      );
      const ok = answers.filter((a) => a.status === 200);
      const byCode = new Map<string, number>();
      for (const a of answers) if (a.status !== 200) byCode.set(`${a.status} ${a.code}`, (byCode.get(`${a.status} ${a.code}`) ?? 0) + 1);
      let largest = 0;
      for (const a of ok) {
        const u = (JSON.parse(a.text) as { usage?: { total_tokens?: number } }).usage;
        largest = Math.max(largest, u?.total_tokens ?? 0);
      }
      const ledger = await settledLedger(url, T.b20k.id, ok.length);
      // The bound docs/USAGE.md states for one region object: one request's hold (its prompt, at most
      // 4x the estimate after the object's correction, plus max_tokens); the largest answer stands in for it.
      const promptEstimate = Math.ceil((prompt.length + 6) / 4);
      const oneHold = promptEstimate + MAX_TOKENS;
      const after = await post(url, T.b20k.key, { model: FLEET_MODEL, max_tokens: 16, messages: [{ role: "user", content: "one more" }] });
      const ratio = ledger.tokens / BUDGET;
      const pass = ledger.tokens <= BUDGET + Math.max(oneHold, largest);
      return {
        now: `${ok.length} of ${CLIENTS} answered 200, ${[...byCode].map(([k, v]) => `${v} x ${k}`).join(", ") || "none refused"}; ledger ${fmt(ledger.tokens)} tokens (${ratio.toFixed(2)}x the budget; ${ledger.requests} requests, ${ledger.estimatedRequests} estimated), overshoot ${fmt(Math.max(0, ledger.tokens - BUDGET))} against one request's hold of ~${fmt(oneHold)} tokens (largest answer ${fmt(largest)}); a request afterwards: ${after.status} ${after.code ?? ""}.`,
        pass,
      };
    },
  );
}

async function hostileAsk(url: string, t: Tenant, mode: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  return post(url, t.key, { model: HOSTILE_MODEL, messages: [{ role: "user", content: `[[mode:${mode}]] Say hi.` }], ...extra }, headers);
}

async function check2(url: string) {
  await check(
    2,
    "Usage a node can forge",
    `Three registered hostile nodes (this script's OpenAI-compatible servers, engine vllm) answer non-streamed max_tokens 5 requests with usage {prompt -50, completion -5}, {prompt 12.5, completion 2.5}, and twice {prompt 12, completion 9e15} (a tenant with a 100,000-token daily budget); then GET /admin/usage for every tenant (JSON and CSV) and one more request from the 9e15 tenant. Also: a stream that relays 3 tokens, a usage chunk of completion_tokens -100000, then dies; the client asked max_tokens 12; what the continuing node is asked.`,
    "Negative or fractional usage: served and never billed. 9e15: billed as is ($3.6 billion), the tenant locked out; two such answers pushed a ledger row past 2^53, /admin/usage answered 503 for every tenant and the spend batch was refused for ever. The -100000 chunk made the continuation ask the next node for max_tokens 100012.",
    async () => {
      const lines: string[] = [];
      let pass = true;
      const served: Record<string, number> = {};
      for (const [t, mode, times] of [
        [T.neg, "neg", 1],
        [T.frac, "frac", 1],
        [T.huge, "huge", 2],
      ] as const) {
        for (let i = 0; i < times; i++) {
          const a = await hostileAsk(url, t, mode, { max_tokens: 5 });
          served[mode] = (served[mode] ?? 0) + (a.status === 200 ? 1 : 0);
        }
        const l = await settledLedger(url, t.id, times);
        const billedEstimate = l.requests === times && l.estimatedRequests === times && l.prompt === 0 && l.completion === 0;
        // The documented cap on an estimated completion: max_tokens + 16 (docs/USAGE.md).
        const withinMax = l.estimatedCompletion <= (5 + 16) * times;
        pass &&= billedEstimate && withinMax && served[mode] === times && l.cost < 1;
        lines.push(`${mode}: ${served[mode]}/${times} served 200; billed ${ledgerText(l)} (cap: max_tokens 5 + 16 a request)`);
      }
      const next = await hostileAsk(url, T.huge, "honest", { max_tokens: 5 });
      const all = await fetch(`${url}/admin/usage`, { headers: { accept: "application/json" } });
      const csv = await fetch(`${url}/admin/usage?from=${today()}&to=${today()}`, { headers: { accept: "text/csv" } });
      await all.arrayBuffer();
      await csv.arrayBuffer();
      pass &&= next.status === 200 && all.status === 200 && csv.status === 200;
      lines.push(
        `after two 9e15 answers the tenant's next request: ${next.status}; GET /admin/usage (all tenants) ${all.status}, CSV ${csv.status}`,
      );

      const before = received.length;
      const a = await hostileAsk(url, T.negDie, "negdie", { max_tokens: 12, stream: true });
      await sleep(300);
      const cont = received.slice(before).filter((r) => r.continuation);
      const ev = events(a.text);
      const err = ev.find((e) => e.error) as { error?: { code?: string } } | undefined;
      const asked = cont.map((c) => c.maxTokens);
      const contOk = cont.length > 0 && cont.every((c) => typeof c.maxTokens === "number" && c.maxTokens <= 12);
      pass &&= contOk || (cont.length === 0 && err !== undefined);
      const l = await settledLedger(url, T.negDie.id, 1);
      lines.push(
        `-100000 then death: ${a.status}, ${cont.length} continuation(s) reached a node asking max_tokens ${asked.join(", ") || "-"}${err ? `, stream ended with ${err.error?.code}` : ""}; billed ${ledgerText(l)}`,
      );
      return { now: lines.join(". "), pass };
    },
  );
}

async function check3(url: string) {
  await check(
    3,
    "A client choosing to be billed by estimate",
    "Streamed requests to a hostile node that, like vLLM, sends a usage chunk only when the body it receives has stream_options.include_usage true (its count: prompt 123, completion 9), with stream_options {include_usage:false}, null, {}, absent, and {include_usage:true} (control), a tenant each; what the node was sent, whether the client got a usage chunk, what was billed.",
    "include_usage false, null or {} made the router bill its own characters/4 estimate instead of the node's count.",
    async () => {
      const lines: string[] = [];
      let pass = true;
      for (const [t, so, label] of [
        [T.soFalse, { include_usage: false }, "false"],
        [T.soNull, null, "null"],
        [T.soEmpty, {}, "{}"],
        [T.soAbsent, undefined, "absent"],
        [T.soTrue, { include_usage: true }, "true"],
      ] as const) {
        const before = received.length;
        const a = await hostileAsk(url, t, "honest", { max_tokens: 50, stream: true, ...(so === undefined ? {} : { stream_options: so }) });
        const got = received.slice(before).find((r) => r.mode === "honest");
        const usageEvents = events(a.text).filter((e) => e.usage !== undefined && e.usage !== null).length;
        const l = await settledLedger(url, t.id, 1);
        const measured = l.requests === 1 && l.estimatedRequests === 0 && l.prompt === 123 && l.completion === 9;
        const clientOk = label === "true" ? usageEvents === 1 : usageEvents === 0;
        pass &&= a.status === 200 && measured && clientOk;
        lines.push(
          `${label}: node sent stream_options ${JSON.stringify(got?.streamOptions)}; client got ${usageEvents} usage chunk(s); billed ${l.prompt}+${l.completion} node-counted, ${l.estimatedRequests} estimated`,
        );
      }
      return { now: lines.join(". "), pass };
    },
  );
}

async function check4(url: string) {
  await check(
    4,
    "Continuations and events bounded",
    `A hostile node streams 10 MB of text (1,000 events of 10,000 characters) then dies; another streams 300 KB then dies (control: a continuation that fits). What the client receives, and what any node receives as the continuation (its body size against max_body_bytes ${fmt(MAX_BODY_BYTES)}). Then a stream with one 8 MiB event (written in 16 KiB pieces) against the same 8 MiB in 512 events of 16 KiB: the client's time to the end of the answer.`,
    "The 10 MB stream produced a 10,000,392-byte continuation request (2.4x max_body_bytes). One large event cost quadratic CPU: 0.77 s at 4 MiB, 3.75 s at 8 MiB.",
    async () => {
      const lines: string[] = [];
      let pass = true;
      for (const [mode, label] of [
        ["die10mb", "10 MB"],
        ["die300kb", "300 KB"],
      ] as const) {
        const before = received.length;
        const a = await hostileAsk(url, T.cont, mode, { max_tokens: 4_000_000, stream: true });
        await sleep(500);
        const conts = received.slice(before).filter((r) => r.continuation);
        const err = events(a.text).find((e) => e.error) as { error?: { code?: string } } | undefined;
        const done = a.text.includes("data: [DONE]");
        const largest = Math.max(0, ...conts.map((c) => c.bytes));
        if (mode === "die10mb")
          pass &&= largest <= MAX_BODY_BYTES && (conts.length > 0 ? true : err?.error?.code === "continuation_too_large");
        else pass &&= conts.length > 0 && largest <= MAX_BODY_BYTES && done;
        lines.push(
          `${label} then death: client ${a.status}, ${fmt(a.text.length)} bytes, ${done ? "ended [DONE]" : `ended with error ${err?.error?.code ?? "(none)"}`}; ${conts.length} continuation request(s) reached a node${conts.length ? ` (largest ${fmt(largest)} bytes, ${(largest / MAX_BODY_BYTES).toFixed(2)}x max_body_bytes)` : ""}`,
        );
      }
      const times: Record<string, number[]> = { bigevent: [], manyevents: [] };
      for (let i = 0; i < 3; i++)
        for (const mode of ["manyevents", "bigevent"] as const) {
          const a = await hostileAsk(url, T.event, mode, { max_tokens: 4_000_000, stream: true });
          if (a.status !== 200 || !a.text.includes("data: [DONE]"))
            throw new Error(`${mode}: ${a.status} ${a.code ?? ""}, no [DONE] (${a.text.length} bytes)`);
          times[mode]!.push(a.ms);
        }
      const best = (m: string) => Math.min(...times[m]!);
      const big = best("bigevent");
      const many = best("manyevents");
      // Linear: one event costs about what the same bytes in many events cost (before: 3.75 s of CPU alone at 8 MiB).
      pass &&= big <= Math.max(1_500, 2 * many);
      lines.push(
        `8 MiB answer end to end (best of 3): one event ${fmt(Math.round(big))} ms, 512 events ${fmt(Math.round(many))} ms (all runs: one event ${times.bigevent!.map((t) => Math.round(t)).join("/")} ms, 512 events ${times.manyevents!.map((t) => Math.round(t)).join("/")} ms)`,
      );
      return { now: lines.join(". "), pass };
    },
  );
}

async function check5(url: string) {
  const FLOOD = 400;
  await check(
    5,
    "Every refusal counted and logged once",
    `A budget's 429 insufficient_quota (a tenant with tokens_per_day 400, spent first) and the region's own 429 rate_limit_exceeded (requests_per_minute 1, second request): warmpath_edge_refusals_total on the edge's /metrics before and after each, and the log lines carrying its x-request-id. Then ${FLOOD} refused requests from the spent tenant, 8 at a time, each with a sampled traceparent (-01): log bytes and lines written meanwhile (all workers), the counter's increase.`,
    "Neither 429 was in warmpath_edge_refusals_total nor had a refusal line; each wrote an unthrottled decision line and two spans lines (1.39 MB of log for 400 refused requests). Spans lines bypassed the log limit; a sampled traceparent forced one.",
    async () => {
      const lines: string[] = [];
      let pass = true;
      // Spend the 400-token budget.
      let spent: Answer | undefined;
      for (let i = 0; i < 60 && !spent; i++) {
        const a = await post(url, T.quota.key, {
          model: FLEET_MODEL,
          max_tokens: 16,
          messages: [{ role: "user", content: `spend ${i} ${"x ".repeat(100)}` }],
        });
        if (a.status === 429 && a.code === "insufficient_quota" && !(a.message ?? "").includes("in flight")) spent = a;
        else if (a.status === 429) await sleep(1000);
      }
      if (!spent) throw new Error("the 400-token budget did not refuse within 60 requests");
      await sleep(1500);
      const once = async (label: string, key: string, expectCode: string) => {
        const id = `trustcheck${randomBytes(8).toString("hex")}`;
        const c0 = await refusalCounts(url);
        const a = await post(
          url,
          key,
          { model: FLEET_MODEL, max_tokens: 16, messages: [{ role: "user", content: "refuse me" }] },
          { "x-request-id": id },
        );
        await sleep(1500);
        const c1 = await refusalCounts(url);
        const rid = a.headers.get("x-request-id") ?? id;
        const mine = routerOutput.filter((o) => o.line.includes(rid)).map((o) => /"event":"([^"]+)"/.exec(o.line)?.[1] ?? "other");
        const kinds = new Map<string, number>();
        for (const k of mine) kinds.set(k, (kinds.get(k) ?? 0) + 1);
        const delta = (c1.get(expectCode) ?? 0) - (c0.get(expectCode) ?? 0);
        const deltaAll = total(c1) - total(c0);
        const ok =
          a.status === 429 &&
          a.code === expectCode &&
          delta === 1 &&
          deltaAll === 1 &&
          kinds.get("refusal") === 1 &&
          !kinds.has("decision");
        pass &&= ok;
        lines.push(
          `${label}: ${a.status} ${a.code}; counter +${delta} for ${expectCode} (+${deltaAll} in all); its log lines: ${[...kinds].map(([k, v]) => `${v} ${k}`).join(", ") || "none"}`,
        );
      };
      await once("budget", T.quota.key, "insufficient_quota");
      const first = await post(url, T.rl.key, { model: FLEET_MODEL, max_tokens: 8, messages: [{ role: "user", content: "first" }] });
      if (first.status !== 200) lines.push(`(rate-limited tenant's first request: ${first.status} ${first.code})`);
      await once("region rate limit", T.rl.key, "rate_limit_exceeded");

      const c0 = await refusalCounts(url);
      const from = Date.now();
      const mark = routerOutput.length;
      let next = 0;
      const statuses = new Map<string, number>();
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < FLOOD) {
            next++;
            const trace = `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`;
            const a = await post(
              url,
              T.quota.key,
              { model: FLEET_MODEL, max_tokens: 16, messages: [{ role: "user", content: "flood" }] },
              { traceparent: trace },
            );
            statuses.set(`${a.status} ${a.code}`, (statuses.get(`${a.status} ${a.code}`) ?? 0) + 1);
          }
        }),
      );
      const seconds = (Date.now() - from) / 1000;
      await sleep(2500); // the second's summary lines, written with the next line asked for
      // One request after the flood asks for the summary lines of its last second.
      await post(url, T.quota.key, { model: FLEET_MODEL, max_tokens: 16, messages: [{ role: "user", content: "after" }] });
      await sleep(1500);
      const c1 = await refusalCounts(url);
      const out = routerOutput.slice(mark - (routerOutput.length > mark ? 0 : 0)).filter((o) => o.at >= from);
      const bytes = out.reduce((s, o) => s + Buffer.byteLength(o.line) + 1, 0);
      const kinds = new Map<string, number>();
      for (const o of out) {
        const k = /"event":"([^"]+)"/.exec(o.line)?.[1] ?? "other";
        kinds.set(k, (kinds.get(k) ?? 0) + 1);
      }
      const counted = (c1.get("insufficient_quota") ?? 0) - (c0.get("insufficient_quota") ?? 0);
      // The stated bound: 20 refusal lines and 20 spans lines a second per service and isolate, ~60 KB/s per isolate.
      const boundBytes = 60_000 * 3 * Math.ceil(seconds + 4);
      pass &&= counted === FLOOD + 1 && !kinds.has("decision") && bytes <= boundBytes && bytes < 1_390_000;
      lines.push(
        `${FLOOD} flood requests (${[...statuses].map(([k, v]) => `${v} x ${k}`).join(", ")}) in ${seconds.toFixed(1)} s: counter +${counted} (${FLOOD} + the one after); log ${fmt(bytes)} bytes in ${fmt(out.length)} lines (${[...kinds].map(([k, v]) => `${v} ${k}`).join(", ")}) against 1.39 MB before`,
      );
      return { now: lines.join(". "), pass };
    },
  );
}

/** The loopback port of a region's worker (runtime workerd): its process's `--port`. */
function regionWorkerPort(system: System, region: string): number {
  const p = system.processes().find((q) => q.name.endsWith(region) && q.name !== "edge");
  if (!p)
    throw new Error(
      `no worker process for ${region}: ${system
        .processes()
        .map((q) => q.name)
        .join(", ")}`,
    );
  const args = readFileSync(`/proc/${p.pid}/cmdline`, "utf8").split("\0");
  const port = Number(args[args.indexOf("--port") + 1]);
  if (!Number.isInteger(port) || port <= 0) throw new Error(`no --port in ${p.name}'s command line`);
  return port;
}

async function check6(url: string, system: System) {
  await check(
    6,
    "Forged messages to a region worker's loopback port",
    "Straight to us-east's worker port (which also holds the budget ledger): a dispatch billing another tenant, a node registration at http://169.254.169.254/, the removal of a fleet node, and a spend batch of 10^12 tokens for a tenant; each unsigned, signed with the public development secret, and signed with a random secret (as edge, and as region for the spend batch). Then the node table, the tenant's ledger and a request from it.",
    "A forged dispatch billed another tenant, registered a node at 169.254.169.254 (the allow-list was checked only at the edge), removed other nodes, and locked a tenant out with a forged spend batch.",
    async () => {
      const port = regionWorkerPort(system, REGION);
      const base = `http://127.0.0.1:${port}`;
      const nodesNow = async () => {
        const state = (await (await fetch(`${url}/admin/state`)).json()) as {
          regions: Array<{ region: string; nodes: Array<{ id: string; url: string }> }>;
        };
        return state.regions.flatMap((r) => r.nodes.map((n) => `${r.region}/${n.id} ${n.url}`)).sort();
      };
      const warm = await post(url, T.victim.key, { model: FLEET_MODEL, max_tokens: 8, messages: [{ role: "user", content: "before" }] });
      const nodes0 = await nodesNow();
      const ledger0 = await settledLedger(url, T.victim.id, 1);
      const victimNode = nodes0
        .find((n) => n.startsWith(`${REGION}/`) && !n.includes("hostile"))!
        .split(" ")[0]!
        .split("/")[1]!;
      const day = today();
      const dispatchBody = encodeDispatch(
        {
          requestId: "forged-1",
          startedAt: Date.now(),
          tenant: { id: T.victim.id, weight: 1 },
          model: FLEET_MODEL,
          path: "/v1/chat/completions",
          api: "openai",
          stream: false,
          askUsage: false,
          cacheNamespace: `tenant:${T.victim.id}`,
          bodyHasCacheSalt: false,
          storesResponses: false,
          hashes: [],
          promptTokens: 5,
          attempts: [],
          headers: { "content-type": "application/json" },
        },
        new TextEncoder().encode(JSON.stringify({ model: FLEET_MODEL, max_tokens: 8, messages: [{ role: "user", content: "forged" }] })),
      );
      const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
      const messages: Array<{ what: string; path: string; body: Uint8Array; role: InternalRole }> = [
        { what: "dispatch", path: regionPath.dispatch(REGION), body: dispatchBody, role: "edge" },
        {
          what: "registration at 169.254.169.254",
          path: regionPath.report(REGION),
          body: enc({
            report: {
              node_id: "forged-metadata",
              region: REGION,
              url: "http://169.254.169.254/",
              models: [FLEET_MODEL],
              kv_capacity_tokens: 100000,
              running: 0,
              waiting: 0,
              kv_usage: 0,
              engine: "vllm",
            },
            credential: { kind: "region" },
          }),
          role: "edge",
        },
        {
          what: `removal of ${victimNode}`,
          path: regionPath.remove(REGION),
          body: enc({ nodeId: victimNode, credential: { kind: "admin" } }),
          role: "edge",
        },
        {
          what: "spend batch",
          path: regionPath.spend(REGION),
          body: enc({
            source: "forged",
            seq: 1,
            spends: [{ tenant: T.victim.id, period: day, tokens: 1_000_000_000_000, usd: 0 }],
            periods: [day],
          }),
          role: "region",
        },
      ];
      const randomSecret = randomBytes(32).toString("hex");
      const outcomes: string[] = [];
      let refused = 0;
      let sent = 0;
      for (const m of messages) {
        const statuses: string[] = [];
        for (const [label, secret] of [
          ["unsigned", undefined],
          ["dev secret", DEV_INTERNAL_SECRET],
          ["random secret", randomSecret],
        ] as const) {
          const headers: Record<string, string> = { "content-type": "application/octet-stream", "x-warmpath-contract": "1" };
          if (secret)
            headers[INTERNAL_AUTH_HEADER] = await signInternal(webcrypto.subtle as unknown as Subtle, secret, {
              role: m.role,
              method: "POST",
              pathAndQuery: m.path,
              timestamp: Date.now(),
              nonce: randomBytes(16).toString("hex"),
              body: m.body,
            });
          const res = await fetch(`${base}${m.path}`, { method: "POST", headers, body: m.body as Uint8Array<ArrayBuffer> });
          const text = await res.text();
          sent++;
          if (res.status === 401 || res.status === 403) refused++;
          statuses.push(`${label} ${res.status}${/"code":"([^"]+)"/.exec(text)?.[1] ? ` ${/"code":"([^"]+)"/.exec(text)![1]}` : ""}`);
        }
        outcomes.push(`${m.what}: ${statuses.join(", ")}`);
      }
      await sleep(1500);
      const nodes1 = await nodesNow();
      const ledger1 = await ledgerOf(url, T.victim.id);
      const after = await post(url, T.victim.key, { model: FLEET_MODEL, max_tokens: 8, messages: [{ role: "user", content: "after" }] });
      const unchanged =
        JSON.stringify(nodes0) === JSON.stringify(nodes1) && ledger1.tokens === ledger0.tokens && ledger1.requests === ledger0.requests;
      const pass = warm.status === 200 && refused === sent && unchanged && after.status === 200;
      return {
        now: `${refused} of ${sent} refused (${outcomes.join("; ")}). Node table ${JSON.stringify(nodes0) === JSON.stringify(nodes1) ? "unchanged" : `CHANGED: ${nodes1.filter((n) => !nodes0.includes(n)).join(", ")} added, ${nodes0.filter((n) => !nodes1.includes(n)).join(", ")} gone`} (${nodes1.length} nodes, none at 169.254.169.254: ${!nodes1.some((n) => n.includes("169.254"))}); the tenant's ledger ${ledger1.requests === ledger0.requests && ledger1.tokens === ledger0.tokens ? "unchanged" : `changed ${ledger0.tokens} -> ${ledger1.tokens}`} (${ledger1.requests} request(s), ${fmt(ledger1.tokens)} tokens); its next request ${after.status} ${after.code ?? ""}`,
        pass,
      };
    },
  );
}

async function check7(url: string) {
  await check(
    7,
    "Another tenant's previous_response_id",
    `Tenant dev stores a response through the router (POST /v1/responses to a hostile node, which answers with its own resp_ id); tenant dev-2 sends 4 follow-ups with that previous_response_id; then dev itself continues it (control). Which answers, and which of them reached a node.`,
    "Another tenant holding the id continued it, 4 times of 4, routed by its affinity to the node that stored it.",
    async () => {
      const input = (text: string) => ({ model: HOSTILE_MODEL, input: `[[mode:honest]] ${text}` });
      const created = await post(url, DEV_API_KEY, input("store this"), {}, "/v1/responses");
      const id = (JSON.parse(created.text) as { id?: string }).id;
      if (created.status !== 200 || !id) throw new Error(`the stored response: ${created.status} ${created.text.slice(0, 200)}`);
      const storedBy = received.find((r) => r.path === "/v1/responses" && r.previousResponseId === undefined)?.node;
      await sleep(500);
      const others: Answer[] = [];
      for (let i = 0; i < 4; i++)
        others.push(await post(url, DEV_API_KEY_2, { ...input(`steal ${i}`), previous_response_id: id }, {}, "/v1/responses"));
      await sleep(300);
      const reachedOthers = received.filter((r) => r.previousResponseId === id).length;
      const own = await post(url, DEV_API_KEY, { ...input("continue"), previous_response_id: id }, {}, "/v1/responses");
      await sleep(300);
      const reachedAll = received.filter((r) => r.previousResponseId === id);
      const refused = others.filter((a) => a.status === 400 && a.code === "previous_response_not_found").length;
      const pass = refused === 4 && reachedOthers === 0 && own.status === 200 && reachedAll.length === 1;
      return {
        now: `${refused} of 4 refused (${others.map((a) => `${a.status} ${a.code ?? ""}`).join(", ")}); ${reachedOthers} of them reached a node. Control: the owner's follow-up ${own.status}, reached ${reachedAll.map((r) => r.node).join(", ") || "no node"} (stored by ${storedBy ?? "?"})`,
        pass,
      };
    },
  );
}

// ------------------------------------------------------------------------------------------------
// Check 8: the operator.

async function check8() {
  await check(
    8,
    "npm start forgets; its workers outlive it",
    "(a) The system as npm start runs it (its workers in one workerd process, a state folder) with a tenant of tokens_per_day 3,000: requests until it is refused, stop, start again on the same folder, the ledger, then 10 more requests. (b) npm start itself (node scripts/start.ts --state <tmp> --fresh, a child process) killed with SIGKILL once up; (c) a workerd-runtime system (each region worker on a loopback port of its own) in a child process killed with SIGKILL: every process under it, and the TCP ports they listened on, 15 s later.",
    "Stopping and starting wiped the usage ledger and spent budgets (8,392 tokens went through a 3,000-token budget across a restart). When npm start itself was killed, its region workers kept running and held their ports.",
    async () => {
      const lines: string[] = [];
      let pass = true;
      const stateDir = mkdtempSync(join(tmpdir(), "trust-check-state-"));
      try {
        const config = configWith([T.r3k]);
        const spend = async (url: string, n: number, tag: string) => {
          const counts = new Map<string, number>();
          for (let i = 0; i < n; i++) {
            const a = await post(url, T.r3k.key, {
              model: FLEET_MODEL,
              max_tokens: 64,
              messages: [{ role: "user", content: `${tag} ${i} ${"Tell me about the weather. ".repeat(20)}` }],
            });
            const k = a.status === 200 ? "200" : `${a.status} ${a.code}${(a.message ?? "").includes("in flight") ? " (held)" : ""}`;
            counts.set(k, (counts.get(k) ?? 0) + 1);
            if (a.status === 429 && (a.message ?? "").includes("in flight")) await sleep(1000);
          }
          return [...counts].map(([k, v]) => `${v} x ${k}`).join(", ");
        };
        console.log("(a) starting the system as npm start does (one workerd process, a state folder) ...");
        let system = await startSystem({ port: 0, stateDir, fresh: true, config, timeFactorScale: TIME_FACTOR });
        let first: string;
        let l1: Ledger;
        try {
          first = await spend(system.url, 30, "before");
          l1 = await settledLedger(system.url, T.r3k.id);
        } finally {
          await system.stop();
        }
        console.log("(a) starting it again on the same state folder ...");
        system = await startSystem({ port: 0, stateDir, config, timeFactorScale: TIME_FACTOR });
        let l2: Ledger;
        let second: string;
        let l3: Ledger;
        try {
          l2 = await ledgerOf(system.url, T.r3k.id);
          second = await spend(system.url, 10, "after");
          l3 = await settledLedger(system.url, T.r3k.id);
        } finally {
          await system.stop();
        }
        const survived = l2.tokens === l1.tokens && l2.requests === l1.requests;
        // One request's hold (~150 prompt + 64) over the budget at most.
        pass &&=
          survived &&
          l3.tokens <= 3_000 + 400 &&
          l3.requests === l1.requests + (second.match(/(\d+) x 200/)?.[1] ? Number(second.match(/(\d+) x 200/)![1]) : 0);
        lines.push(
          `(a) before the restart: ${first}; ledger ${fmt(l1.tokens)} tokens in ${l1.requests} requests. After it: ledger ${fmt(l2.tokens)} tokens in ${l2.requests} requests (${survived ? "survived" : "LOST"}); 10 more requests: ${second}; ledger ${fmt(l3.tokens)} tokens against the 3,000 budget`,
        );
      } finally {
        rmSync(stateDir, { recursive: true, force: true });
      }

      const killed = async (label: string, command: string[], ready: RegExp) => {
        const dir = mkdtempSync(join(tmpdir(), "trust-check-kill-"));
        const child: ChildProcess = spawn(
          process.execPath,
          command.map((a) => a.replace("<tmp>", join(dir, "state"))),
          {
            cwd: ROOT,
            stdio: ["ignore", "pipe", "pipe"],
            env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
          },
        );
        let out = "";
        const up = new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`${label} did not come up in 180 s: ${out.slice(-500)}`)), 180_000);
          const take = (d: Buffer) => {
            out += d.toString();
            if (ready.test(out)) {
              clearTimeout(timer);
              resolve();
            }
          };
          child.stdout!.on("data", take);
          child.stderr!.on("data", take);
          child.once("exit", (code) => reject(new Error(`${label} exited (${code}) before it was up: ${out.slice(-500)}`)));
        });
        try {
          await up;
          await sleep(1000);
          const pids = tree(child.pid!);
          pids.delete(child.pid!);
          const ports = portsOf(pids);
          process.kill(child.pid!, "SIGKILL");
          const deadline = Date.now() + 15_000;
          while (Date.now() < deadline && (alive(pids).length > 0 || listening(ports).length > 0)) await sleep(250);
          const left = alive(pids);
          const held = listening(ports);
          pass &&= pids.size > 0 && ports.length > 0 && left.length === 0 && held.length === 0;
          lines.push(
            `(${label}) ${pids.size} processes under it listening on ${ports.length} ports (${ports.join(", ")}); 15 s after SIGKILL: ${left.length} still running${left.length ? ` (${left.join(", ")})` : ""}, ${held.length} ports still listened on${held.length ? ` (${held.join(", ")})` : ""}`,
          );
          // Anything left is this script's to end (by its pid, never by name).
          for (const pid of left)
            try {
              process.kill(pid, "SIGKILL");
            } catch {
              // gone
            }
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      };
      const port = await freePort();
      await killed("b", [join(ROOT, "scripts", "start.ts"), "--port", String(port), "--state", "<tmp>", "--fresh"], /warmpath is up/);
      await killed("c", [join(ROOT, "scripts", "trust-check.ts"), "--child-workerd"], /READY /);
      return { now: lines.join(". "), pass };
    },
  );
}

// ------------------------------------------------------------------------------------------------

const started = Date.now();
await mainSystemChecks();
await check8();
const seconds = Math.round((Date.now() - started) / 1000);

const commit = (() => {
  try {
    const sha = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
    const dirty = execFileSync(
      "git",
      ["status", "--porcelain", "--untracked-files=no", "--", "src", "durable-objects", "scripts", "fleet"],
      {
        cwd: ROOT,
        encoding: "utf8",
      },
    ).trim();
    return dirty ? `${sha} (with uncommitted changes)` : sha;
  } catch {
    return "unknown";
  }
})();
const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");
const passed = results.filter((r) => r.pass).length;
const doc = `# Trust check: issue 31's attacks, tried again from outside

Generated by \`npm run trust-check${flags.only ? ` -- --only ${flags.only}` : ""}\` on ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC at commit ${commit}, in ${seconds} s
on a shared ${cpus().length}-core machine (load ${loadavg()[0]!.toFixed(1)} at the end). **${passed} of ${results.length} checks pass.**

What it runs (scripts/trust-check.ts): checks 1-7 on one system started by scripts/system.ts with
\`runtime: "workerd"\` (the edge and each region's worker in a workerd process of its own, as
deployed; a fresh temporary store), the default simulated fleet ${TIME_FACTOR}x faster than real time, and three
hostile nodes of the script's own: OpenAI-compatible HTTP servers serving the model
\`${HOSTILE_MODEL}\` in us-east, registered with the region's node token as the fleet's nodes register
(agent/report-loop.ts), recording every request they receive. Every check uses tenants of its own.
Check 8 starts the system as \`npm start\` does (its workers in one workerd process, a state folder), and \`npm start\` itself.
The "before" column is what issue 31 ("Trust the bill", "Why") found on the code before it.

| # | Check | What was tried | Before (issue 31) | Now | Result |
| - | ----- | -------------- | ----------------- | --- | ------ |
${results.map((r) => `| ${r.n} | ${cell(r.title)} | ${cell(r.tried)} | ${cell(r.before)} | ${cell(r.now)} | ${r.pass ? "pass" : "**FAIL**"} |`).join("\n")}
`;
mkdirSync(dirname(flags.out!), { recursive: true });
// Formatted as the repository's Markdown is (npm run format:check).
const prettierOptions = (await prettier.resolveConfig(flags.out!)) ?? {};
writeFileSync(flags.out!, await prettier.format(doc, { ...prettierOptions, parser: "markdown" }));
console.log(`\n${passed} of ${results.length} checks pass; wrote ${relative(process.cwd(), flags.out!)}`);
process.exit(passed === results.length ? 0 : 1);
