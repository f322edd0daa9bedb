/**
 * A node killed mid-stream, against real llama.cpp (docs/CONTINUATION.md): a long greedy streamed
 * chat completion goes through warmpath with the official OpenAI SDK; once the client holds some of
 * its text, the `llama-server` serving it (the `x-warmpath-node` header) is killed (SIGKILL). The
 * region worker continues the answer on another node. What is checked, and on whose word:
 *
 * - the client (the SDK, plus the raw bytes it read): one stream, no error, one role chunk, one id,
 *   a `finish_reason`, the whole token budget in its usage, and `data: [DONE]`;
 * - the engines' own logs, which these servers write because they run with
 *   `--log-prompts-dir <dir>` (llama-server writes every prompt it is given, after the chat
 *   template, to a file) and `-lv 5` (debug: `http: streamed chunk: <bytes>` after each write to
 *   the socket, `next token: <id> '<piece>'` for each token sampled, `prefill token: <id>` for the
 *   generation prompt's tokens, `new prompt, ... task.n_tokens = N`), straight to a file:
 *   - the second engine's prompt is the first engine's prompt (which ends with the template's
 *     `<|im_start|>assistant\n`) followed by exactly the text the first engine streamed: the
 *     carried text. llama-server logs from a thread of its own, after the write it logs, so the
 *     lines of its last chunk or two can die with it: the part of the carried text its log of this
 *     stream lacks is checked against its log of the same request served uninterrupted;
 *   - that text tokenised back to the very token ids the first engine had sampled, and the second
 *     engine's prompt is longer by exactly that many tokens; its budget (`n_remaining` + 1 at its
 *     first token) is `max_tokens` less them;
 *   - the client's text is the carried text followed by what the second engine streamed: nothing
 *     repeated or lost at the seam;
 * - the same request served uninterrupted before (greedy, so deterministic): how much of the
 *   continued answer is identical to it.
 *
 * The tiny model's plain greedy output is one token (" mo") repeated, which would leave the seam
 * nothing to show but a length; `frequency_penalty: 1` (an OpenAI parameter llama-server applies
 * before its temperature-0 argmax, over a window it seeds from the prompt's tokens) makes the
 * greedy text varied and still deterministic, and the continuing engine sees the same window as long
 * as the carried text tokenises back to the same tokens.
 *
 * Run on a system of its own (three servers, three agents, the router as `npm start` runs it, the warmpath policy), after
 * the policy runs in e2e.ts, so the debug logging does not touch their timings.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import type { ContinuationLog, DecisionLine, StreamContinuedLine } from "../../src/contracts/decision-line.ts";
import type { System } from "../system.ts";
import type { LlamaParts } from "./ensure.ts";
import { MODEL, nodes, startAgent, startWarmpath, stopAgent, until } from "./harness.ts";
import { startLlamaServer, type LlamaServer } from "./server.ts";
import { text } from "./text.ts";

const NODES = 3;
/** ~1.5 ms a token on these CPUs with debug logging: about four seconds of streaming. */
export const MIDSTREAM_MAX_TOKENS = 3_000;
/** The client's text when the node is killed. */
export const KILL_AFTER_CHARS = 200;
const SAMPLING = { temperature: 0, frequency_penalty: 1 } as const;

/** The request: a system prompt of its own (no other run's prefix) and one user turn. */
export function midstreamMessages(): ChatCompletionMessageParam[] {
  return [
    { role: "system", content: "App midstream. " + text(300, 4_242) },
    { role: "user", content: text(24, 4_243) },
  ];
}

/** One streamed answer as the client saw it. */
export interface ClientStream {
  node: string;
  decision: string;
  text: string;
  /** Content chunks, and when each came (ms since the request, characters so far). */
  chunks: number;
  arrivals: Array<{ ms: number; chars: number }>;
  finishReason: string | null;
  usage: { prompt_tokens: number; completion_tokens: number } | undefined;
  /** What the SDK threw, if anything. */
  error?: string | undefined;
  /** From the raw bytes the SDK read: `data: [DONE]` came; chunks with a role; distinct ids and models. */
  done: boolean;
  roleChunks: number;
  ids: number;
  models: string[];
  ms: number;
}

