/**
 * warmpath-agent's loop: scrape the engine, report its load to the router, and keep the router's
 * picture of the node true when either side fails.
 *
 * One tick at a time (a slow engine or router never piles requests up):
 *
 * 1. Scrape the engine (`/metrics`, `/v1/models`, and `/props` once per boot for llama.cpp).
 *    Failure: logged once ("engine failing"). When nothing listens (connection refused), or after
 *    `downAfter` failed scrapes in a row, the engine is down: the node is deregistered
 *    (`DELETE /v1/nodes/{region}/{node_id}`) and a new boot id is due.
 *
 *    Why deregister: the node contract (src/contracts/node.ts) has no "unavailable" flag (unknown
 *    fields are dropped), and only stopping the reports would leave the node routable until the
 *    region's silence timeout (15 s by default), every request to it failing first. Deregistering
 *    takes it out at once, and drops its prefix index, which is right: a server that went away has
 *    most likely lost its cache. A failed scrape short of that (a busy engine answering slowly)
 *    sends no report, so the router keeps the node, and its index, on the last load it knew.
 *
 * 2. A new boot id when the agent starts, after an outage deregistered the node, or when the
 *    engine's markers show a restart the agent did not see as an outage (agent/boot.ts).
 *
 * 3. Post the report. It names the engine (`engine`: `vllm`, `sglang` or `llama.cpp`), the one
 *    `--engine` forced, else the one detected on this scrape's metrics. Failure: logged once
 *    ("router failing"), retried with bounded exponential backoff with jitter (agent/backoff.ts);
 *    the next success logs once ("router ok").
 *
 * 4. Identity (agent/credentials.ts): the first report registers the node with the
 *    region's node token and the answer carries the node's own secret ("registered"), which every
 *    later report and the deregistration carry instead. A 403 `node_identity_mismatch` means the
 *    id is held by another credential, usually this agent's previous run whose secret was lost on
 *    restart (use --state-file to keep it): logged once ("identity refused"), and registration is
 *    tried again when the router says the holder's entry expires (its Retry-After, waited at most
 *    --max-backoff-ms), else with backoff. A secret the router no longer knows (the node expired while the agent was cut off)
 *    is dropped and the node registered again at once.
 *
 * Nothing is thrown out of the loop but one fatal error: no KV capacity, from the engine or the
 * command line (the router needs it, and guessing it would corrupt the router's index).
 */
import { backoffDelay } from "./backoff.ts";
import { bootMarkers, newBootId, restartReason, type BootMarkers } from "./boot.ts";
import { ENGINES, detectEngine } from "./engines/detect.ts";
import { safePositive, type Capacity, type Engine, type EngineLoad, type EngineName } from "./engines/types.ts";
import { redactUrl } from "./http.ts";
import { MAX_TIMER_MS } from "./limits.ts";
import { parsePrometheus } from "./prometheus.ts";
import { NodeCredentials } from "./credentials.ts";
import { NodeIdentityError, abortReportOnStop, deregisterNode, postReport } from "./report-loop.ts";
import { EngineError, engineGet, engineGetJson, fetchModels } from "./scrape.ts";
import type { NodeReport } from "../src/contracts/node.ts";
import { MAX_RUNNING_REPORTED, type AgentConfig } from "./args.ts";

/** One per change of state, never one per attempt. */
export type AgentEvent =
  | { event: "engine_ok"; engine: EngineName; url: string }
  | { event: "engine_failing"; error: string }
  | { event: "engine_down"; reason: string }
  | { event: "boot"; boot_id: string; reason: string }
  | { event: "capacity"; tokens: number; source: string }
  | { event: "router_ok" }
  | { event: "router_failing"; error: string }
  | { event: "registered"; kept_in: "memory" | "state file" }
  | { event: "identity_refused"; error: string; retry_in_ms: number }
  | { event: "deregistered"; reason: "engine down" | "shutdown" | "fatal error" }
  | { event: "not_deregistered"; reason: "engine down" | "shutdown" | "fatal error" }
  | { event: "fatal"; error: string };

export interface AgentOptions extends AgentConfig {
  /** The region's node token: registers the node (later reports carry the node secret it returns). */
  token: string;
  /** The engine's API key, if it has one. */
  engineApiKey?: string | undefined;
  log?: (event: AgentEvent) => void;
  /** For the backoff's jitter; default Math.random. */
  random?: () => number;
}

export interface Agent {
  /** Stops the loop, deregisters the node (best effort: the router may be gone too). */
  stop(): Promise<void>;
  /** Settles when the loop ends: resolves after stop(), rejects on a fatal error. */
  done: Promise<void>;
}

/** An error the agent cannot work around by retrying. */
export class FatalAgentError extends Error {}

interface Scraped {
  engine: Engine;
  load: EngineLoad;
  models: string[];
  capacity: Capacity;
  /** The most requests the engine runs at once: --max-running, else what the engine says; undefined: not known. */
  maxRunning: number | undefined;
  markers: BootMarkers;
  restart: string | undefined;
}

