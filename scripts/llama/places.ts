/**
 * A node's places, against real llama.cpp (docs/ADMISSION.md, "A node's places"): one
 * `llama-server` with one slot (`-np 1`) and its `warmpath-agent`, behind the router as `npm start`
 * runs it (warmpath, admission on by default). What is checked, and on whose word:
 *
 * - the engine's own `/props` says one slot (`total_slots`), and the router's state shows the node
 *   with one place (`maxRunning`): the agent read it from the engine, nobody configured it;
 * - two long answers, one at a time, teach the router how long a place is held after the first
 *   byte (`decodeMsMean` in its state);
 * - while a third long answer holds the only slot, a short request arrives. Its objective (a time
 *   to first token of max(1 s, 5 x its cold prefill): about 1 s) is shorter than the wait for the
 *   place (a long answer's hold), so the router answers it at once, 429 with `Retry-After`, from
 *   its own prediction: its refusal line shows no node tried and the first token it predicted
 *   (`estimated_ttft_ms`, past `objective_ms`), its state the wait for the place (`slotWaitMs`),
 *   and the refusal reaches the client while the long answer is still streaming, which a request
 *   sent to the engine could not (the engine's one slot was busy);
 * - the same request from a tenant whose objective (60 s) covers the wait is held in the region's
 *   queue (`x-warmpath-queued-ms`, its decision line's `queued_ms`) and released when the long
 *   answer ends, not sent to wait in the engine's;
 * - once the long answer has ended, the same short request is served by the engine.
 *
 * Without the places (an engine queue the router cannot see), the short request would have been
 * sent to wait in the engine's own queue behind the long answer and answered seconds late
 * (bench/FLEETS.md measures what that costs a fleet). The answers are long enough that the margin
 * does not depend on this machine's speed: a hold of 3,000 tokens is seconds at any speed these
 * tiny models run at, and a slower machine only lengthens it.
 */
import type { ChildProcess } from "node:child_process";
import { DEV_API_KEY, DEV_API_KEY_2 } from "../../src/config/dev-credentials.ts";
import type { DecisionLine } from "../../src/contracts/decision-line.ts";
import type { RefusalDetail } from "../../src/http/errors.ts";
import { EXPLAIN, REQUEST_ID } from "../../src/contracts/headers.ts";
import type { System } from "../system.ts";
import type { LlamaParts } from "./ensure.ts";
import { configFor, MODEL, nodes, startAgent, startWarmpath, stopAgent, until, type NodeState } from "./harness.ts";
import { startLlamaServer } from "./server.ts";
import { text } from "./text.ts";

const NODE = "llama-1";
/** Tokens of each long answer: seconds of holding the slot (~1 ms a token here), past any objective of a short prompt. */
export const LONG_ANSWER_TOKENS = 3_000;
/** Long answers served one at a time before the test, from which the router learns a place's hold. */
const WARMUPS = 2;
/** The second development tenant's objective here: past any long answer's hold, so its request may wait for the place. */
export const PATIENT_OBJECTIVE_MS = 60_000;

/** The router's configuration, with the second development tenant (`dev-2`) given {@link PATIENT_OBJECTIVE_MS}. */
function patientConfig(): Record<string, unknown> {
  const config = configFor("warmpath") as { tenants: Array<Record<string, unknown>> };
  const patient = config.tenants.find((t) => t.id === "dev-2");
  if (!patient) throw new Error("the development configuration has no tenant dev-2");
  patient.ttft_objective_ms = PATIENT_OBJECTIVE_MS;
  return config;
}

/** One request as the client saw it. */
export interface PlacesRequest {
  status: number;
  /** When its response (status and headers) came, and when its body ended, in ms since the scenario's clock started. */
  answeredAt: number;
  endedAt: number;
  retryAfter: string | null;
  /** The error's `code` of a refusal. */
  code: string | undefined;
  node: string | null;
  requestId: string | null;
  /** How long it waited in the region's queue (`x-warmpath-queued-ms`), when placed. */
  queuedMs: number | undefined;
}

/** The fields of the edge's `refusal` line read here (src/edge/middleware/refusal-log.ts `RefusalLine`, which carries a {@link RefusalDetail}). */
export type RefusalLine = RefusalDetail & { event: "refusal"; request_id: string; status: number; code: string };

export interface PlacesRun {
  /** The engine's own `/props` `total_slots`. */
  engineSlots: number | undefined;
  /** The router's state of the node, once the agent had reported. */
  maxRunning: number | undefined;
  /** How long a place is held after the first byte, as the router learned it from the warm-up answers (ms). */
  decodeMsMean: number | undefined;
  /** The long answer holding the slot. */
  holder: PlacesRequest;
  /** The short request that arrived while the slot was held; the same from a tenant whose objective covers the wait; the same after. */
  refused: PlacesRequest;
  waited: PlacesRequest;
  after: PlacesRequest;
  /** The router's state of the node just after the refusal, while the slot was held: its requests in flight and the wait for a place. */
  holding: { inflight: number; slotWaitMs: number } | undefined;
  /** The router's lines for the two short requests: the refusal's, and the served one's decision line. */
  refusedLine: RefusalLine | undefined;
  waitedLine: DecisionLine | undefined;
  afterLine: DecisionLine | undefined;
}

