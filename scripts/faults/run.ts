/**
 * Fault injection against the running system in the production topology (scripts/system.ts,
 * `runtime: "workerd"`: the edge worker and each region's worker in a workerd process of its own,
 * joined over loopback HTTP as service bindings are over the network; the simulated fleet
 * reporting to it) under a steady client load from two tenants: each scenario injects one fault
 * one second into the load (into a node, a region's nodes, a region's Durable Object, a region's
 * worker process, or every worker process) while requests keep flowing until the fault is over,
 * and every request is accounted for:
 * - `ok`: a 200 whose stream ended with `data: [DONE]`;
 * - `failed cleanly`: an error status in OpenAI's shape, or a stream ended by an SSE error event;
 * - `lost`: no answer within the client's timeout, or a stream that stopped without either.
 * When the router's processes are all killed (the edge's with them), two more: `in flight at the
 * kill` (a request under way when they died) and `refused while down` (a connection refused before
 * the edge answered /healthz again). A region worker's kill has no such excuse: the edge stays up,
 * so a stream it was relaying must end with the SSE error event (`region_stream_lost`) and a new
 * request must fail over to the next region. Lost must be 0 in every scenario. Recovery: seconds
 * from the fault's end to the next `ok`.
 *
 * Every request carries a unique tag in its user message, and the fleet records the tags it sent a
 * first byte for (fleet/first-bytes.ts): `duplicated` counts requests whose generation a node
 * started more than once, on any node (a retry after the first byte); it must be 0. No answer may
 * show the internal URL a redirecting node points at (`leaked internal URL`).
 *
 *   node scripts/faults/run.ts             # the scenarios below, a table on stdout
 *
 * Scenarios: a node answering 503; a node hanging before its first byte (longer than every
 * timeout); a node going silent after its first bytes; a node answering 307 to an internal URL; a
 * node whose prefill is 10x slower; a node killed mid-stream and back with a new boot id; a
 * region's GPUs down (every node of it killed) and back; the region's Durable Object restarted; the
 * region's worker process killed mid-request and started again; every worker process (the edge
 * and each region's) killed and started again. Then one tenant's flood against two light ones.
 *
 * No source watcher runs (workerd, not `wrangler dev`): an edit elsewhere in the tree cannot
 * reload a worker and cut its streams mid-scenario. A worker process started again (the last two
 * scenarios) is bundled again from the working tree as it is then.
 */
import { createServer } from "node:http";
import { monitorEventLoopDelay } from "node:perf_hooks";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { loadFleet, type Faults, type FleetConfig } from "../../fleet/config.ts";
import { DEV_API_KEY, DEV_API_KEY_2, DEV_API_KEY_3 } from "../../src/config/dev-credentials.ts";
import { percentile } from "../../src/core/stats.ts";
import { devConfigWithPolicy } from "../demo/policy-config.ts";
import { ROOT, startSystem, type System } from "../system.ts";

/** Requests a second from each tenant during a scenario (the fleet runs 20x faster than real time). */
const RATE_PER_TENANT = 4;
/** A client gives up on an answer after this long: past every timeout of the configuration below. */
const CLIENT_TIMEOUT_MS = 30_000;
/**
 * Tokens a scenario's answer streams: 900 at the fleet's 30 tokens/s x20 take 1.5 s, so a crash or
 * a kill finds several streams in flight (8 requests a second: ~12 at any time).
 */
const ANSWER_TOKENS = 900;
/** Tokens a node streams before going silent in the hung-after-its-first-byte scenario. */
const TOKENS_BEFORE_SILENCE = 3;
/** How much slower the slow node's prefill is. */
const PREFILL_SLOWDOWN = 10;

export type Outcome = "ok" | "failed-cleanly" | "lost" | "in-flight-at-kill" | "refused-while-down";

export interface ScenarioResult {
  name: string;
  sent: number;
  ok: number;
  failedCleanly: number;
  lost: number;
  /** Router restart only (0 elsewhere): requests under way at the kill, and refused while the edge was down. */
  inFlightAtKill: number;
  refusedWhileDown: number;
  /** Requests a first byte was sent for more than once (on two nodes, or twice on one). */
  duplicated: number;
  /** `ok` answers no node recorded a first byte for: 0, or the first-byte record is broken. */
  untracked: number;
  /** Answers (body or headers) showing the internal URL a node redirected to. */
  leaked: number;
  /** Status / error code counts of the clean failures, and how the lost ones ended. */
  failures: Record<string, number>;
  lostAs: Record<string, number>;
  /** Answers that took more than one node (a retry before the first byte), and answers by region. */
  retried: number;
  regions: Record<string, number>;
  /** Seconds from the end of the fault to the first `ok` answer sent after it. */
  recoverySeconds: number | null;
  /** What the scenario measured beyond the counts (first-byte times, the outage, the redirect target). */
  notes: string;
  /** Region worker kill only: what became of the requests around it. */
  regionWorker?: RegionWorkerOutage;
}