/** One continuation as the router's decision line tells it (src/contracts/decision-line.ts). */
export type LoggedContinuation = ContinuationLog;

/** What one engine's own log and prompt files say about one request. */
export interface EngineSide {
  node: string;
  /** The prompt it was given, after the chat template (`--log-prompts-dir`). */
  prompt: string;
  /** `new prompt, ... task.n_tokens`. */
  promptTokens: number | undefined;
  /** Content of its `http: streamed chunk` lines (written after each write to the socket). */
  streamedChunks: number;
  streamedText: string;
  /** Token ids of its `next token` lines (each sampled token). */
  sampled: number[];
  /** Token ids of its `prefill token` lines (the generation prompt, carried text included). */
  prefill: number[];
  /** `n_remaining` + 1 at its first token: the `max_tokens` it was given. */
  budget: number | undefined;
}

export interface MidstreamChecks {
  /** The second engine's prompt is the first's followed by the carried text. */
  promptExtendsFirst: boolean;
  /** How many more tokens the second engine's prompt has (its `task.n_tokens` less the first's). */
  carriedTokens: number | undefined;
  /** Characters of the carried text the first engine's log of this stream shows it streamed. */
  carriedInFirstLog: number;
  /**
   * The carried text is what the first engine streamed: its log of this stream agrees as far as it
   * goes, and the engine's log of the same request uninterrupted has the whole of it.
   */
  carriedStreamedByFirst: boolean;
  /** The carried text tokenised back to the token ids the first engine sampled. */
  idsMatch: boolean;
  /** The second engine was given `max_tokens` less the carried tokens. */
  budgetReduced: boolean;
  /** The client's text is the carried text followed by what the second engine streamed. */
  seamExact: boolean;
  /** The client's stream is one whole answer: no error, one role chunk, one id, a finish_reason, the whole budget, `[DONE]`. */
  clientWhole: boolean;
}

export interface MidstreamRun {
  maxTokens: number;
  /** The engine each node's agent reported. */
  engines: Record<string, string>;
  /** The same request uninterrupted, as the client saw it and as its engine logged it. */
  reference: ClientStream;
  referenceEngine: EngineSide | undefined;
  /** The killed stream, as the client saw it. */
  client: ClientStream;
  victim: string;
  killedAfterChars: number;
  /** Client-side: from the kill to the first character past the carried text. */
  resumedAfterMs: number | undefined;
  /** The router's decision line for the request (undefined: none logged). */
  continuations: LoggedContinuation[] | undefined;
  first: EngineSide;
  /** The engine that continued, found by the prompt it was given during the request. */
  second: EngineSide | undefined;
  carried: string;
  checks: MidstreamChecks;
  /** Against the uninterrupted answer: whether identical, and characters identical from the start. */
  sameAsReference: boolean;
  commonChars: number;
}

/** The lines of a server's log these checks read (its debug output is otherwise ~15 lines a token). */
const KEEP = /streamed chunk: |^data: |prefill token: |new prompt, |next token: /;

interface Watched {
  id: string;
  server: LlamaServer;
  /** Its stdout and stderr (server.ts `logFile`), and its `--log-prompts-dir`. */
  logFile: string;
  promptDir: string;
}

/** The lines of `w`'s log these checks read, as far as it has written it. */
const logLines = (w: Watched): string[] =>
  existsSync(w.logFile)
    ? readFileSync(w.logFile, "utf8")
        .split("\n")
        .filter((l) => KEEP.test(l))
    : [];

/** Where each server's log and prompt files stood at a moment: what came after belongs to what followed. */
interface Mark {
  lines: number;
  prompts: number;
}

