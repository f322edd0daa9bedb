/**
 * warmpath-agent's command line: flags, their defaults, and the help text. The node token is
 * read from the environment, never from argv (argv is visible to every user of the machine).
 */
import { parseArgs } from "node:util";
import { ENGINE_NAMES, isEngineName } from "./engines/detect.ts";
import type { EngineName } from "./engines/types.ts";
import { redactUrl } from "./http.ts";
import { MAX_MODEL_NAME, MAX_MODELS, MAX_NODE_URL, MAX_REGION, MAX_RUNNING_REPORTED, MAX_TIMER_MS, NODE_ID } from "./limits.ts";

export interface AgentConfig {
  /** Router base URL; reports go to `{routerUrl}/v1/nodes/report`. */
  routerUrl: string;
  region: string;
  nodeId: string;
  /** The engine's URL as the router reaches it (the report's `url`). */
  nodeUrl: string;
  /** The engine's URL as the agent reaches it; default `nodeUrl`. */
  engineUrl: string;
  /** Default `{engineUrl}/metrics`. */
  metricsUrl: string;
  /** `auto` (default): detected from the metric names. */
  engine: EngineName | "auto";
  /** Models to report; default: the engine's `GET /v1/models`, on every tick. */
  models: string[] | undefined;
  /** Overrides the capacity read from the engine. */
  kvCapacityTokens: number | undefined;
  /** The most requests the engine runs at once; default: read from the engine where it says (llama.cpp), else not reported. */
  maxRunning?: number | undefined;
  /** Between reports; default 1000 ms. */
  intervalMs: number;
  /** One request to the engine; default 3000 ms. */
  engineTimeoutMs: number;
  /** One report to the router; default 5000 ms. */
  routerTimeoutMs: number;
  /** Longest wait between retries to a failing router; default 30000 ms. */
  maxBackoffMs: number;
  /** Failed scrapes in a row (other than a refused connection) before the node is deregistered; default 3. */
  downAfter: number;
  /** Where the node secret is kept across restarts (mode 0600); default: memory only. */
  stateFile?: string | undefined;
}

export class UsageError extends Error {}

export const TOKEN_ENV = "WARMPATH_NODE_TOKEN";
/**
 * The largest `max_running_requests` a report may carry (nodeMaxRunningSchema's bound; agent/limits.ts
 * holds the contract's bounds the agent repeats).
 */
export { MAX_RUNNING_REPORTED };

export const ENGINE_KEY_ENV = "WARMPATH_ENGINE_API_KEY";

/** The numeric options' defaults, by flag: the help text and docs/AGENT.md state these (agent/test/agent-docs.test.ts). */
export const AGENT_DEFAULTS = {
  "interval-ms": 1000,
  "engine-timeout-ms": 3000,
  "router-timeout-ms": 5000,
  "max-backoff-ms": 30000,
  "down-after": 3,
} as const;