/** The requests around the kill of REGION's worker, by what became of them. */
export interface RegionWorkerOutage {
  /** Seconds from the kill to the restarted worker answering /healthz (its bundling and boot included). */
  downSeconds: number;
  /** Requests under way at the kill whose answer REGION had started: how each ended (`ok`, or the failure's detail). */
  cut: Record<string, number>;
  /** Requests under way at the kill that REGION had not answered yet: by the region that answered (or `none`). */
  unanswered: Record<string, number>;
  /** Requests sent while the worker was down: by the region that answered (or `none`). */
  whileDown: Record<string, number>;
  /** Requests sent after it was back: by the region that answered (or `none`). */
  after: Record<string, number>;
  /** `ok` answers from REGION among the requests sent after it was back. */
  regionOkAfter: number;
  /** Seconds from the worker answering again to the sending of the first request REGION answered `ok`. */
  regionBackSeconds: number | null;
}

/** What a scenario's fault did, for its heal and its notes. */
interface Fault {
  /** Requests routed to each node of REGION when the scenario began, to find the busiest since. */
  routedAtStart: Map<string, number>;
  /** The node the fault struck. */
  victim: string;
  injectedAt: number;
  /** When the fault ended: healed, or, for a restart, back up. */
  endedAt: number;
  /** Router restart: when every worker process was killed, and when all of them answered /healthz again. */
  outage?: { killedAt: number; upAt: number };
  /**
   * Region worker kill: when the kill was sent to REGION's worker, when its process had exited, and
   * when the one started again answered /healthz.
   */
  regionOutage?: { killedAt: number; deadAt: number; upAt: number };
  /** 307 scenario: the internal service the redirect points at. */
  target?: InternalTarget;
}

interface Scenario {
  name: string;
  inject(system: System, fault: Fault): Promise<void>;
  /** Undoes the fault after it has lasted; absent for a restart, which is over once inject resolves. */
  heal?(system: System, fault: Fault): Promise<void>;
  /** The scenario's own measure, for the notes column. */
  notes?(fault: Fault, sent: readonly Sent[]): string;
}

const node = (s: System, region: string, id: string) => s.fleet!.node(region, id)!;
/**
 * The region the clients' requests reach first: a request to workerd-host's socket carries no
 * client location (no `cf` blob), so the edge takes the regions in configuration order, us-east
 * first; eu-west is the failover. The "answered by region" column shows it: under a fault that
 * spares the region, every answer is us-east's.
 */
const REGION = "us-east";
/** The region clients fail over to when REGION cannot serve. */
const FAILOVER_REGION = "eu-west";

/** Requests routed to each node of REGION so far, by the router's count. */
async function routedByNode(s: System): Promise<Map<string, number>> {
  const state = (await (await fetch(`${s.url}/admin/state/${REGION}`)).json()) as {
    nodes: Array<{ id: string; metrics: { routed: number } }>;
  };
  return new Map(state.nodes.map((n) => [n.id, n.metrics.routed]));
}

/**
 * The node of REGION sent the most requests since the scenario began: the one a fault there hurts.
 * Not the most since boot: prefix affinity keeps each support prompt on its node, and the earlier
 * scenarios' faults moved them, so the all-time busiest node may be getting nothing now.
 */
async function busiest(s: System, f: Fault): Promise<string> {
  const now = [...(await routedByNode(s))].map(([id, n]) => ({ id, n: n - (f.routedAtStart.get(id) ?? 0) }));
  return now.reduce((a, b) => (b.n > a.n ? b : a)).id;
}

/** A node-level fault: set on REGION's busiest node, undone by `off`. */
function nodeFault(name: string, on: Partial<Faults>, off: Partial<Faults>): Scenario {
  return {
    name,
    inject: async (s, f) => void node(s, REGION, (f.victim = await busiest(s, f))).setFaults(on),
    heal: async (s, f) => void node(s, REGION, f.victim).setFaults(off),
  };
}

/** In every URL an internal service's redirect points at: no client-facing answer may contain it. */
const INTERNAL_MARKER = "internal-only-7d1c";

interface InternalTarget {
  url: string;
  /** Requests that reached it: a router that followed the redirect. */
  hits: number;
  close(): Promise<void>;
}