/** The content a server streamed, by response id, from its `http: streamed chunk` lines. */
export function streamedByEngine(lines: readonly string[]): Map<string, { text: string; chunks: number }> {
  const out = new Map<string, { text: string; chunks: number }>();
  for (const line of lines) {
    // A logged chunk is `... http: streamed chunk: data: {...}` and, when one write held several
    // events, the following lines `data: {...}`.
    const at = line.indexOf("data: {");
    if (at < 0 || !(at === 0 || line.includes("streamed chunk: "))) continue;
    let chunk: { id?: string; choices?: Array<{ delta?: { content?: string | null } }> };
    try {
      chunk = JSON.parse(line.slice(at + 6)) as typeof chunk;
    } catch {
      continue;
    }
    const content = chunk.choices?.[0]?.delta?.content;
    if (!chunk.id || typeof content !== "string" || content === "") continue;
    const s = out.get(chunk.id) ?? { text: "", chunks: 0 };
    s.text += content;
    s.chunks++;
    out.set(chunk.id, s);
  }
  return out;
}

const numbers = (lines: readonly string[], re: RegExp): number[] => lines.map((l) => re.exec(l)).flatMap((m) => (m ? [Number(m[1])] : []));

function commonPrefix(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

const sameIds = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** Files a server wrote to its `--log-prompts-dir` (named by the millisecond), oldest first. */
const promptFiles = (dir: string): string[] => readdirSync(dir).sort();

const mark = (w: Watched): Mark => ({ lines: logLines(w).length, prompts: promptFiles(w.promptDir).length });

/** What `w` logged between two marks (`to` undefined: until now); undefined if it was given no prompt. */
function engineSide(w: Watched, from: Mark, to?: Mark): EngineSide | undefined {
  const files = promptFiles(w.promptDir).slice(from.prompts, to?.prompts);
  if (!files.length) return undefined;
  const lines = logLines(w).slice(from.lines, to?.lines);
  const stream = [...streamedByEngine(lines).values()].at(-1) ?? { text: "", chunks: 0 };
  const firstToken = /n_gen = 1, n_remaining = (\d+),/.exec(lines.find((l) => l.includes("n_gen = 1, ")) ?? "");
  return {
    node: w.id,
    prompt: readFileSync(join(w.promptDir, files.at(-1)!), "utf8"),
    promptTokens: numbers(lines, /task\.n_tokens = (\d+)/).at(-1),
    streamedChunks: stream.chunks,
    streamedText: stream.text,
    sampled: numbers(lines, /next token:\s+(\d+) /),
    prefill: numbers(lines, /prefill token:\s+(\d+) =/),
    budget: firstToken ? Number(firstToken[1]) + 1 : undefined,
  };
}

async function streamThrough(system: System, onText?: (soFar: string, node: string) => void): Promise<ClientStream> {
  let raw: Promise<string> = Promise.resolve("");
  const client = new OpenAI({
    baseURL: `${system.url}/v1`,
    apiKey: DEV_API_KEY,
    maxRetries: 0,
    timeout: 120_000,
    // The SDK stops at `data: [DONE]` without saying whether it came; a copy of the bytes it read
    // shows that, and the chunks' ids and roles.
    fetch: (async (input: string | URL | Request, init?: RequestInit) => {
      const res = await fetch(input, init);
      if (!res.body) return res;
      const [mine, copy] = res.body.tee();
      raw = new Response(copy).text();
      return new Response(mine, { status: res.status, statusText: res.statusText, headers: res.headers });
    }) as typeof fetch,
  });
  const started = performance.now();
  const out: ClientStream = {
    node: "?",
    decision: "?",
    text: "",
    chunks: 0,
    arrivals: [],
    finishReason: null,
    usage: undefined,
    done: false,
    roleChunks: 0,
    ids: 0,
    models: [],
    ms: 0,
  };
  try {
    const { data: stream, response } = await client.chat.completions
      .create(
        {
          model: MODEL,
          messages: midstreamMessages(),
          max_tokens: MIDSTREAM_MAX_TOKENS,
          ...SAMPLING,
          stream: true,
          stream_options: { include_usage: true },
        },
        { headers: { "x-session-id": "midstream" } },
      )
      .withResponse();
    out.node = response.headers.get("x-warmpath-node") ?? "?";
    out.decision = response.headers.get("x-warmpath-decision") ?? "?";
    for await (const chunk of stream) {
      if (chunk.usage) out.usage = { prompt_tokens: chunk.usage.prompt_tokens, completion_tokens: chunk.usage.completion_tokens };
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.finish_reason) out.finishReason = choice.finish_reason;
      const content = choice.delta?.content;
      if (content) {
        out.text += content;
        out.chunks++;
        out.arrivals.push({ ms: performance.now() - started, chars: out.text.length });
        onText?.(out.text, out.node);
      }
    }
  } catch (e) {
    out.error = e instanceof Error ? `${e.constructor.name}: ${e.message}` : String(e);
  }
  out.ms = performance.now() - started;
  const events = (await raw.catch(() => ""))
    .split("\n")
    .filter((l) => l.startsWith("data: "))
    .map((l) => l.slice(6));
  out.done = events.includes("[DONE]");
  const ids = new Set<string>();
  const models = new Set<string>();
  for (const e of events) {
    if (!e.startsWith("{")) continue;
    const j = JSON.parse(e) as { id?: string; model?: string; choices?: Array<{ delta?: { role?: string } }> };
    if (j.id) ids.add(j.id);
    if (j.model) models.add(j.model);
    if (j.choices?.[0]?.delta?.role) out.roleChunks++;
  }
  out.ids = ids.size;
  out.models = [...models];
  return out;
}

