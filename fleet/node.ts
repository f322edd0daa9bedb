/**
 * One simulated GPU inference node: an OpenAI-compatible HTTP server (vLLM-flavoured) in front of
 * the timing model (engine.ts) and the node's own prefix cache (kv-cache.ts), plus load reports to
 * the router, fault knobs, and crash/restart.
 *
 * Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health,
 * GET /metrics; control: GET /admin/state, POST /admin/faults, POST /admin/restart,
 * POST /admin/crash. Listens on 127.0.0.1 only.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { Engine } from "./engine.ts";
import { FaultsSchema, NO_FAULTS, type Faults } from "./config.ts";
import { Histogram, TTFT_BUCKETS, renderMetrics } from "./metrics.ts";
import { chunk, errorBody, fillerToken, fullResponse, newId, usage, usageChunk, type Kind, type StreamIds } from "./openai.ts";
import { RequestError, blockHashes, countTokens, renderChat, renderCompletion } from "./prompt.ts";
import { startReporter, type LoadReport, type Reporter } from "./report.ts";

export type { Faults } from "./config.ts";

export interface NodeOptions {
  id: string;
  region: string;
  models: string[];
  kvCapacityTokens: number;
  prefillTokensPerSecond: number;
  decodeTokensPerSecond: number;
  maxRunning: number;
  timeFactor: number;
  /** 0 = ephemeral; a restart reuses the port first bound. */
  port?: number;
  defaultMaxTokens?: number;
  forceIncludeUsage?: boolean;
  faults?: Partial<Faults>;
  /** Where and how to push load reports; omitted = standalone node. */
  router?: { url: string; token: string; intervalMs?: number };
  log?: (event: Record<string, unknown>) => void;
}

export interface NodeState {
  node_id: string;
  region: string;
  url: string;
  up: boolean;
  boot_id: string;
  models: string[];
  kv_capacity_tokens: number;
  running: number;
  waiting: number;
  kv_usage: number;
  cached_blocks: number;
  cached_tokens: number;
  faults: Faults;
}

export interface NodeHandle {
  readonly id: string;
  readonly region: string;
  readonly url: string;
  readonly port: number;
  readonly bootId: string;
  readonly up: boolean;
  /** The current process's engine (replaced on restart). */
  readonly engine: Engine;
  state(): NodeState;
  setFaults(f: Partial<Faults>): Faults;
  /** Closes every socket and stops listening; cache and in-flight requests are lost. */
  crash(): Promise<void>;
  /** Crash, stay down `downMs`, come back on the same port with an empty cache and a new boot_id. */
  restart(downMs?: number): Promise<void>;
  /** Clean shutdown: deregisters from the router (best effort), then closes. */
  stop(): Promise<void>;
}

const HOST = "127.0.0.1";
const MAX_BODY_BYTES = 32 * 1024 * 1024;
/** Longest prompt + answer accepted, like vLLM's max_model_len (capped by the KV pool). */
const MAX_MODEL_LEN = 131_072;

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: ServerResponse, status: number, message: string, type: string, param: string | null = null): void {
  sendJson(res, status, errorBody(message, type, param, status));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on("data", (b: Buffer) => {
      size += b.length;
      if (size > MAX_BODY_BYTES) {
        reject(new RequestError("request body too large", null, 413));
        req.destroy();
      } else parts.push(b);
    });
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

function parseJsonObject(text: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new RequestError(`Invalid JSON body: ${(err as Error).message}`);
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) throw new RequestError("request body must be a JSON object");
  return v as Record<string, unknown>;
}

function optionalPositiveInt(body: Record<string, unknown>, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw new RequestError(`${key} must be a positive integer`, key);
  return v;
}