/** A stand-in for the internal service a misbehaving node redirects to, counting who comes. */
async function internalTarget(): Promise<InternalTarget> {
  const server = createServer((_req, res) => {
    target.hits++;
    res.end(`internal service ${INTERNAL_MARKER}`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const target: InternalTarget = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/${INTERNAL_MARKER}/v1/chat/completions`,
    hits: 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return target;
}

/** p50 first-byte time of the `ok` answers among `sent`, with their count. */
function ttftP50(sent: readonly Sent[]): string {
  const { p50, n } = quantiles(sent.filter((r) => r.outcome === "ok").map((r) => r.ttftMs));
  return n ? `${p50.toFixed(0)} ms (${n})` : "– (0)";
}

export const SCENARIOS: Scenario[] = [
  nodeFault("node answering 503", { error_rate: 1 }, { error_rate: 0 }),
  nodeFault("node hung before its first byte", { hang: true }, { hang: false }),
  nodeFault("node hung after its first byte", { hang_after_tokens: TOKENS_BEFORE_SILENCE }, { hang_after_tokens: null }),
  {
    name: "node answering 307 to an internal URL",
    inject: async (s, f) => {
      f.target = await internalTarget();
      node(s, REGION, (f.victim = await busiest(s, f))).setFaults({ redirect_to: f.target.url });
    },
    heal: async (s, f) => {
      node(s, REGION, f.victim).setFaults({ redirect_to: null });
      await f.target!.close();
    },
    notes: (f) => `redirect target fetched ${f.target!.hits} times`,
  },
  {
    ...nodeFault(`node slow to ${PREFILL_SLOWDOWN}x its prefill`, { prefill_slowdown: PREFILL_SLOWDOWN }, { prefill_slowdown: 1 }),
    notes: (f, sent) => {
      const before = sent.filter((r) => r.at < f.injectedAt);
      const during = sent.filter((r) => r.at >= f.injectedAt && r.at < f.endedAt);
      const on = (rs: Sent[]) => rs.filter((r) => r.node === f.victim);
      return (
        `first byte p50 (answers): all nodes ${ttftP50(before)} before, ${ttftP50(during)} during; ` +
        `${f.victim} ${ttftP50(on(before))} before, ${ttftP50(on(during))} during`
      );
    },
  },
  {
    name: "node killed mid-stream, back with a new boot id",
    inject: async (s, f) => node(s, REGION, (f.victim = await busiest(s, f))).crash(),
    heal: async (s, f) => node(s, REGION, f.victim).restart(0),
  },
  {
    name: "region us-east's GPUs down (its three nodes killed) and back (clients fail over to eu-west)",
    inject: async (s) => {
      for (const id of ["use1-a", "use1-b", "use1-c"]) await node(s, REGION, id).crash();
    },
    heal: async (s) => {
      for (const id of ["use1-a", "use1-b", "use1-c"]) await node(s, REGION, id).restart(0);
    },
  },
  {
    name: "region object us-east restarted",
    inject: async (s) => {
      const res = await fetch(`${s.url}/admin/regions/${REGION}/restart`, { method: "POST" });
      if (res.status !== 200) throw new Error(`restart of ${REGION}'s object: ${res.status} ${await res.text()}`);
    },
    notes: (_f, sent) =>
      `placed without the object (x-warmpath-decision: stateless): ${sent.filter((r) => r.decision === "stateless").length}`,
  },
  {
    name: "region worker us-east killed (SIGKILL) mid-request and started again",
    inject: async (s, f) => {
      const killedAt = await s.killRegionWorker(REGION);
      f.regionOutage = { killedAt, deadAt: Date.now(), upAt: NaN };
    },
    heal: async (s, f) => {
      f.regionOutage!.upAt = await s.startRegionWorker(REGION);
    },
    notes: (f, sent) => {
      const o = regionWorkerOutage(f, sent)!;
      const back = o.regionBackSeconds === null ? "no ok answer from it after" : `${o.regionBackSeconds.toFixed(1)} s later`;
      return (
        `in flight at the kill: ${counted(sum(o.cut), o.cut)} answered by ${REGION}, ${counted(sum(o.unanswered), o.unanswered)} not yet answered (by the region that then answered); ` +
        `sent while it was down: ${counted(sum(o.whileDown), o.whileDown)}; ` +
        `${REGION}'s worker answered again ${o.downSeconds.toFixed(1)} s after the kill (bundled and booted), its first ok answer to a request sent ${back}; ` +
        `sent after it was back: ${counted(sum(o.after), o.after)}`
      );
    },
  },
  {
    name: "router killed (SIGKILL: the edge's and every region's worker process) and started again",
    inject: async (s, f) => void (f.outage = await s.restartRouter()),
    notes: (f, sent) => {
      const { killedAt, upAt } = f.outage!;
      const firstOk = Math.min(...sent.filter((r) => r.outcome === "ok" && r.at >= killedAt).map((r) => r.at + r.ttftMs!));
      const outage = Number.isFinite(firstOk) ? `${((firstOk - killedAt) / 1000).toFixed(1)} s` : "no ok answer after it";
      return `outage ${outage} from the kill to the first byte of an ok answer (every worker process answering /healthz again after ${((upAt - killedAt) / 1000).toFixed(1)} s)`;
    },
  },
];

/** One request, streamed, classified by how it ended. */
interface Sent {
  outcome: Outcome;
  detail: string;
  /** When it was sent and when its answer ended (ms epoch). */
  at: number;
  endedAt: number;
  /** Whether the answer (body or headers) showed an internal URL. */
  leaked: boolean;
  /** Status, time to the first byte, region and node that answered, nodes tried (x-warmpath-attempts), decision. */
  status?: number | undefined;
  ttftMs?: number | undefined;
  region?: string | undefined;
  node?: string | undefined;
  attempts?: number | undefined;
  decision?: string | undefined;
}

/** One streamed request with its messages, timed to its first byte and classified by how it ended. */
async function post(system: System, key: string, messages: unknown[], maxTokens: number, timeoutMs: number): Promise<Sent> {
  const at = Date.now();
  const started = performance.now();
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  try {
    const res = await fetch(`${system.url}/v1/chat/completions`, {
      method: "POST",
      signal: abort.signal,
      // A redirect is the router's to handle: passed on to the client, it is counted, never followed.
      redirect: "manual",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "llama-3.1-8b-instruct", stream: true, max_tokens: maxTokens, messages }),
    });
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    let ttftMs = NaN;
    for (;;) {
      const { done, value } = await reader.read();
      if (Number.isNaN(ttftMs)) ttftMs = performance.now() - started;
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const seen = {
      at,
      endedAt: Date.now(),
      leaked: text.includes(INTERNAL_MARKER) || [...res.headers.values()].some((v) => v.includes(INTERNAL_MARKER)),
      status: res.status,
      ttftMs,
      region: res.headers.get("x-warmpath-region") ?? undefined,
      node: res.headers.get("x-warmpath-node") ?? undefined,
      attempts: Number(res.headers.get("x-warmpath-attempts") ?? 0),
      decision: res.headers.get("x-warmpath-decision") ?? undefined,
    };
    if (res.status !== 200) {
      const code = /"code":"([^"]+)"/.exec(text)?.[1] ?? "unknown";
      return { outcome: text.includes('"error"') ? "failed-cleanly" : "lost", detail: `${res.status} ${code}`, ...seen };
    }
    if (text.trimEnd().endsWith("data: [DONE]")) return { outcome: "ok", detail: "200", ...seen };
    const code = /"code":"([^"]+)"/.exec(text.slice(-2_000))?.[1];
    return code
      ? { outcome: "failed-cleanly", detail: `stream ${code}`, ...seen }
      : { outcome: "lost", detail: "stream cut without an error event", ...seen };
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    return {
      outcome: "lost",
      detail: abort.signal.aborted
        ? "no answer within the client timeout"
        : `connection: ${(e as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ""}`,
      at,
      endedAt: Date.now(),
      leaked: false,
    };
  } finally {
    clearTimeout(timer);
  }
}

