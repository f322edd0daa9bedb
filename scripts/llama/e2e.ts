/**
 * warmpath in front of real llama.cpp: three `llama-server` processes (built by ensure.ts from
 * node-llama-cpp's bundled source, serving a tiny generated model), each with a `warmpath-agent`,
 * behind the router as `npm start` runs it (its workers in one workerd process); the same small multi-user workload once per policy, measured by the
 * engines' own counters (`usage.prompt_tokens_details.cached_tokens`), not the router's belief.
 *
 *   npm run e2e:llama                 # warmpath, sticky, round-robin; writes docs/llama-e2e.md
 *   node scripts/llama/e2e.ts --policies warmpath --out /tmp/e2e.md
 *
 * The workload: three apps, each with a ~1,200-token system prompt (one of them with a tool and a
 * tool call in its history), seven users (three, two and two per app), three turns each, the users
 * in a fixed shuffled order per turn: every user resends the growing conversation, as chat clients do. Requests go one at a time (streamed, `max_tokens` 8), so each
 * time to first token is that request's own prefill. Each server has two slots (`-np 2`) and no
 * host-RAM prompt cache (`--cache-ram 0`): what a slot holds is exactly what the engine can reuse,
 * so where a request goes decides whether its prefix is computed again.
 *
 * After the warmpath run, one engine is killed and started again on the same port: its agent
 * deregisters it and registers it again with a new boot id, and the router drops its index entries.
 *
 * Then, on a system of its own (midstream.ts; `--no-midstream` skips it): a node killed while it
 * streams a long greedy answer, which the router finishes on another node; the seam is checked
 * against the engines' own logs of the prompts they were given and the chunks they streamed.
 *
 * Last, on a system of its own (places.ts; `--no-places` skips it): one engine with one slot, whose
 * place the router learns from it and refuses a request it cannot serve in time while the slot is
 * taken, instead of sending it to wait in the engine's queue.
 */
import type { ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { percentile } from "../../src/core/stats.ts";
import { startSystem, type System } from "../system.ts";
import { ensureLlama, type LlamaParts } from "./ensure.ts";
import { configFor, MODEL, nodes, startAgent, stopAgent, until } from "./harness.ts";
import { formatMidstream, runMidstream, type MidstreamRun } from "./midstream.ts";
import { formatPlaces, runPlaces, type PlacesRun } from "./places.ts";
import { text } from "./text.ts";
import { startLlamaServer } from "./server.ts";

export const E2E_POLICIES = ["warmpath", "sticky", "round-robin"] as const;
const NODES = 3;
const APPS = 3;
/** Seven users (three, two and two per app): not a multiple of the node count, so no rotation lines up with the apps by chance. */
const USERS = 7;
const TURNS = 3;
const SYSTEM_WORDS = 1_200;
/** Turns of the lone conversation that checks a growing chat stays cached. */
const CHAT_TURNS = 4;

const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Weather by city",
      parameters: { type: "object", properties: { city: { type: "string" } } },
    },
  },
];

interface Message {
  role: string;
  content: string | null;
  tool_calls?: unknown[];
  tool_call_id?: string;
}

/** User `u`'s conversation up to turn `t` (0-based): the growing history a client resends. */
export function conversation(u: number, t: number, app = u % APPS): { app: number; messages: Message[]; tools?: unknown[] } {
  const messages: Message[] = [{ role: "system", content: `App ${app}. ` + text(SYSTEM_WORDS, 100 + app) }];
  for (let k = 0; k <= t; k++) {
    messages.push({ role: "user", content: text(24, 1_000 + u * 10 + k) });
    if (k === t) break;
    if (app >= 2 && k === 0) {
      // The tool app: a tool call and its result in the history, rendered by the chat template.
      messages.push({
        role: "assistant",
        content: null,
        tool_calls: [{ id: `call_${u}`, type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }],
      });
      messages.push({ role: "tool", tool_call_id: `call_${u}`, content: "4 C and rain" });
    }
    messages.push({ role: "assistant", content: text(16, 2_000 + u * 10 + k) });
  }
  return app >= 2 ? { app, messages, tools: TOOLS } : { app, messages };
}