function messages(seed: number, words: number) {
  return [
    { role: "system", content: "App places. " + text(200, 5_150) },
    { role: "user", content: text(words, seed) },
  ];
}

/** Sends one streamed chat completion; `onFirstChunk` runs when its first body bytes come. */
async function send(
  system: System,
  clock: () => number,
  body: Record<string, unknown>,
  onFirstChunk?: () => void,
  apiKey = DEV_API_KEY,
): Promise<PlacesRequest> {
  const res = await fetch(`${system.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, stream: true, ...body }),
  });
  const answeredAt = clock();
  let code: string | undefined;
  if (res.status !== 200) {
    const json = (await res.json().catch(() => undefined)) as { error?: { code?: string } } | undefined;
    code = json?.error?.code;
  } else {
    const reader = res.body!.getReader();
    let first = true;
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
      if (first) onFirstChunk?.();
      first = false;
    }
  }
  return {
    status: res.status,
    answeredAt,
    endedAt: clock(),
    retryAfter: res.headers.get("retry-after"),
    code,
    node: res.headers.get("x-warmpath-node"),
    requestId: res.headers.get(REQUEST_ID),
    queuedMs: res.headers.has(EXPLAIN.queued) ? Number(res.headers.get(EXPLAIN.queued)) : undefined,
  };
}

export async function runPlaces(parts: LlamaParts, log: (line: string) => void): Promise<PlacesRun> {
  const server = await startLlamaServer({ binary: parts.binary, model: parts.model, parallel: 1, cacheRam: 0, alias: MODEL });
  const lines: DecisionLine[] = [];
  const refusals: RefusalLine[] = [];
  let system: System | undefined;
  let agent: ChildProcess | undefined;
  try {
    system = await startWarmpath((parsed) => {
      if (parsed.decision) lines.push(parsed.decision);
      else if (parsed.json.event === "refusal") refusals.push(parsed.json as unknown as RefusalLine);
    }, patientConfig());
    const sys = system;
    agent = startAgent(sys, NODE, server);
    const props = (await (await fetch(`${server.url}/props`)).json()) as { total_slots?: unknown };
    const engineSlots = typeof props.total_slots === "number" ? props.total_slots : undefined;
    // The places come with the agent's reports: a few cycles after it registers.
    const registered = await until("the agent's report of the engine's places", 15_000, async () => {
      const n = (await nodes(sys)).find((x) => x.id === NODE);
      return n?.maxRunning !== undefined ? n : undefined;
    });

    const started = performance.now();
    const clock = () => performance.now() - started;
    // The whole budget, always: an end of sequence sampled early would shorten the hold learned.
    const long = (seed: number) => ({ messages: messages(seed, 12), max_tokens: LONG_ANSWER_TOKENS, temperature: 0, ignore_eos: true });
    for (let i = 0; i < WARMUPS; i++) {
      const warm = await send(sys, clock, long(5_200 + i));
      if (warm.status !== 200) throw new Error(`warm-up answer ${i + 1}: HTTP ${warm.status} (${warm.code})`);
    }
    const learned: NodeState = await until("the router to learn a place's hold", 10_000, async () => {
      const n = (await nodes(sys)).find((x) => x.id === NODE);
      return n?.load.decodeMsMean !== undefined ? n : undefined;
    });
    log(
      `[e2e] places: ${NODE} has ${count(registered.maxRunning, "place")}; an answer holds its place ${learned.load.decodeMsMean} ms after its first byte`,
    );

    // The short request is sent once the long answer's first bytes came (it holds the slot then).
    const short = { messages: messages(5_300, 12), max_tokens: 8 };
    let firstBytes!: () => void;
    const holding0 = new Promise<void>((r) => (firstBytes = r));
    const holding1 = send(sys, clock, long(5_210), () => firstBytes());
    await Promise.race([holding0, holding1]);
    const refused = await send(sys, clock, short);
    const held = (await nodes(sys)).find((x) => x.id === NODE);
    const heldAt = clock();
    // The same request from a tenant whose objective (PATIENT_OBJECTIVE_MS) covers the wait: held
    // in the region's queue, and released when the long answer ends.
    const waiting = send(sys, clock, short, undefined, DEV_API_KEY_2);
    const holder = await holding1;
    const waited = await waiting;
    const holding = held && heldAt < holder.endedAt ? { inflight: held.load.inflight, slotWaitMs: held.load.slotWaitMs } : undefined;
    // The router frees the place when the region is told the answer ended, just after its last
    // byte: the same request is sent once it has been.
    await until("the long answer's place to be freed", 10_000, async () => {
      const n = (await nodes(sys)).find((x) => x.id === NODE);
      return n?.load.inflight === 0 ? true : undefined;
    });
    const after = await send(sys, clock, short);
    // A request's line is written as it ends.
    const lineOf = (r: PlacesRequest) => lines.find((l) => l.request_id === r.requestId);
    const refusalOf = (r: PlacesRequest) => refusals.find((l) => l.request_id === r.requestId);
    await until("the short requests' lines", 5_000, async () =>
      refusalOf(refused) && lineOf(waited) && lineOf(after) ? true : undefined,
    ).catch(() => undefined);
    const run: PlacesRun = {
      engineSlots,
      maxRunning: registered.maxRunning,
      decodeMsMean: learned.load.decodeMsMean,
      holder,
      refused,
      waited,
      after,
      holding,
      refusedLine: refusalOf(refused),
      waitedLine: lineOf(waited),
      afterLine: lineOf(after),
    };
    log(
      `[e2e] places: while the slot was held, the short request got HTTP ${refused.status} (${refused.code}, Retry-After ${refused.retryAfter}) at ${refused.answeredAt.toFixed(0)} ms, the long answer ended at ${holder.endedAt.toFixed(0)} ms; after it, HTTP ${after.status} on ${after.node}`,
    );
    return run;
  } finally {
    if (agent) await stopAgent(agent);
    await system?.stop();
    await server.stop();
  }
}

const count = (x: number | undefined, what: string) => (x === undefined ? `? ${what}s` : `${x} ${what}${x === 1 ? "" : "s"}`);
const ms = (x: number | undefined) => (x === undefined ? "?" : `${Math.round(x).toLocaleString("en-US")} ms`);

/** The scenario's section of docs/llama-e2e.md. */
export function formatPlaces(p: PlacesRun): string {
  const line = p.refusedLine;
  const tried = line?.attempts?.some((a) => a.node !== undefined);
  return [
    `A node's places (on a system of its own: warmpath, admission on as by default; one engine with one slot, \`-np 1\`): the engine's \`/props\` says ${count(p.engineSlots, "slot")}, and the router's state shows \`${NODE}\` with ${count(p.maxRunning, "place")}, from its agent's report (nothing configured). After ${WARMUPS} long answers one at a time (${LONG_ANSWER_TOKENS.toLocaleString("en-US")} tokens each), the router had learned that an answer holds its place ${ms(p.decodeMsMean)} after its first byte (its state's \`decodeMsMean\`).`,
    "",
    `- While a third long answer held the slot (it streamed until ${ms(p.holder.endedAt)} on the scenario's clock), a short request (\`max_tokens\` 8) was answered HTTP ${p.refused.status}${p.refused.code ? ` \`${p.refused.code}\`` : ""}${p.refused.retryAfter ? ` with \`Retry-After: ${p.refused.retryAfter}\`` : ""} at ${ms(p.refused.answeredAt)}. ${p.refused.answeredAt < p.holder.endedAt ? "The refusal came while the engine's only slot was still busy: the router answered from its prediction, without sending the request to wait in the engine's queue." : "**The refusal came after the long answer ended.**"}`,
    `- The router's word: its refusal line ${line ? `(\`reason\` ${line.reason}) shows ${tried ? "**a node tried**" : "no node tried"}, an objective of ${ms(line.objective_ms)} and the first token predicted in ${ms(line.estimated_ttft_ms)}` : "**is missing**"}; its state, just after, ${p.holding ? `${count(p.holding.inflight, "request")} in flight on \`${NODE}\` and a wait for a place of ${ms(p.holding.slotWaitMs)}` : "**was not read while the slot was held**"}.`,
    `- Meanwhile the same request from a tenant whose objective is ${ms(PATIENT_OBJECTIVE_MS)} (\`dev-2\`, configured here), which the wait can meet: HTTP ${p.waited.status}${p.waited.node ? ` on \`${p.waited.node}\`` : ""}, held in the region's queue for ${ms(p.waited.queuedMs)} (\`x-warmpath-queued-ms\`${p.waitedLine ? `; its decision line: objective ${ms(p.waitedLine.objective_ms)}, \`queued_ms\` ${ms(p.waitedLine.queued_ms)}` : ""}) and answered at ${ms(p.waited.answeredAt)}, ${p.waited.answeredAt >= p.holder.endedAt ? "once the long answer had ended: released by its end, not sent to wait in the engine's queue" : "**before the long answer had ended**"}.`,
    `- After the long answer ended, the same request: HTTP ${p.after.status}${p.after.node ? ` on \`${p.after.node}\`` : ""}${p.afterLine?.first_byte_ms !== undefined ? `, its first byte after ${ms(p.afterLine.first_byte_ms)}` : ""}.`,
  ].join("\n");
}