/** Distinguishes runs in one process, so a tag is never reused. */
const RUN = Date.now().toString(36);
let scenarioSeq = 0;

/**
 * A scenario's request: one of five support prompts (cached on the nodes after their first use),
 * then a user message with its tag and ~1,000 tokens of its own (uncached: 10 ms of prefill at the
 * fleet's speed, 100 ms on the slow node), answered in ANSWER_TOKENS tokens.
 */
function send(system: System, key: string, i: number, tag: string): Promise<Sent> {
  const messages = [
    { role: "system", content: `Support agent ${i % 5}. ` + "Follow the policy. ".repeat(200) },
    { role: "user", content: `[request-tag:${tag}] question ${i}: ` + "Here is what happened to my order. ".repeat(115) },
  ];
  return post(system, key, messages, ANSWER_TOKENS, CLIENT_TIMEOUT_MS);
}

/**
 * Steady load, two tenants, requests tagged `<prefix>-<i>`, for `ms` and then for as long as `more`
 * says; resolves when every request has been sent.
 */
async function load(
  system: System,
  ms: number,
  tagPrefix: string,
  onSent: (tag: string, p: Promise<Sent>) => void,
  more: () => boolean = () => false,
) {
  const end = Date.now() + ms;
  let i = 0;
  while (Date.now() < end || more()) {
    for (const key of [DEV_API_KEY, DEV_API_KEY_2]) {
      const tag = `${tagPrefix}-${i}`;
      onSent(tag, send(system, key, i++, tag));
    }
    await sleep(1_000 / RATE_PER_TENANT);
  }
}

/**
 * A router restart's casualties, told apart from the lost: a request under way when it was killed,
 * and a request refused (a connection error) while it was down.
 */
function aroundOutage(r: Sent, outage: Fault["outage"]): Outcome {
  if (r.outcome !== "lost" || !outage) return r.outcome;
  if (r.at < outage.killedAt && r.endedAt >= outage.killedAt) return "in-flight-at-kill";
  if (r.at >= outage.killedAt && r.at < outage.upAt && r.detail.startsWith("connection")) return "refused-while-down";
  return "lost";
}

/** First bytes the fleet sent per tag (summed over every node, up or down). */
function firstBytesByTag(system: System): Map<string, number> {
  const counts = new Map<string, number>();
  for (const n of system.fleet!.nodes) {
    for (const [tag, k] of Object.entries(n.state().first_byte_tags)) counts.set(tag, (counts.get(tag) ?? 0) + k);
  }
  return counts;
}