/** Every flag (node:util parseArgs); all take a value but --help. */
export const AGENT_OPTIONS = {
  router: { type: "string" },
  region: { type: "string" },
  "node-id": { type: "string" },
  url: { type: "string" },
  "engine-url": { type: "string" },
  "metrics-url": { type: "string" },
  engine: { type: "string" },
  models: { type: "string" },
  "kv-capacity-tokens": { type: "string" },
  "max-running": { type: "string" },
  "interval-ms": { type: "string" },
  "engine-timeout-ms": { type: "string" },
  "router-timeout-ms": { type: "string" },
  "max-backoff-ms": { type: "string" },
  "down-after": { type: "string" },
  "state-file": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

export const HELP = `warmpath-agent: reports an inference server's load to a warmpath router.

Runs beside a vLLM, SGLang or llama.cpp server: every interval it reads the server's Prometheus
/metrics and GET /v1/models, and posts a load report to POST <router>/v1/nodes/report. The first
report registers the node. If the server goes away (connection refused, or --down-after failed
scrapes in a row), the node is deregistered at once (DELETE <router>/v1/nodes/<region>/<node-id>)
and registered again, with a new boot id, when the server is back; a restart seen only in the
server's counters or process start time also gets a new boot id. If the router is unreachable,
reports are retried with bounded exponential backoff. SIGINT/SIGTERM deregister the node and exit 0.

Identity: the region's node token only registers the node; the router's answer carries the node's
own secret, which every later report and the deregistration carry instead. Without --state-file the
secret is kept in memory only: a restarted agent finds its node id still held by its previous run
(logged: "router refused this node's identity") and registers it again once that entry expires
(the region's node_silence_ms, 15 s by default).

Usage:
  WARMPATH_NODE_TOKEN=... warmpath-agent --router URL --region NAME --node-id ID --url URL [options]

Required:
  --router URL              router base URL, e.g. https://warmpath.example.com
  --region NAME             the node's region (the token must be that region's node token; max 64
                            characters)
  --node-id ID              unique in the region: lowercase letters, digits, dashes (max 63)
  --url URL                 the inference server as the router reaches it, e.g. http://10.0.0.5:8000
                            (inside the region's allowed_origins; max 2048 characters)

Options:
  --engine-url URL          the server as this agent reaches it (default: --url)
  --metrics-url URL         its Prometheus metrics (default: <engine-url>/metrics)
  --engine NAME             vllm, sglang or llamacpp (default: auto, from the metric names); each
                            report names it (engine: vllm, sglang or llama.cpp), which tells the
                            router whether a broken stream can be continued on this node
  --models A,B              models to report, at most 64 names of at most 256 characters (default:
                            the server's GET /v1/models, every tick)
  --kv-capacity-tokens N    KV cache size in tokens (default: read from the server: vLLM
                            vllm:cache_config_info, SGLang sglang:max_total_num_tokens,
                            llama.cpp /props n_ctx of one slot; the agent exits with an error if
                            it can read none and this is not given)
  --max-running N           the most requests the server runs at once (vLLM --max-num-seqs, SGLang
                            --max-running-requests); the router predicts the wait past it (default:
                            llama-server's slots from /props, else not reported)
  --interval-ms N           between reports (default ${AGENT_DEFAULTS["interval-ms"]})
  --engine-timeout-ms N     one request to the server (default ${AGENT_DEFAULTS["engine-timeout-ms"]})
  --router-timeout-ms N     one report to the router (default ${AGENT_DEFAULTS["router-timeout-ms"]})
  --max-backoff-ms N        longest wait between retries to a failing router (default ${AGENT_DEFAULTS["max-backoff-ms"]})
  --down-after N            failed scrapes in a row before the node is deregistered (default ${AGENT_DEFAULTS["down-after"]};
                            a refused connection, nothing listening, deregisters at once)
  --state-file PATH         keep the node secret in this file (mode 0600) so a restarted agent keeps
                            its node's identity (default: memory only)
  -h, --help                this text

Durations are in ms, at most 2147483647 (Node's longest timer). A router's Retry-After is waited
at most --max-backoff-ms.

Environment:
  WARMPATH_NODE_TOKEN       the region's node token (required; never passed on the command line)
  WARMPATH_ENGINE_API_KEY   the server's API key, if it has one (vLLM or llama-server --api-key),
                            sent as a bearer token with every request to the server

Server flags: SGLang needs --enable-metrics; llama-server needs --metrics. With llama-server
-np N and a split (non-unified) KV cache, pass --kv-capacity-tokens = its -c.

Logs: one line on stderr per change of state (engine failing / ok, router failing / ok, new boot
id, deregistered), never one per attempt.`;

/** A positive integer flag, at most `max` (a safe integer: `1e17` would not survive JSON exactly). */
function positive(flag: string, raw: string | undefined, fallback: number, max: number = Number.MAX_SAFE_INTEGER): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) throw new UsageError(`--${flag} must be a positive integer, not '${raw}'`);
  if (n > max) throw new UsageError(`--${flag} must be at most ${max}, not '${raw}'`);
  return n;
}