export function startAgent(o: AgentOptions): Agent {
  const log = o.log ?? (() => {});
  const random = o.random ?? Math.random;
  const node = { region: o.region, node_id: o.nodeId };
  /** Aborted by stop(): the engine requests at once; the reports at once, or after a grace (see stop()). */
  const abort = new AbortController();
  const reportAbort = new AbortController();
  /** The metrics URL as logged: without the user and password it may carry. */
  const metricsShown = redactUrl(o.metricsUrl);
  const engineRequest = { timeoutMs: o.engineTimeoutMs, apiKey: o.engineApiKey, signal: abort.signal };
  const credentials = new NodeCredentials(o.token, {
    stateFile: o.stateFile,
    identity: { routerUrl: o.routerUrl, region: o.region, nodeId: o.nodeId },
  });

  let stopped = false;
  let wake: (() => void) | undefined;
  let fatal: Error | undefined;

  let engineSeen = false;
  let engineFailing = false;
  let engineFailures = 0;
  let routerFailing = false;
  let routerAttempts = 0;
  let identityRefused = false;
  /** A report may have registered the node since it was last deregistered. */
  let mayBeRegistered = false;

  let bootId: string | undefined;
  /** Why the next successful scrape needs a new boot id whatever the markers say. */
  let pendingBootReason: string | undefined = "agent started";
  let markers: BootMarkers | undefined;
  /** llama.cpp's /props, read once per boot. */
  let props: unknown;
  let loggedCapacity = "";

  const routerOk = () => {
    if (routerFailing || identityRefused) log({ event: "router_ok" });
    routerFailing = false;
    identityRefused = false;
    routerAttempts = 0;
  };
  const routerFailed = (err: unknown) => {
    routerAttempts++;
    if (!routerFailing) log({ event: "router_failing", error: message(err) });
    routerFailing = true;
  };

  const deregister = async (reason: "engine down" | "shutdown" | "fatal error"): Promise<void> => {
    try {
      const sent = await deregisterNode(o.routerUrl, credentials, node);
      // Without a secret there is nothing to deregister with: the router expires the node by silence.
      log({ event: sent ? "deregistered" : "not_deregistered", reason });
      routerOk();
    } catch (err) {
      // Unreachable router: it expires the node by silence, since no report follows.
      routerFailed(err);
    }
  };

  const scrape = async (): Promise<Scraped> => {
    const metrics = await engineGet(o.metricsUrl, engineRequest);
    const samples = parsePrometheus(metrics.text);
    let engine: Engine;
    try {
      engine = o.engine === "auto" ? detectEngine(samples) : ENGINES[o.engine];
    } catch (err) {
      throw new EngineError(`${metricsShown}: ${message(err)}`);
    }
    const page = { samples, headers: metrics.headers };
    let load: EngineLoad;
    try {
      load = engine.readLoad(page);
    } catch (err) {
      throw new EngineError(`${metricsShown}: ${message(err)}`);
    }
    const models = o.models ?? (await fetchModels(o.engineUrl, engineRequest));
    const next = bootMarkers(engine, page);
    const restart = pendingBootReason ?? restartReason(markers, next);
    let capacity: Capacity | undefined;
    if (o.kvCapacityTokens !== undefined) {
      capacity = { tokens: o.kvCapacityTokens, source: "--kv-capacity-tokens" };
    } else {
      let p = restart === undefined ? props : undefined;
      if (engine.capacityEndpoint && p === undefined) p = await engineGetJson(o.engineUrl + engine.capacityEndpoint, engineRequest);
      props = p;
      capacity = engine.readCapacity({ ...page, props: p });
      // Not a positive safe integer (the contract refuses it): unreadable, as if absent.
      if (capacity && safePositive(capacity.tokens) === undefined) capacity = undefined;
      if (!capacity) {
        throw new FatalAgentError(
          `cannot read the KV cache capacity from ${engine.name} (${CAPACITY_SOURCES[engine.name]}); pass --kv-capacity-tokens`,
        );
      }
    }
    const maxRunning = o.maxRunning ?? engine.readMaxRunning?.({ ...page, props });
    return { engine, load, models, capacity, maxRunning, markers: next, restart };
  };

  const engineFailed = async (err: unknown): Promise<void> => {
    engineFailures++;
    if (!engineFailing) log({ event: "engine_failing", error: message(err) });
    engineFailing = true;
    const refused = err instanceof EngineError && err.refused;
    if (!refused && engineFailures < o.downAfter) return;
    if (pendingBootReason === undefined) {
      pendingBootReason = "the engine was down";
      log({ event: "engine_down", reason: refused ? "connection refused" : `${engineFailures} failed scrapes in a row` });
    }
    if (mayBeRegistered) {
      mayBeRegistered = false;
      await deregister("engine down");
    }
  };

  /** One tick; resolves to the delay before the next. */
  const tick = async (): Promise<number> => {
    let s: Scraped;
    try {
      s = await scrape();
    } catch (err) {
      if (err instanceof FatalAgentError || stopped) throw err;
      await engineFailed(err);
      return o.intervalMs;
    }
    if (!engineSeen || engineFailing) log({ event: "engine_ok", engine: s.engine.name, url: metricsShown });
    engineSeen = true;
    engineFailing = false;
    engineFailures = 0;
    markers = s.markers;
    if (s.restart !== undefined || bootId === undefined) {
      bootId = newBootId();
      pendingBootReason = undefined;
      log({ event: "boot", boot_id: bootId, reason: s.restart ?? "agent started" });
    }
    const capacityKey = `${s.capacity.tokens} ${s.capacity.source}`;
    if (capacityKey !== loggedCapacity) log({ event: "capacity", tokens: s.capacity.tokens, source: s.capacity.source });
    loggedCapacity = capacityKey;

    const report: NodeReport = {
      node_id: o.nodeId,
      region: o.region,
      url: o.nodeUrl,
      models: s.models,
      kv_capacity_tokens: s.capacity.tokens,
      running: s.load.running,
      waiting: s.load.waiting,
      kv_usage: s.load.kvUsage,
      boot_id: bootId,
      // The engine detected on this page, or the one --engine forced: the router decides from it
      // whether a stream that broke can be continued on this node.
      engine: s.engine.reportedAs,
      // The contract's bound is past any engine's: a larger figure read from an engine is not sent rather than refused
      // (--max-running past it is a usage error).
      ...(s.maxRunning !== undefined && s.maxRunning <= MAX_RUNNING_REPORTED ? { max_running_requests: s.maxRunning } : {}),
    };
    mayBeRegistered = true; // even a report that timed out may have reached the router
    try {
      // stop() aborts it: a shutdown does not wait --router-timeout-ms for a silent router.
      const { registered } = await postReport(o.routerUrl, credentials, report, o.routerTimeoutMs, reportAbort.signal);
      if (registered) log({ event: "registered", kept_in: o.stateFile ? "state file" : "memory" });
    } catch (err) {
      if (stopped) throw err;
      if (err instanceof NodeIdentityError) {
        // The node is not (or no longer) ours to report: try registering again when the holder's
        // entry expires, as the router says, plus jitter, but no later than --max-backoff-ms (a
        // router's Retry-After may be anything); else with backoff.
        routerAttempts++;
        const backoff = backoffDelay(routerAttempts, o.intervalMs, o.maxBackoffMs, random);
        const delay =
          err.retryAfterMs !== undefined ? Math.min(o.maxBackoffMs, err.retryAfterMs + Math.round(random() * o.intervalMs)) : backoff;
        if (!identityRefused) log({ event: "identity_refused", error: err.message, retry_in_ms: delay });
        identityRefused = true;
        mayBeRegistered = false; // whoever holds the id, it is not this agent: nothing to deregister
        return delay;
      }
      routerFailed(err);
      return backoffDelay(routerAttempts, o.intervalMs, o.maxBackoffMs, random);
    }
    routerOk();
    return o.intervalMs;
  };

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      };
      // Past 2^31-1 ms a Node timer fires after 1 ms: never ask it for more (the flags are bounded too).
      const timer = setTimeout(done, Math.min(MAX_TIMER_MS, Math.max(0, ms)));
      wake = done;
    });

  const run = async (): Promise<void> => {
    while (!stopped) {
      let delay: number;
      try {
        delay = await tick();
      } catch (err) {
        if (stopped) break;
        if (err instanceof FatalAgentError) {
          fatal = err;
          log({ event: "fatal", error: err.message });
          if (mayBeRegistered) await deregister("fatal error");
          break;
        }
        // Not expected (every engine and router failure is handled above): keep going, once a tick.
        await engineFailed(err);
        delay = o.intervalMs;
      }
      if (stopped) break;
      await sleep(delay);
    }
  };

  const loop = run();
  let stopping: Promise<void> | undefined;
  return {
    done: loop.then(() => {
      if (fatal) throw fatal;
    }),
    stop() {
      stopping ??= (async () => {
        stopped = true;
        // A scrape in flight ends now, not at its timeout; a report as abortReportOnStop says (a
        // registration may take the deregistration's timeout, not --router-timeout-ms).
        abort.abort();
        const settled = abortReportOnStop(reportAbort, credentials);
        wake?.();
        await loop;
        settled();
        if (!fatal) await deregister("shutdown");
      })();
      return stopping;
    },
  };
}

/** Where each engine's capacity is read, for the error that says it could not be. */
const CAPACITY_SOURCES: Record<EngineName, string> = {
  vllm: "no vllm:cache_config_info with kv_cache_size_tokens or block_size and num_gpu_blocks",
  sglang: "no sglang:max_total_num_tokens; older SGLang servers do not export it",
  llamacpp: "no default_generation_settings.n_ctx in /props",
};

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