export async function runScenario(system: System, scenario: Scenario, faultMs = 3_000): Promise<ScenarioResult> {
  const pending: Array<Promise<Sent>> = [];
  const tags: string[] = [];
  const prefix = `${RUN}-${++scenarioSeq}`;
  const onSent = (tag: string, p: Promise<Sent>) => (tags.push(tag), pending.push(p));
  const fault: Fault = { routedAtStart: await routedByNode(system), victim: "", injectedAt: 0, endedAt: 0 };
  // The fault strikes one second into a steady load, so requests are in flight when it does; the
  // load goes on until the fault is over (healed, or a restart back up), however long that takes.
  let over = false;
  const faultLasts = sleep(1_000 + faultMs);
  const before = load(system, 1_000 + faultMs, `${prefix}-a`, onSent, () => !over);
  await sleep(1_000);
  fault.injectedAt = Date.now();
  await scenario.inject(system, fault);
  if (scenario.heal) {
    await faultLasts;
    await scenario.heal(system, fault);
  }
  fault.endedAt = Date.now();
  over = true;
  await before;
  await load(system, 2_000, `${prefix}-b`, onSent);
  const sent = await Promise.all(pending);
  const results = sent.map((r) => ({ ...r, outcome: aroundOutage(r, fault.outage) }));
  const firstBytes = firstBytesByTag(system);
  const count = (o: Outcome) => results.filter((r) => r.outcome === o).length;
  const failures: Record<string, number> = {};
  const lostAs: Record<string, number> = {};
  for (const r of results) if (r.outcome === "failed-cleanly") failures[r.detail] = (failures[r.detail] ?? 0) + 1;
  for (const r of results) if (r.outcome === "lost") lostAs[r.detail] = (lostAs[r.detail] ?? 0) + 1;
  const regions: Record<string, number> = {};
  for (const r of results) if (r.region) regions[r.region] = (regions[r.region] ?? 0) + 1;
  const firstOkAfter = results.filter((r) => r.outcome === "ok" && r.at >= fault.endedAt).map((r) => r.at);
  return {
    name: scenario.name,
    sent: results.length,
    ok: count("ok"),
    failedCleanly: count("failed-cleanly"),
    lost: count("lost"),
    inFlightAtKill: count("in-flight-at-kill"),
    refusedWhileDown: count("refused-while-down"),
    duplicated: tags.filter((t) => (firstBytes.get(t) ?? 0) > 1).length,
    untracked: results.filter((r, i) => r.outcome === "ok" && !firstBytes.get(tags[i]!)).length,
    leaked: results.filter((r) => r.leaked).length,
    failures,
    lostAs,
    retried: results.filter((r) => (r.attempts ?? 0) > 1).length,
    regions,
    recoverySeconds: firstOkAfter.length ? (Math.min(...firstOkAfter) - fault.endedAt) / 1000 : null,
    notes: scenario.notes?.(fault, results) ?? "",
    ...(fault.regionOutage ? { regionWorker: regionWorkerOutage(fault, results) } : {}),
  };
}

const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

/** Counts of `rs` by `key`. */
function countBy(rs: readonly Sent[], key: (r: Sent) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of rs) out[key(r)] = (out[key(r)] ?? 0) + 1;
  return out;
}

/** What became of the requests around the kill of REGION's worker (undefined for another fault). */
function regionWorkerOutage(f: Fault, sent: readonly Sent[]): RegionWorkerOutage | undefined {
  if (!f.regionOutage) return undefined;
  const { killedAt, deadAt, upAt } = f.regionOutage;
  // Sent before the process had died (the kill takes a moment) and not over when the kill was sent.
  const inFlight = sent.filter((r) => r.at < deadAt && r.endedAt >= killedAt);
  // The region that answered, or (none did) how the request failed.
  const answeredBy = (r: Sent) => r.region ?? `none (${r.detail})`;
  const regionOk = sent.filter((r) => r.at >= upAt && r.region === REGION && r.outcome === "ok").map((r) => r.at);
  return {
    downSeconds: (upAt - killedAt) / 1000,
    cut: countBy(
      inFlight.filter((r) => r.region === REGION),
      (r) => (r.outcome === "ok" ? "ok" : r.detail),
    ),
    unanswered: countBy(
      inFlight.filter((r) => r.region !== REGION),
      answeredBy,
    ),
    whileDown: countBy(
      sent.filter((r) => r.at >= deadAt && r.at < upAt),
      answeredBy,
    ),
    after: countBy(
      sent.filter((r) => r.at >= upAt),
      answeredBy,
    ),
    regionOkAfter: regionOk.length,
    regionBackSeconds: regionOk.length ? (Math.min(...regionOk) - upAt) / 1000 : null,
  };
}

type Quantiles = { p50: number; p99: number; max: number; n: number };