/** The users' order in turn `t`: a fixed shuffle per turn (users do not arrive in id order). */
export function turnOrder(t: number): number[] {
  const order = Array.from({ length: USERS }, (_, u) => u);
  let s = 7_919 * (t + 1);
  for (let i = order.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    const j = (s >>> 8) % (i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

export interface Sample {
  user: number;
  turn: number;
  app: number;
  node: string;
  decision: string;
  prefixMatch: string;
  promptTokens: number;
  cachedTokens: number;
  ttftMs: number;
  /** The engine's own time for the prompt's uncached part (llama-server's `timings.prompt_ms`). */
  promptMs: number;
}

export interface PolicyRun {
  policy: string;
  samples: Sample[];
  promptTokens: number;
  cachedTokens: number;
  hitRate: number;
  ttftP50Ms: number;
  ttftMeanMs: number;
  /**
   * The engines' own prefill time over the run (their `timings.prompt_ms`): the compute the cache
   * saved, without the client's and router's scheduling on a shared machine in it.
   */
  enginePromptMs: number;
  /** The router's predicted cached share against the engines' measured one (within one engine block). */
  agreed: number;
  compared: number;
  decisions: Record<string, number>;
  /**
   * After the run (warmpath): one user alone in a new app with a tool, CHAT_TURNS turns, each
   * resending the whole conversation with a tool call and its result in it.
   */
  chat?: Sample[] | undefined;
  /** After the run: an engine killed and restarted, found by its agent and dropped from the index. */
  restart?: { node: string; indexBlocksBefore: number; detectedMs: number; indexBlocksAfter: number } | undefined;
}

async function send(system: System, u: number, t: number, app?: number): Promise<Sample> {
  const { app: appId, messages, tools } = conversation(u, t, app);
  const started = performance.now();
  const res = await fetch(`${system.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEV_API_KEY}`, "content-type": "application/json", "x-session-id": `user-${u}` },
    body: JSON.stringify({ model: MODEL, stream: true, stream_options: { include_usage: true }, max_tokens: 8, messages, tools }),
  });
  if (res.status !== 200) throw new Error(`user ${u} turn ${t}: HTTP ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let body = "";
  let ttftMs = -1;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (ttftMs < 0) ttftMs = performance.now() - started;
    body += decoder.decode(value, { stream: true });
  }
  const usageLine = body
    .split("\n")
    .filter((l) => l.startsWith("data: {") && l.includes('"usage"'))
    .at(-1);
  const last = usageLine
    ? (JSON.parse(usageLine.slice(6)) as {
        usage?: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
        timings?: { prompt_ms?: number };
      })
    : undefined;
  const usage = last?.usage;
  if (!usage) throw new Error(`user ${u} turn ${t}: no usage in the stream`);
  const promptMs = last?.timings?.prompt_ms;
  if (typeof promptMs !== "number") throw new Error(`user ${u} turn ${t}: no timings.prompt_ms in llama-server's usage event`);
  return {
    user: u,
    turn: t,
    app: appId,
    node: res.headers.get("x-warmpath-node") ?? "?",
    decision: res.headers.get("x-warmpath-decision") ?? "?",
    prefixMatch: res.headers.get("x-warmpath-prefix-match") ?? "?",
    promptTokens: usage.prompt_tokens,
    cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    ttftMs,
    promptMs,
  };
}

const startServer = (parts: LlamaParts, port?: number) =>
  startLlamaServer({ binary: parts.binary, model: parts.model, parallel: 2, cacheRam: 0, alias: MODEL, ...(port ? { port } : {}) });

export async function runPolicy(parts: LlamaParts, policy: string, log: (line: string) => void): Promise<PolicyRun> {
  const servers = await Promise.all(Array.from({ length: NODES }, () => startServer(parts)));
  let system: System | undefined;
  const agents: ChildProcess[] = [];
  try {
    system = await startSystem({ port: 0, fleetFile: null, config: configFor(policy) });
    const sys = system;
    servers.forEach((s, i) => agents.push(startAgent(sys, `llama-${i + 1}`, s)));
    await until(`${NODES} agents to register`, 30_000, async () => ((await nodes(sys)).length === NODES ? true : undefined));

    const samples: Sample[] = [];
    for (let t = 0; t < TURNS; t++) {
      for (const u of turnOrder(t)) samples.push(await send(sys, u, t));
    }
    // Usage reaches the region object after each stream ends.
    const state = await until("every answer to be recorded", 10_000, async () => {
      const ns = await nodes(sys);
      return ns.reduce((n, x) => n + x.metrics.measuredRequests, 0) >= samples.length ? ns : undefined;
    });
    const promptTokens = samples.reduce((n, s) => n + s.promptTokens, 0);
    const cachedTokens = samples.reduce((n, s) => n + s.cachedTokens, 0);
    const ttfts = samples.map((s) => s.ttftMs).sort((a, b) => a - b);
    const decisions: Record<string, number> = {};
    for (const s of samples) decisions[s.decision] = (decisions[s.decision] ?? 0) + 1;
    const run: PolicyRun = {
      policy,
      samples,
      promptTokens,
      cachedTokens,
      hitRate: cachedTokens / promptTokens,
      ttftP50Ms: percentile(ttfts, 0.5),
      ttftMeanMs: ttfts.reduce((a, b) => a + b, 0) / ttfts.length,
      enginePromptMs: samples.reduce((n, s) => n + s.promptMs, 0),
      agreed: state.reduce((n, x) => n + x.metrics.agreed, 0),
      compared: state.reduce((n, x) => n + x.metrics.compared, 0),
      decisions,
    };
    log(
      `[e2e] ${policy}: hit ${(100 * run.hitRate).toFixed(1)}%, TTFT p50 ${run.ttftP50Ms.toFixed(0)} ms, agreement ${run.agreed}/${run.compared}`,
    );

    if (policy === "warmpath") {
      // One conversation alone (a fourth app, with a tool): every turn should reuse the whole previous one.
      run.chat = [];
      for (let t = 0; t < CHAT_TURNS; t++) run.chat.push(await send(sys, USERS, t, APPS));
      // Kill the engine holding the most, start it again on its port: its cache is gone.
      const victim = state.reduce((a, b) => (b.indexBlocks > a.indexBlocks ? b : a));
      const i = Number(victim.id.split("-")[1]) - 1;
      const port = servers[i]!.port;
      const killedAt = Date.now();
      await servers[i]!.kill();
      servers[i] = await startServer(parts, port);
      const after = await until(`${victim.id}'s index entries to be dropped`, 20_000, async () => {
        const n = (await nodes(sys)).find((x) => x.id === victim.id);
        return n && n.indexBlocks === 0 ? n : undefined;
      });
      run.restart = {
        node: victim.id,
        indexBlocksBefore: victim.indexBlocks,
        detectedMs: Date.now() - killedAt,
        indexBlocksAfter: after.indexBlocks,
      };
      log(`[e2e] restart of ${victim.id}: its ${victim.indexBlocks} index blocks dropped after ${run.restart.detectedMs} ms`);
    }
    return run;
  } finally {
    await Promise.all(agents.map(stopAgent));
    await system?.stop();
    await Promise.all(servers.map((s) => s.stop()));
  }
}

export async function runLlamaE2e(
  policies: readonly string[],
  log: (line: string) => void = (l) => console.error(l),
  options: { midstream?: boolean; places?: boolean } = {},
): Promise<{ parts: LlamaParts; runs: PolicyRun[]; midstream: MidstreamRun | undefined; places: PlacesRun | undefined }> {
  const parts = ensureLlama(log);
  const runs: PolicyRun[] = [];
  for (const policy of policies) runs.push(await runPolicy(parts, policy, log));
  const midstream = options.midstream === false ? undefined : await runMidstream(parts, log);
  const places = options.places === false ? undefined : await runPlaces(parts, log);
  return { parts, runs, midstream, places };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The results as markdown: what docs/llama-e2e.md holds. */
export function formatE2e(
  version: string,
  runs: readonly PolicyRun[],
  command: string,
  midstream?: MidstreamRun,
  places?: PlacesRun,
): string {
  const rows = runs.map(
    (r) =>
      `| ${r.policy} | ${pct(r.hitRate)} | ${(r.promptTokens - r.cachedTokens).toLocaleString("en-US")} | ${Math.round(r.enginePromptMs).toLocaleString("en-US")} | ${r.ttftP50Ms.toFixed(0)} | ${r.ttftMeanMs.toFixed(0)} | ${r.compared ? pct(r.agreed / r.compared) : "–"} (${r.agreed}/${r.compared}) | ${Object.entries(
        r.decisions,
      )
        .map(([d, n]) => `${d} ${n}`)
        .join(", ")} |`,
  );
  const restart = runs.find((r) => r.restart)?.restart;
  const chat = runs.find((r) => r.chat)?.chat;
  return [
    "# warmpath in front of real llama.cpp",
    "",
    `Generated by \`${command}\` (scripts/llama/e2e.ts; do not edit by hand). llama.cpp ${version}, built from node-llama-cpp 3.21.1's bundled source; a tiny generated model (scripts/llama/make-gguf.ts), three \`llama-server\` processes (\`-np 2 --cache-ram 0 -t 1\`), each with a \`warmpath-agent\`, behind the router as \`npm start\` runs it (its workers in one workerd process). The workload: three apps with ~1,200-token system prompts (one with a tool call in its history), seven users (three, two and two per app), three turns each in a shuffled order (21 streamed requests, one at a time). Cached tokens are the engines' own \`usage.prompt_tokens_details.cached_tokens\` and prefill time their own \`timings.prompt_ms\`, summed over the 21 requests; TTFT is wall time to the first streamed byte on a 2-core machine, so it varies from run to run, while the cached tokens are reproducible.`,
    "",
    "| policy | engine-measured hit rate | prefill tokens computed | engines' prefill time (ms, all 21) | TTFT p50 (ms) | TTFT mean (ms) | router prediction agreed with the engine | decisions |",
    "|---|---:|---:|---:|---:|---:|---:|---|",
    ...rows,
    "",
    chat
      ? `Growing chat (warmpath; one user alone in a fourth app, a tool call and its result in the history, ${chat.length} turns): engine-cached / prompt tokens per turn ${chat.map((c) => `${c.cachedTokens} / ${c.promptTokens}`).join(", ")}, all on \`${chat[0]!.node}\`.`
      : "",
    "",
    restart
      ? `Restart: \`${restart.node}\` (${restart.indexBlocksBefore} index blocks) was killed and started again on its port; its agent deregistered it and registered it again with a new boot id, and the router had dropped its index entries ${(restart.detectedMs / 1000).toFixed(1)} s after the kill.`
      : "",
    "",
    ...(midstream ? [formatMidstream(midstream), ""] : []),
    ...(places ? [formatPlaces(places), ""] : []),
  ].join("\n");
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      policies: { type: "string" },
      out: { type: "string" },
      "no-midstream": { type: "boolean", default: false },
      "no-places": { type: "boolean", default: false },
    },
  });
  const policies = values.policies ? values.policies.split(",") : [...E2E_POLICIES];
  const { parts, runs, midstream, places } = await runLlamaE2e(policies, undefined, {
    midstream: !values["no-midstream"],
    places: !values["no-places"],
  });
  const command = [
    "node scripts/llama/e2e.ts",
    values.policies ? `--policies ${values.policies}` : "",
    values["no-midstream"] ? "--no-midstream" : "",
    values["no-places"] ? "--no-places" : "",
    values.out ? `--out ${values.out}` : "",
  ]
    .filter(Boolean)
    .join(" ");
  const md = formatE2e(
    parts.version.split("\n")[0] ?? "",
    runs,
    values.out === "docs/llama-e2e.md" && !values.policies && !values["no-midstream"] && !values["no-places"]
      ? "npm run e2e:llama"
      : command,
    midstream,
    places,
  );
  if (values.out) writeFileSync(values.out, md);
  console.log(md);
}