/** A duration in ms: a Node timer takes at most 2^31-1 (past it, it fires after 1 ms). */
function duration(flag: keyof typeof AGENT_DEFAULTS, raw: string | undefined): number {
  return positive(flag, raw, AGENT_DEFAULTS[flag], MAX_TIMER_MS);
}

function httpUrl(flag: string, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new UsageError(`--${flag} must be an http(s) URL, not '${redactUrl(raw)}'`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new UsageError(`--${flag} must be an http(s) URL, not '${redactUrl(raw)}'`);
  return raw.replace(/\/+$/, "");
}

/** The models the report will carry: the contract's bounds (nodeModelsSchema), checked once here. */
function modelList(raw: string): string[] {
  const models = raw
    .split(",")
    .map((m) => m.trim())
    .filter(Boolean);
  if (!models.length) throw new UsageError("--models needs at least one model name");
  if (models.length > MAX_MODELS) throw new UsageError(`--models lists ${models.length} models; a report carries at most ${MAX_MODELS}`);
  const long = models.find((m) => m.length > MAX_MODEL_NAME);
  if (long !== undefined) {
    throw new UsageError(
      `--models: each name must be at most ${MAX_MODEL_NAME} characters, not ${long.length} ('${long.slice(0, 40)}...')`,
    );
  }
  return models;
}

/** Parses argv (without node and the script); `undefined` means: print the help and exit 0. */
export function parseAgentArgs(argv: readonly string[]): AgentConfig | undefined {
  // A token on the command line would be readable by every user (ps): refuse it outright.
  const tokenFlag = argv.find((a) => /^--(node-)?token(=|$)/.test(a));
  if (tokenFlag) throw new UsageError(`the node token is read from ${TOKEN_ENV}, never from the command line (${tokenFlag.split("=")[0]})`);
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: AGENT_OPTIONS,
    }));
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (values.help) return undefined;
  const missing = (["router", "region", "node-id", "url"] as const).filter((k) => !values[k]);
  if (missing.length) throw new UsageError(`missing --${missing.join(", --")} (see --help)`);
  const nodeId = values["node-id"]!;
  if (!NODE_ID.test(nodeId)) throw new UsageError(`--node-id must be lowercase letters, digits and dashes (max 63), not '${nodeId}'`);
  const engine = values.engine ?? "auto";
  if (engine !== "auto" && !isEngineName(engine)) throw new UsageError(`--engine must be one of ${ENGINE_NAMES.join(", ")} (or auto)`);
  const region = values.region!;
  if (region.length > MAX_REGION) throw new UsageError(`--region must be at most ${MAX_REGION} characters, not ${region.length}`);
  const nodeUrl = httpUrl("url", values.url!);
  if (nodeUrl.length > MAX_NODE_URL) throw new UsageError(`--url must be at most ${MAX_NODE_URL} characters, not ${nodeUrl.length}`);
  const engineUrl = values["engine-url"] ? httpUrl("engine-url", values["engine-url"]) : nodeUrl;
  const models = values.models === undefined ? undefined : modelList(values.models);
  return {
    routerUrl: httpUrl("router", values.router!),
    region,
    nodeId,
    nodeUrl,
    engineUrl,
    metricsUrl: values["metrics-url"] ? httpUrl("metrics-url", values["metrics-url"]) : `${engineUrl}/metrics`,
    engine,
    models,
    kvCapacityTokens:
      values["kv-capacity-tokens"] === undefined ? undefined : positive("kv-capacity-tokens", values["kv-capacity-tokens"], 0),
    maxRunning: values["max-running"] === undefined ? undefined : positive("max-running", values["max-running"], 0, MAX_RUNNING_REPORTED),
    intervalMs: duration("interval-ms", values["interval-ms"]),
    engineTimeoutMs: duration("engine-timeout-ms", values["engine-timeout-ms"]),
    routerTimeoutMs: duration("router-timeout-ms", values["router-timeout-ms"]),
    maxBackoffMs: duration("max-backoff-ms", values["max-backoff-ms"]),
    downAfter: positive("down-after", values["down-after"], AGENT_DEFAULTS["down-after"]),
    stateFile: values["state-file"] || undefined,
  };
}