/** One light tenant's time to first byte and engine queue wait, alone and during the flood. */
export interface LightTenantResult {
  tenant: string;
  /** TTFT (ms to the first streamed byte) without and with the flood. */
  baseline: Quantiles;
  flooded: Quantiles;
  /** Its wait in the engines' queues (ms, the fleet's own clock): the router's part of its time to first byte. */
  baselineQueueMs: Quantiles;
  floodedQueueMs: Quantiles;
}

export interface FloodResult {
  light: LightTenantResult[];
  /**
   * This process's event-loop delay (ms, p50 / p99), alone and during the flood: the client that
   * times the light requests also runs the fleet and the flood's clients, so a late timer here is
   * a late reading of a first byte, not the router's.
   */
  loopDelayMs: { baseline: { p50: number; p99: number }; flooded: { p50: number; p99: number } };
  floodSent: number;
  floodOk: number;
  flood429: number;
  lost: number;
  /** The lost, by how (as the scenarios count them). */
  lostAs: Record<string, number>;
}

/** p50 and p99 (nearest rank) of the times measured. */
function quantiles(xs: Array<number | undefined>) {
  const sorted = xs.filter((x): x is number => Number.isFinite(x)).sort((a, b) => a - b);
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted.at(-1) ?? NaN, n: sorted.length };
}

/**
 * Seconds of light traffic measured alone and again during the flood, for docs/faults.md: 50 s at
 * two requests a second is 100 first bytes per tenant, so p99 is a percentile (the second largest)
 * rather than the single slowest request, as it is with 20.
 */
const FLOOD_SECONDS = 50;

/** How often the timing client's event loop is sampled for lateness (ms). */
const LOOP_SAMPLE_MS = 5;

/** The light tenants, each sending one short request every LIGHT_INTERVAL_MS (the second half a period later). */
const LIGHT_TENANTS = [
  { tenant: "dev-2", key: DEV_API_KEY_2 },
  { tenant: "dev-3", key: DEV_API_KEY_3 },
];

/**
 * One tenant floods (FLOOD_CONCURRENCY long prompts kept in flight) while two others each send one
 * short request every LIGHT_INTERVAL_MS: each light tenant's TTFT against its own baseline without
 * the flood (target: within 2x).
 */
export async function runFlood(system: System, seconds = 10): Promise<FloodResult> {
  // Each light request is tagged, so the engine's own queue wait for it can be read back from the
  // fleet: what the router decided (which queue it joined) apart from the client's end-to-end time,
  // which on one 2-core machine also carries the flood's CPU in the router and the fleet processes.
  const lightTenant = async (key: string, tenant: string, ms: number, phase: string, offsetMs: number) => {
    const out: Array<Promise<Sent & { tag: string }>> = [];
    await sleep(offsetMs);
    const end = Date.now() + ms;
    for (let i = 0; Date.now() < end; i++) {
      const tag = `light-${tenant}-${phase}-${i}`;
      const content = `[request-tag:${tag}] short question ${i}`;
      out.push(post(system, key, [{ role: "user", content }], 8, 2 * CLIENT_TIMEOUT_MS).then((r) => ({ ...r, tag })));
      await sleep(LIGHT_INTERVAL_MS);
    }
    return Promise.all(out);
  };
  /** Every light tenant at once, with this process's event-loop delay over the phase. */
  const light = async (ms: number, phase: string) => {
    const loop = monitorEventLoopDelay({ resolution: LOOP_SAMPLE_MS });
    loop.enable();
    const sent = await Promise.all(
      LIGHT_TENANTS.map((t, k) => lightTenant(t.key, t.tenant, ms, phase, (k * LIGHT_INTERVAL_MS) / LIGHT_TENANTS.length)),
    );
    loop.disable();
    // The histogram holds whole sampling intervals: the lateness is what exceeds the interval.
    const late = (p: number) => Math.max(0, loop.percentile(p) / 1e6 - LOOP_SAMPLE_MS);
    return { sent, loop: { p50: late(50), p99: late(99) } };
  };
  const waits = () => {
    const byTag = new Map<string, number>();
    for (const n of system.fleet!.nodes) for (const [tag, ms] of Object.entries(n.state().queue_waits_ms)) byTag.set(tag, ms);
    return byTag;
  };
  const baseline = await light(seconds * 1_000, "alone");
  let stop = false;
  const flood: Sent[] = [];
  const flooder = async (w: number) => {
    for (let i = 0; !stop; i++) {
      const r = await post(
        system,
        DEV_API_KEY,
        [{ role: "user", content: `flood ${w}-${i} ` + "x".repeat(100_000) }],
        8,
        2 * CLIENT_TIMEOUT_MS,
      );
      flood.push(r);
      if (r.status === 429) await sleep(1_000); // as a client honouring Retry-After would (at least 1 s)
    }
  };
  const flooders = Array.from({ length: FLOOD_CONCURRENCY }, (_, w) => flooder(w));
  await sleep(2_000); // the flood builds up first
  const flooded = await light(seconds * 1_000, "flood");
  stop = true;
  await Promise.all(flooders);
  const queued = waits();
  const all = [...baseline.sent.flat(), ...flooded.sent.flat(), ...flood];
  return {
    light: LIGHT_TENANTS.map((t, k) => ({
      tenant: t.tenant,
      baseline: quantiles(baseline.sent[k]!.map((r) => r.ttftMs)),
      flooded: quantiles(flooded.sent[k]!.map((r) => r.ttftMs)),
      baselineQueueMs: quantiles(baseline.sent[k]!.map((r) => queued.get(r.tag))),
      floodedQueueMs: quantiles(flooded.sent[k]!.map((r) => queued.get(r.tag))),
    })),
    loopDelayMs: { baseline: baseline.loop, flooded: flooded.loop },
    floodSent: flood.length,
    floodOk: flood.filter((r) => r.status === 200).length,
    flood429: flood.filter((r) => r.status === 429).length,
    lost: all.filter((r) => r.outcome === "lost").length,
    lostAs: all
      .filter((r) => r.outcome === "lost")
      .reduce<Record<string, number>>((acc, r) => ((acc[r.detail] = (acc[r.detail] ?? 0) + 1), acc), {}),
  };
}