/** The checks, from what the client, the router and the engines said. */
export function midstreamChecks(
  run: Pick<MidstreamRun, "maxTokens" | "client" | "first" | "second" | "referenceEngine" | "carried">,
): MidstreamChecks {
  const { client, first, second, referenceEngine, carried } = run;
  const promptExtendsFirst = second !== undefined && first.prompt !== "" && second.prompt === first.prompt + carried && carried !== "";
  const carriedTokens =
    second?.promptTokens !== undefined && first.promptTokens !== undefined ? second.promptTokens - first.promptTokens : undefined;
  const carriedInFirstLog = commonPrefix(carried, first.streamedText);
  const k = carriedTokens ?? 0;
  const carriedIds = second && k > 0 ? second.prefill.slice(-k) : [];
  const loggedIds = Math.min(k, first.sampled.length);
  return {
    promptExtendsFirst,
    carriedTokens,
    carriedInFirstLog,
    carriedStreamedByFirst:
      carried !== "" &&
      carriedInFirstLog === Math.min(carried.length, first.streamedText.length) &&
      (referenceEngine?.streamedText.startsWith(carried) ?? false),
    idsMatch:
      k > 0 &&
      carriedIds.length === k &&
      sameIds(carriedIds.slice(0, loggedIds), first.sampled.slice(0, loggedIds)) &&
      sameIds(carriedIds, referenceEngine?.sampled.slice(0, k) ?? []),
    budgetReduced: second?.budget !== undefined && second.budget === run.maxTokens - k,
    seamExact: second !== undefined && promptExtendsFirst && client.text === carried + second.streamedText,
    clientWhole:
      client.error === undefined &&
      client.roleChunks === 1 &&
      client.ids === 1 &&
      client.finishReason !== null &&
      client.usage?.completion_tokens === run.maxTokens &&
      client.done,
  };
}