export async function startNode(o: NodeOptions): Promise<NodeHandle> {
  const defaultMaxTokens = o.defaultMaxTokens ?? 64;
  const maxModelLen = Math.min(MAX_MODEL_LEN, o.kvCapacityTokens);
  const model = o.models[0]!;
  let faults: Faults = { ...NO_FAULTS, ...o.faults };
  let port = o.port ?? 0;
  let server: Server | undefined;
  let reporter: Reporter | undefined;
  let engine: Engine;
  let bootId = "";
  let up = false;
  /** Timers of the current process (latency faults, scheduled restarts): cleared on crash. */
  const timers = new Set<ReturnType<typeof setTimeout>>();
  let autoRestart: ReturnType<typeof setTimeout> | undefined;
  let ttft: Histogram;
  let queueTime: Histogram;
  let success: Record<string, number>;
  const url = () => `http://${HOST}:${port}`;

  const newProcess = () => {
    engine = new Engine({
      kvCapacityTokens: o.kvCapacityTokens,
      prefillTokensPerSecond: o.prefillTokensPerSecond,
      decodeTokensPerSecond: o.decodeTokensPerSecond,
      maxRunning: o.maxRunning,
      timeFactor: o.timeFactor,
    });
    bootId = randomBytes(8).toString("hex");
    ttft = new Histogram(TTFT_BUCKETS);
    queueTime = new Histogram(TTFT_BUCKETS);
    success = { stop: 0, length: 0, abort: 0 };
  };

  const state = (): NodeState => ({
    node_id: o.id,
    region: o.region,
    url: url(),
    up,
    boot_id: bootId,
    models: o.models,
    kv_capacity_tokens: o.kvCapacityTokens,
    running: engine.numRunning,
    waiting: engine.numWaiting,
    kv_usage: engine.cache.usage(),
    cached_blocks: engine.cache.heldBlocks,
    cached_tokens: engine.cache.heldBlocks * engine.cache.blockTokens,
    faults,
  });

  const report = (): LoadReport => ({
    node_id: o.id,
    region: o.region,
    url: url(),
    models: o.models,
    kv_capacity_tokens: o.kvCapacityTokens,
    running: engine.numRunning,
    waiting: engine.numWaiting,
    kv_usage: engine.cache.usage(),
    boot_id: bootId,
  });

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        timers.delete(t);
        resolve();
      }, ms);
      timers.add(t);
    });

  const setFaults = (f: Partial<Faults>): Faults => {
    faults = { ...faults, ...f };
    o.log?.({ event: "faults", region: o.region, node_id: o.id, faults });
    return faults;
  };

  /** The inference endpoints: faults, validation, then the engine drives the answer. */
  async function inference(kind: Kind, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const f = faults;
    const text = await readBody(req);
    if (f.extra_latency_ms > 0) {
      await sleep(f.extra_latency_ms);
      if (res.destroyed || !up) return;
    }
    if (f.error_rate > 0 && Math.random() < f.error_rate) {
      sendError(res, 500, "simulated node failure (fault injection)", "InternalServerError");
      return;
    }
    const body = parseJsonObject(text);
    const requested = body.model;
    if (typeof requested !== "string") throw new RequestError("model must be a string", "model");
    if (!o.models.includes(requested)) throw new RequestError(`The model \`${requested}\` does not exist.`, "model", 404);
    const prompt = kind === "chat" ? renderChat(body) : renderCompletion(body);
    if (body.n !== undefined && body.n !== null && body.n !== 1) throw new RequestError("n > 1 is not simulated", "n");
    const maxTokens = optionalPositiveInt(body, "max_completion_tokens") ?? optionalPositiveInt(body, "max_tokens");
    const completionTokens = Math.min(maxTokens ?? defaultMaxTokens, defaultMaxTokens);
    const finishReason = maxTokens !== undefined && maxTokens <= defaultMaxTokens ? "length" : "stop";
    const promptTokens = countTokens(prompt);
    if (promptTokens + completionTokens > maxModelLen) {
      throw new RequestError(
        `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${promptTokens + completionTokens} tokens (${promptTokens} in the messages, ${completionTokens} in the completion).`,
        "messages",
      );
    }
    const cacheSalt = typeof body.cache_salt === "string" ? body.cache_salt : undefined;
    const hashes = blockHashes(prompt, requested, cacheSalt);
    const stream = body.stream === true;
    const so = body.stream_options as { include_usage?: unknown } | undefined;
    const includeUsage = o.forceIncludeUsage === true || so?.include_usage === true;
    const ids: StreamIds = { kind, id: newId(kind), created: Math.floor(Date.now() / 1000), model: requested };
    const seed = promptTokens;

    if (stream) {
      // vLLM's server sends the response head at once; the first data arrives after prefill.
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-request-id": ids.id });
      res.flushHeaders();
    }
    let cachedTokens = 0;
    let answer = "";
    let finished = false;
    const write = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    const handle = engine.submit({
      hashes,
      promptTokens,
      completionTokens,
      onPrefilled: (info) => {
        cachedTokens = info.cachedTokens;
        queueTime.observe(info.queuedMs / 1000);
        ttft.observe((info.queuedMs + info.prefillMs) / 1000);
      },
      onToken: (i) => {
        const t = fillerToken(seed, i);
        answer += t;
        if (stream) write(chunk(ids, t, i === completionTokens - 1 ? finishReason : null, i === 0));
      },
      onDone: () => {
        finished = true;
        success[finishReason] = (success[finishReason] ?? 0) + 1;
        const u = usage(promptTokens, completionTokens, cachedTokens);
        if (!stream) return sendJson(res, 200, fullResponse(ids, answer, finishReason, u));
        if (includeUsage) write(usageChunk(ids, u));
        res.end("data: [DONE]\n\n");
      },
    });
    res.on("close", () => {
      if (!finished) {
        handle.cancel();
        success.abort = (success.abort ?? 0) + 1;
      }
    });
  }

  async function admin(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = await readBody(req);
    const body = text.trim() === "" ? {} : parseJsonObject(text);
    if (path === "/admin/faults") {
      const parsed = FaultsSchema.partial().safeParse(body);
      if (!parsed.success) {
        const msg = parsed.error.issues.map((i) => `${i.path.join(".") || "(body)"}: ${i.message}`).join("; ");
        throw new RequestError(msg);
      }
      return sendJson(res, 200, { faults: setFaults(parsed.data) });
    }
    const ms = (key: string) => {
      const v = body[key];
      if (v === undefined) return undefined;
      if (typeof v !== "number" || v < 0) throw new RequestError(`${key} must be a number >= 0`, key);
      return v;
    };
    if (path === "/admin/restart") {
      const downMs = ms("down_ms") ?? 0;
      // Answer first, then die: the restart closes this connection too.
      res.on("finish", () => void handle.restart(downMs));
      return sendJson(res, 200, { restarting: true, down_ms: downMs, old_boot_id: bootId });
    }
    if (path === "/admin/crash") {
      const after = ms("restart_after_ms");
      res.on("finish", () => {
        void handle.crash().then(() => {
          if (after !== undefined) autoRestart = setTimeout(() => void handle.restart(0), after);
        });
      });
      return sendJson(res, 200, { crashing: true, restart_after_ms: after ?? null });
    }
    sendError(res, 404, `no such admin endpoint ${path}`, "NotFoundError");
  }

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0]!;
    const method = req.method ?? "GET";
    const isAdmin = path.startsWith("/admin/");
    if (faults.hang && !isAdmin) return; // accepted, never answered (the socket is closed on crash/stop)
    if (method === "POST" && path === "/v1/chat/completions") return inference("chat", req, res);
    if (method === "POST" && path === "/v1/completions") return inference("completion", req, res);
    if (method === "GET" && path === "/health") {
      res.writeHead(200, { "content-length": 0 });
      return void res.end();
    }
    if (method === "GET" && path === "/v1/models") {
      const created = Math.floor(Date.now() / 1000);
      return sendJson(res, 200, {
        object: "list",
        data: o.models.map((id) => ({
          id,
          object: "model",
          created,
          owned_by: "warmpath-fleet",
          root: id,
          parent: null,
          max_model_len: maxModelLen,
        })),
      });
    }
    if (method === "GET" && path === "/metrics") {
      const c = engine.counters;
      const text = renderMetrics({
        model,
        running: engine.numRunning,
        waiting: engine.numWaiting,
        kvUsage: engine.cache.usage(),
        promptTokens: c.promptTokens,
        generationTokens: c.generationTokens,
        prefixQueries: c.prefixQueryTokens,
        prefixHits: c.prefixHitTokens,
        success,
        ttft,
        queue: queueTime,
      });
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
      return void res.end(text);
    }
    if (method === "GET" && path === "/admin/state") return sendJson(res, 200, state());
    if (method === "POST" && isAdmin) return admin(path, req, res);
    sendError(res, 404, `${method} ${path} not found`, "NotFoundError");
  }

  const listen = async () => {
    const s = createServer((req, res) => {
      onRequest(req, res).catch((err: unknown) => {
        if (res.headersSent) return void res.destroy();
        if (err instanceof RequestError) {
          sendError(res, err.status, err.message, err.status === 404 ? "NotFoundError" : "BadRequestError", err.param);
        } else {
          sendError(res, 500, String((err as Error)?.message ?? err), "InternalServerError");
        }
      });
    });
    s.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      s.once("error", reject);
      s.listen(port, HOST, () => {
        s.off("error", reject);
        resolve();
      });
    });
    server = s;
    port = (s.address() as AddressInfo).port;
    up = true;
    if (o.router) {
      reporter = startReporter({
        routerUrl: o.router.url,
        token: o.router.token,
        intervalMs: o.router.intervalMs ?? 1000,
        report,
        log: o.log,
      });
    }
    o.log?.({ event: "node_listening", region: o.region, node_id: o.id, url: url(), models: o.models, boot_id: bootId });
  };

  /** Everything a dying process loses: sockets, listening socket, timers, in-flight work. */
  const down = async (deregister: boolean) => {
    up = false;
    const r = reporter;
    reporter = undefined;
    const s = server;
    server = undefined;
    for (const t of timers) clearTimeout(t);
    timers.clear();
    engine.stop();
    if (s) {
      const closed = new Promise<void>((resolve) => s.close(() => resolve()));
      s.closeAllConnections();
      await closed;
    }
    await r?.stop(deregister);
  };

  const handle: NodeHandle = {
    id: o.id,
    region: o.region,
    get url() {
      return url();
    },
    get port() {
      return port;
    },
    get bootId() {
      return bootId;
    },
    get up() {
      return up;
    },
    get engine() {
      return engine;
    },
    state,
    setFaults,
    async crash() {
      if (!up) return;
      await down(false);
      o.log?.({ event: "node_crashed", region: o.region, node_id: o.id });
    },
    async restart(downMs = 0) {
      if (autoRestart) clearTimeout(autoRestart);
      autoRestart = undefined;
      o.log?.({ event: "node_restarting", region: o.region, node_id: o.id, old_boot_id: bootId, down_ms: downMs });
      await down(false);
      if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
      newProcess();
      await listen();
    },
    async stop() {
      if (autoRestart) clearTimeout(autoRestart);
      autoRestart = undefined;
      if (!up) return;
      await down(true);
      o.log?.({ event: "node_stopped", region: o.region, node_id: o.id });
    },
  };

  newProcess();
  await listen();
  return handle;
}