const FLOOD_CONCURRENCY = 30;
const LIGHT_INTERVAL_MS = 500;

/** The router with short waits, so a hung node is given up on within the scenario. */
export function faultConfig(fairShareWaitSeconds?: number): Record<string, unknown> {
  const base = devConfigWithPolicy("warmpath") as { regions: Array<Record<string, unknown>> } & Record<string, unknown>;
  if (fairShareWaitSeconds !== undefined) for (const r of base.regions) r.fair_share_wait_seconds = fairShareWaitSeconds;
  return {
    ...base,
    limits: { first_byte_timeout_floor_ms: 2_000, first_byte_timeout_ms: 10_000, stream_idle_timeout_ms: 3_000 },
  };
}

/** The default fleet, its answers allowed ANSWER_TOKENS long (its cap, 64 tokens, would end them in ~0.1 s). */
export function faultFleet(): FleetConfig {
  const fleet = loadFleet(join(ROOT, "fleet", "fleet.default.json"));
  for (const r of fleet.regions) for (const n of r.nodes) n.default_max_tokens = Math.max(n.default_max_tokens, ANSWER_TOKENS);
  return fleet;
}

/** The flood's paragraph of docs/faults.md: each light tenant against its own baseline and the 2x target. */
export function floodSummary(flood: FloodResult): string {
  const ms = (x: number) => x.toFixed(0);
  const ratio = (during: number, alone: number) => (alone > 0 ? during / alone : NaN);
  const tenants = flood.light.map((t) => {
    const r50 = ratio(t.flooded.p50, t.baseline.p50);
    const r99 = ratio(t.flooded.p99, t.baseline.p99);
    const within = (r: number) => (r <= FLOOD_TARGET_RATIO ? "within" : "over");
    return (
      `\`${t.tenant}\`: time to first byte p50 ${ms(t.baseline.p50)} ms / p99 ${ms(t.baseline.p99)} ms / max ${ms(t.baseline.max)} ms alone (${t.baseline.n} requests), ` +
      `p50 ${ms(t.flooded.p50)} ms / p99 ${ms(t.flooded.p99)} ms / max ${ms(t.flooded.max)} ms during the flood (${t.flooded.n}): ` +
      `p50 ${r50.toFixed(2)}x, p99 ${r99.toFixed(2)}x its baseline (${within(r50)} / ${within(r99)} the ${FLOOD_TARGET_RATIO}x target); ` +
      `its wait in the engines' queues p50 ${t.baselineQueueMs.p50.toFixed(1)} / p99 ${t.baselineQueueMs.p99.toFixed(1)} ms alone, ` +
      `p50 ${t.floodedQueueMs.p50.toFixed(1)} / p99 ${t.floodedQueueMs.p99.toFixed(1)} ms during the flood`
    );
  });
  const loop = flood.loopDelayMs;
  return (
    `Flood: tenant \`dev\` keeps ${FLOOD_CONCURRENCY} requests of 100,000 characters in flight (waiting 1 s after a 429) while ${flood.light.map((t) => `\`${t.tenant}\``).join(" and ")} each send a short request every ${LIGHT_INTERVAL_MS} ms. ` +
    `${tenants.join("; ")}. ` +
    `The client timing them shares its process with the fleet and the flood's clients: its event loop ran late by p50 ${loop.baseline.p50.toFixed(1)} / p99 ${loop.baseline.p99.toFixed(1)} ms alone and p50 ${loop.flooded.p50.toFixed(1)} / p99 ${loop.flooded.p99.toFixed(1)} ms during the flood. ` +
    `The flood sent ${flood.floodSent}, ${flood.floodOk} answered, ${flood.flood429} refused with 429; ${counted(flood.lost, flood.lostAs)} lost.`
  );
}