export async function runMidstream(parts: LlamaParts, log: (line: string) => void): Promise<MidstreamRun> {
  const logDir = mkdtempSync(join(tmpdir(), "warmpath-midstream-"));
  const watched: Watched[] = [];
  const agents: ChildProcess[] = [];
  const decisionLines: Array<DecisionLine | StreamContinuedLine> = [];
  /** The same lines as logged (the contract's parse leaves out fields it does not name), for decisions.jsonl. */
  const decisionJson: Array<Record<string, unknown>> = [];
  let system: System | undefined;
  try {
    for (let i = 0; i < NODES; i++) {
      const id = `llama-${i + 1}`;
      const promptDir = join(logDir, id);
      const logFile = join(logDir, `${id}.log`);
      mkdirSync(promptDir);
      const server = await startLlamaServer({
        binary: parts.binary,
        model: parts.model,
        parallel: 2,
        cacheRam: 0,
        alias: MODEL,
        extraArgs: ["--log-prompts-dir", promptDir, "-lv", "5"],
        logFile,
      });
      watched.push({ id, server, logFile, promptDir });
    }
    system = await startWarmpath((j) => {
      if (j.invalid !== undefined) log(`[e2e] a ${String(j.json.event)} line not as src/contracts/decision-line.ts has it: ${j.invalid}`);
      const known = j.decision ?? j.continued;
      if (known) {
        decisionLines.push(known);
        decisionJson.push(j.json);
      }
    });
    const sys = system;
    for (const w of watched) agents.push(startAgent(sys, w.id, w.server));
    const registered = await until(`${NODES} agents to register`, 30_000, async () => {
      const ns = await nodes(sys);
      return ns.length === NODES ? ns : undefined;
    });
    // The engine comes with the agents' reports; give them a few cycles if the first had none.
    const reported = await until("the agents' engines", 5_000, async () => {
      const ns = await nodes(sys);
      return ns.every((n) => n.engine !== undefined && n.engine !== "other") ? ns : undefined;
    }).catch(() => registered);
    const engines = Object.fromEntries(reported.map((n) => [n.id, n.engine ?? "(not shown)"]));

    // The same request uninterrupted: what greedy decoding gives with no seam.
    const beforeReference = watched.map(mark);
    const reference = await streamThrough(sys);
    log(`[e2e] mid-stream: uninterrupted on ${reference.node}, ${reference.text.length} chars in ${reference.ms.toFixed(0)} ms`);
    await new Promise((r) => setTimeout(r, 500)); // its engine's last log lines
    const beforeKill = watched.map(mark);
    const decisionsBefore = decisionLines.length;

    let victim: Watched | undefined;
    let killing: Promise<void> | undefined;
    let killedAt = 0;
    let killedAfterChars = 0;
    const started = performance.now();
    const client = await streamThrough(sys, (soFar, node) => {
      if (killing || soFar.length < KILL_AFTER_CHARS) return;
      victim = watched.find((w) => w.id === node);
      if (!victim) throw new Error(`x-warmpath-node ${node} is none of the servers`);
      killedAt = performance.now() - started;
      killedAfterChars = soFar.length;
      killing = victim.server.kill();
    });
    await killing;
    if (!victim) throw new Error(`the stream ended before ${KILL_AFTER_CHARS} characters: ${client.error ?? client.text.length}`);
    const v = victim;
    log(
      `[e2e] mid-stream: ${v.id} killed after ${killedAfterChars} chars; the client got ${client.text.length} chars, finish ${client.finishReason}, [DONE] ${client.done}${client.error ? `, error ${client.error}` : ""}`,
    );
    // The decision line is written when the stream ends; the engines' logs trail by a few ms.
    await until("the request's decision line", 5_000, async () =>
      decisionLines.slice(decisionsBefore).some((d) => d.event === "request") ? true : undefined,
    ).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 500));
    const decision = decisionLines.slice(decisionsBefore).find((d) => d.event === "request");
    const continuations = decision?.event === "request" ? decision.continuations : undefined;

    const referenceWatched = watched.find((w) => w.id === reference.node);
    const referenceEngine = referenceWatched
      ? engineSide(referenceWatched, beforeReference[watched.indexOf(referenceWatched)]!, beforeKill[watched.indexOf(referenceWatched)])
      : undefined;
    const first = engineSide(v, beforeKill[watched.indexOf(v)]!) ?? {
      node: v.id,
      prompt: "",
      promptTokens: undefined,
      streamedChunks: 0,
      streamedText: "",
      sampled: [],
      prefill: [],
      budget: undefined,
    };
    const second = watched.flatMap((w, i) => (w === v ? [] : (engineSide(w, beforeKill[i]!) ?? []))).at(0);
    const carried = second && first.prompt !== "" && second.prompt.startsWith(first.prompt) ? second.prompt.slice(first.prompt.length) : "";
    const resumed = client.arrivals.find((a) => a.chars > carried.length);
    const partial = { maxTokens: MIDSTREAM_MAX_TOKENS, client, first, second, referenceEngine, carried };
    const run: MidstreamRun = {
      ...partial,
      engines,
      reference,
      victim: v.id,
      killedAfterChars,
      resumedAfterMs: carried && resumed ? resumed.ms - killedAt : undefined,
      continuations,
      checks: midstreamChecks(partial),
      sameAsReference: client.text === reference.text,
      commonChars: commonPrefix(client.text, reference.text),
    };
    log(
      `[e2e] mid-stream: continued on ${second?.node ?? "?"} after ${carried.length} carried chars (${run.checks.carriedTokens ?? "?"} tokens); seam exact ${run.checks.seamExact}; same as uninterrupted for ${run.commonChars} of ${reference.text.length} chars`,
    );
    return run;
  } finally {
    await Promise.all(agents.map(stopAgent));
    await system?.stop();
    await Promise.all(watched.map((w) => w.server.stop()));
    if (process.env.WARMPATH_KEEP_LLAMA_LOGS) {
      writeFileSync(join(logDir, "decisions.jsonl"), decisionJson.map((d) => JSON.stringify(d)).join("\n") + "\n");
      log(`[e2e] mid-stream: engine logs and prompts kept in ${logDir}`);
    } else rmSync(logDir, { recursive: true, force: true });
  }
}

const n = (x: number) => x.toLocaleString("en-US");
/** `s` as a Markdown code span (the model's text may hold backticks). */
function code(s: string): string {
  const longest = Math.max(0, ...(s.match(/`+/g) ?? []).map((r) => r.length));
  const fence = "`".repeat(longest + 1);
  return longest ? `${fence} ${s} ${fence}` : `${fence}${s}${fence}`;
}
const escaped = (s: string) => JSON.stringify(s).slice(1, -1);
const around = (s: string, at: number) => escaped(s.slice(Math.max(0, at - 12), at + 12));
const no = (ok: boolean, what: string) => (ok ? what : `**not** ${what}`);

/** The scenario's section of docs/llama-e2e.md. */
export function formatMidstream(m: MidstreamRun): string {
  const c = m.continuations?.[0];
  const s = m.second;
  const k = m.checks;
  const seamAt = m.carried.length;
  const engines = Object.entries(m.engines)
    .map(([id, e]) => `${id} \`${e}\``)
    .join(", ");
  const streamed = !k.carriedStreamedByFirst
    ? `, **not** the text \`${m.victim}\` had streamed (its log of this stream: ${n(m.first.streamedChunks)} chunks, ${n(m.first.streamedText.length)} characters)`
    : k.carriedInFirstLog >= seamAt
      ? `, the text \`${m.victim}\` had streamed (its log of this stream: ${n(m.first.streamedChunks)} chunks, ${n(m.first.streamedText.length)} characters, before it died)`
      : `, the text \`${m.victim}\` had streamed: its log of this stream has the first ${n(k.carriedInFirstLog)} of them (${n(m.first.streamedChunks)} chunks; the rest reached the router, but their log lines died with the process), its log of the same request served uninterrupted all of them`;
  const plural = (x: number, what: string) => `${n(x)} ${what}${x === 1 ? "" : "s"}`;
  return [
    `Node killed mid-stream (on a system of its own: warmpath; three engines at \`-lv 5 --log-prompts-dir\`, so that each logs every prompt it is given, every token it samples and every chunk it writes; engines as their agents reported them: ${engines}): a greedy streamed chat completion (\`temperature: 0\`, \`frequency_penalty: 1\`, \`max_tokens: ${n(m.maxTokens)}\`; the official OpenAI SDK) went to \`${m.victim}\` (\`${m.client.decision}\`), and once the client held ${n(m.killedAfterChars)} characters, \`${m.victim}\` was killed (SIGKILL). (Without the penalty, the tiny model's greedy text is one token repeated, and the seam would show nothing but a length; llama-server applies the penalty before its argmax over a window it seeds from the prompt's tokens, so the text stays deterministic and a continuation that gets the same tokens back sees the same window.)`,
    "",
    `- The client: ${m.client.error ? `**error** \`${m.client.error}\`` : "no error"}; ${n(m.client.text.length)} characters in ${n(m.client.chunks)} chunks, ${plural(m.client.roleChunks, "role chunk")}, ${plural(m.client.ids, "id")}, finish_reason \`${m.client.finishReason}\`, usage ${m.client.usage ? `${n(m.client.usage.completion_tokens)} completion tokens` : "none"}, \`data: [DONE]\` ${m.client.done ? "received" : "**missing**"}. ${(m.client.ms / 1000).toFixed(1)} s in all (uninterrupted: ${(m.reference.ms / 1000).toFixed(1)} s); the text went on ${m.resumedAfterMs !== undefined ? `${n(Math.round(m.resumedAfterMs))} ms` : "?"} after the kill.`,
    c
      ? `- The router (its decision line): \`${c.node}\` failed (\`${c.reason}\`), ${n(c.tokens_carried)} tokens carried, continued on \`${c.to_node ?? "?"}\` (outcome \`${c.outcome}\`${c.first_byte_ms !== undefined ? `, its first byte ${n(c.first_byte_ms)} ms after the failure` : ""}).`
      : "- The router: **no continuation in its decision line**.",
    s
      ? `- The engines' logs: \`${s.node}\`'s prompt was \`${m.victim}\`'s (${m.first.promptTokens ?? "?"} tokens, ending in the template's \`<|im_start|>assistant\\n\`) ${no(k.promptExtendsFirst, `followed by exactly ${n(seamAt)} characters`)}${streamed}. They came to ${s.promptTokens ?? "?"} prompt tokens, ${k.carriedTokens !== undefined ? n(k.carriedTokens) : "?"} more, ${no(k.idsMatch, "the very token ids")} \`${m.victim}\` had sampled; \`${s.node}\` was given ${s.budget !== undefined ? n(s.budget) : "?"} tokens (${no(k.budgetReduced, "`max_tokens` less them")}) and streamed ${n(s.streamedChunks)} chunks (${n(s.streamedText.length)} characters).`
      : "- The engines' logs: **no other engine was given a prompt**.",
    `- The seam: the client's text ${k.seamExact ? "is" : "is **not**"} the carried text followed by what the second engine streamed${k.seamExact ? `, nothing repeated or lost at the seam: ${code(`…${escaped(m.carried.slice(-16))}`)} then ${code(`${escaped((s?.streamedText ?? "").slice(0, 16))}…`)}` : ""}.`,
    m.sameAsReference
      ? `- Against the same request served uninterrupted (on \`${m.reference.node}\`): identical, all ${n(m.reference.text.length)} characters.`
      : `- Against the same request served uninterrupted (on \`${m.reference.node}\`): identical for ${n(m.commonChars)} of ${n(m.reference.text.length)} characters (${n(m.commonChars - seamAt)} past the seam), then different (${code(`…${around(m.reference.text, m.commonChars)}…`)} uninterrupted, ${code(`…${around(m.client.text, m.commonChars)}…`)} continued).${m.commonChars > seamAt ? " They part after the seam, not at it: the continuing engine had the same token ids, but computed their KV cache in one prompt batch where the first engine had computed it one token at a time; the rounding differs, and where two tokens are all but tied, greedy decoding can take the other one (most likely: without the router, a continuation from the first few tokens alone, or on a server with 2-token batches, \`-ub 2\`, parts later or not at all)." : ""}`,
  ].join("\n");
}