/** The light tenants' time to first byte during the flood against their own, alone (issue 11: within 2x). */
const FLOOD_TARGET_RATIO = 2;

/**
 * The system the scenarios run against: the edge and each region's worker in a workerd process of
 * its own (so one region's worker can be killed alone) with faultConfig, the fault fleet at x20.
 */
export function startFaultSystem(fairShareWaitSeconds?: number): Promise<System> {
  return startSystem({
    port: 0,
    runtime: "workerd",
    timeFactorScale: 20,
    config: faultConfig(fairShareWaitSeconds),
    fleetConfig: faultFleet(),
  });
}

const counted = (n: number, what: Record<string, number>) =>
  `${n}${
    Object.keys(what).length
      ? ` (${Object.entries(what)
          .map(([k, v]) => `${k}: ${v}`)
          .join(", ")})`
      : ""
  }`;

export function formatResults(results: readonly ScenarioResult[]): string {
  const rows = results.map((r) => {
    // Only the router restart has these outcomes (the edge itself was down); elsewhere they cannot occur.
    const restart = r.name.startsWith("router") ? [r.inFlightAtKill, r.refusedWhileDown] : ["–", "–"];
    return `| ${[
      r.name,
      r.sent,
      r.ok,
      counted(r.failedCleanly, r.failures),
      counted(r.lost, r.lostAs),
      r.duplicated,
      ...restart,
      r.leaked,
      r.retried,
      Object.entries(r.regions)
        .map(([k, v]) => `${k} ${v}`)
        .join(", "),
      r.recoverySeconds === null ? "–" : r.recoverySeconds.toFixed(1) + " s",
      r.notes || "–",
    ].join(" | ")} |`;
  });
  return [
    "| scenario | sent | ok | failed cleanly | lost | duplicated | in flight at the kill | refused while down | leaked internal URL | retried before the first byte | answered by region | recovery | measured |",
    "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---|---:|---|",
    ...rows,
  ].join("\n");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const arg = (name: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
  const out = arg("--out");
  // The regions' fair-share bound, to compare with the default (e.g. `--fair-share-wait 2`).
  const fairShareWait = arg("--fair-share-wait");
  const system = await startFaultSystem(fairShareWait === undefined ? undefined : Number(fairShareWait));
  try {
    const results: ScenarioResult[] = [];
    for (const s of SCENARIOS) results.push(await runScenario(system, s));
    const flood = await runFlood(system, FLOOD_SECONDS);
    const md = [
      "# Fault injection (fast version)",
      "",
      `Generated by \`npm run faults\` (scripts/faults/run.ts; do not edit by hand): the production topology in workerd (the edge worker and each region's worker in a workerd process of its own, joined over loopback HTTP as their service bindings are over the network) and the simulated fleet (time factor x20), two tenants sending ${RATE_PER_TENANT} streamed requests a second each (a cached system prompt, ~1,000 tokens of the request's own, ${ANSWER_TOKENS} tokens streamed over 1.5 s); each fault strikes one second into the load and lasts three seconds (a restart: until it is back; the load goes on until then), then two more seconds of load. The faults: a node answering 503; hung before its first byte, or after its first ${TOKENS_BEFORE_SILENCE} tokens (past every timeout; the region worker's stream idle timeout is 3 s); answering 307 to an internal URL; prefilling ${PREFILL_SLOWDOWN}x slower; killed mid-stream; every node of ${REGION} killed (its GPUs down, its worker up); the region's Durable Object restarted (\`POST /admin/regions/${REGION}/restart\`); ${REGION}'s region worker process killed with SIGKILL and started again (bundled and booted anew, on the same store), the edge staying up; every worker process (the edge's and each region's) killed with SIGKILL and started again on the same stores.`,
      "",
      `Lost means no answer within ${CLIENT_TIMEOUT_MS / 1000} s, or a stream cut without an error event; it must be 0. When every worker process is killed (the edge's too), a request under way is counted \`in flight at the kill\` and one refused while the edge is down \`refused while down\`, not lost. When only ${REGION}'s region worker is killed the edge stays up, so there is no such excuse: a stream it was relaying from ${REGION} must end with an SSE error event (\`region_stream_lost\`), and a request it had not answered yet, or sent while it is down, must be answered by ${FAILOVER_REGION} (the edge fails over). Duplicated: requests whose generation a node started (sent a first byte for) more than once, on any node, found by a tag in each request's prompt that the fleet records at its first byte; it must be 0. Leaked internal URL: answers whose body or headers show the URL the redirecting node points at; it must be 0. Recovery: from the fault's end to the first ok answer sent after it (for the region worker, its own recovery is in the last column: when ${REGION} itself answered ok again).`,
      "",
      formatResults(results),
      "",
      floodSummary(flood),
      "",
    ].join("\n");
    if (out) (await import("node:fs")).writeFileSync(out, md);
    console.log(md);
  } finally {
    await system.stop();
  }
}
