/**
 * The live goodput benchmark's client: replays requests open loop (each sent at its scheduled
 * time whatever happened to the ones before, as independent users would) and measures each one as
 * the client sees it. It runs in a process of its own (client-child.ts), so that neither the
 * fleet's timers nor the router's work share its event loop.
 *
 * Per request: the time to first token is from the request's send to the first SSE chunk that
 * carries content (`choices[].delta.content` non-empty), not to the response head (warmpath's and
 * the fleet's streams send their head before the prefill ends). The answer must then end with a
 * usage chunk and `data: [DONE]`. A refusal (429/503) and every other HTTP error are read for
 * OpenAI's error shape (`{"error": {"message", "type", "code"}}`) and `Retry-After`.
 *
 * Outcomes: `answered`; `refused` (429 or 503 with an error body); `error` (another status);
 * `gave-up`: no first token by the request's give-up time, which is always after its objective
 * (so giving up never turns an answer in time into a miss), and the client closes the connection
 * as a user would; `lost`: no answer that says what happened (the connection failed or closed
 * without a status, or a stream that stopped without `[DONE]` or an error event, or went silent
 * for `STALL_MS` after its first token).
 */
import { Agent, request as httpRequest } from "node:http";
import { monitorEventLoopDelay } from "node:perf_hooks";

/** A stream silent this long after its first token is cut and counted lost (answers here take ~2 s). */
const STALL_MS = 60_000;
/** Error bodies are read up to this many bytes. */
const MAX_ERROR_BODY = 64 * 1024;

export interface ScheduledRequest {
  id: number;
  /** When to send it, ms from the start of the replay. */
  dueMs: number;
  body: string;
  /** No first token by this many ms after sending: the client gives up (closes the connection). */
  giveUpMs: number;
}

export interface Target {
  /** Base URL (the edge, or the naive router). */
  url: string;
  headers: Record<string, string>;
}

export type Outcome = "answered" | "refused" | "error" | "gave-up" | "lost";

/** One request as the client saw it. */
export interface RequestRecord {
  id: number;
  /** How late it was sent against its schedule (ms): the client's own lag. */
  sendLagMs: number;
  outcome: Outcome;
  status?: number;
  /** Send to the first content chunk (ms). */
  ttftMs?: number;
  /** Send to the end of the answer (ms). */
  totalMs?: number;
  /** The error body's `error.code` and `error.type` (refused, error); or what went wrong (lost). */
  code?: string;
  type?: string;
  /** A non-2xx answer whose body is OpenAI's error shape. */
  shaped?: boolean;
  retryAfter?: string;
  /** The node that answered: `x-warmpath-node` or `x-naive-node`. */
  node?: string;
  /** usage.prompt_tokens and usage.prompt_tokens_details.cached_tokens of the answer. */
  promptTokens?: number;
  cachedTokens?: number;
  /** warmpath's `x-warmpath-queued-ms` (time held in the region's queue). */
  queuedMs?: number;
  detail?: string;
}

/** Event-loop lag of this process (ms beyond the monitor's 10 ms timer): p50, p99, max. */
export interface LoopLag {
  p50: number;
  p99: number;
  max: number;
}

/** Starts measuring this process's event-loop lag; `stop` returns it. */
export function monitorLoopLag(): { stop(): LoopLag } {
  const resolutionMs = 10;
  const h = monitorEventLoopDelay({ resolution: resolutionMs });
  h.enable();
  // The histogram records each timer's whole interval: the lag is what it took beyond the resolution.
  const lag = (ns: number) => Math.max(0, ns / 1e6 - resolutionMs);
  return {
    stop() {
      h.disable();
      return { p50: lag(h.percentile(50)), p99: lag(h.percentile(99)), max: lag(h.max) };
    },
  };
}

export interface ReplayResult {
  records: RequestRecord[];
  /** Wall ms from the first send to the last answer. */
  wallMs: number;
  /** The client process's event-loop lag during the replay. */
  loopLagMs: LoopLag;
}

interface OpenAiError {
  error?: { message?: unknown; type?: unknown; code?: unknown };
}

/** Sends one request and measures it. Never throws. */
function one(agent: Agent, target: Target, r: ScheduledRequest, sendLagMs: number): Promise<RequestRecord> {
  return new Promise((resolve) => {
    const rec: RequestRecord = { id: r.id, sendLagMs, outcome: "lost" };
    const sent = performance.now();
    let settled = false;
    let firstAt = NaN;
    let stall: NodeJS.Timeout | undefined;
    const finish = (patch: Partial<RequestRecord>) => {
      if (settled) return;
      settled = true;
      clearTimeout(giveUp);
      clearTimeout(stall);
      resolve({ ...rec, ...patch });
    };
    const req = httpRequest(
      `${target.url}/v1/chat/completions`,
      {
        method: "POST",
        agent,
        headers: { ...target.headers, "content-type": "application/json", "content-length": Buffer.byteLength(r.body) },
      },
      (res) => {
        rec.status = res.statusCode;
        rec.node = (res.headers["x-warmpath-node"] ?? res.headers["x-naive-node"]) as string | undefined;
        const queued = res.headers["x-warmpath-queued-ms"];
        if (queued !== undefined) rec.queuedMs = Number(queued);
        if (res.statusCode !== 200) {
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (c: string) => {
            if (body.length < MAX_ERROR_BODY) body += c;
          });
          res.on("end", () => {
            let parsed: OpenAiError | undefined;
            try {
              parsed = JSON.parse(body) as OpenAiError;
            } catch {
              // not JSON: not OpenAI's shape
            }
            const e = parsed?.error;
            const shaped =
              !!e && typeof e === "object" && typeof e.message === "string" && (typeof e.type === "string" || typeof e.code === "string");
            const status = res.statusCode ?? 0;
            finish({
              outcome: status === 429 || status === 503 ? "refused" : "error",
              shaped,
              code: typeof e?.code === "string" ? e.code : undefined,
              type: typeof e?.type === "string" ? e.type : undefined,
              retryAfter: res.headers["retry-after"] as string | undefined,
              totalMs: performance.now() - sent,
              detail: shaped ? undefined : body.slice(0, 200),
            });
          });
          res.on("error", (err) => finish({ outcome: "lost", code: "response_error", detail: err.message }));
          return;
        }
        let buffer = "";
        let done = false;
        let streamError: string | undefined;
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          buffer += chunk;
          let nl: number;
          while ((nl = buffer.indexOf("\n")) >= 0) {
            const line = buffer.slice(0, nl).trim();
            buffer = buffer.slice(nl + 1);
            if (!line.startsWith("data:")) continue;
            const data = line.slice(5).trim();
            if (data === "[DONE]") {
              done = true;
              continue;
            }
            // After the first token only the usage chunk and error events need reading.
            if (!Number.isNaN(firstAt) && !data.includes('"usage":{') && !data.includes('"error"')) continue;
            let event: { choices?: Array<{ delta?: { content?: string | null } }>; usage?: unknown; error?: unknown };
            try {
              event = JSON.parse(data) as typeof event;
            } catch {
              streamError = `malformed chunk: ${data.slice(0, 100)}`;
              continue;
            }
            if (event.error) streamError = `error event: ${JSON.stringify(event.error).slice(0, 200)}`;
            if (Number.isNaN(firstAt) && event.choices?.some((c) => (c.delta?.content ?? "") !== "")) {
              firstAt = performance.now();
              clearTimeout(giveUp);
              stall = setTimeout(() => {
                req.destroy();
                finish({ outcome: "lost", code: "stalled", ttftMs: firstAt - sent, detail: `no end ${STALL_MS} ms after the first token` });
              }, STALL_MS);
            }
            if (event.usage && typeof event.usage === "object") {
              const u = event.usage as { prompt_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null };
              rec.promptTokens = u.prompt_tokens;
              rec.cachedTokens = u.prompt_tokens_details?.cached_tokens ?? 0;
            }
          }
        });
        res.on("end", () => {
          const ttftMs = Number.isNaN(firstAt) ? undefined : firstAt - sent;
          const totalMs = performance.now() - sent;
          // A clear error event mid-stream is an error the client was told of; a stream that just stops is lost.
          if (streamError) return finish({ outcome: "error", code: "stream_error", detail: streamError, ttftMs, totalMs });
          if (!done) return finish({ outcome: "lost", code: "no_done", detail: "the stream ended without [DONE]", ttftMs, totalMs });
          if (ttftMs === undefined) return finish({ outcome: "lost", code: "no_content", detail: "no content chunk", totalMs });
          if (rec.promptTokens === undefined)
            return finish({ outcome: "lost", code: "no_usage", detail: "no usage chunk", ttftMs, totalMs });
          finish({ outcome: "answered", ttftMs, totalMs });
        });
        res.on("error", (err) => finish({ outcome: "lost", code: "response_error", detail: err.message }));
        res.on("close", () => {
          if (!res.complete) finish({ outcome: "lost", code: "closed", detail: "the connection closed mid-answer" });
        });
      },
    );
    const giveUp = setTimeout(() => {
      req.destroy();
      finish({ outcome: "gave-up", totalMs: performance.now() - sent });
    }, r.giveUpMs);
    // Which error, and whether it came on a kept-alive socket the server may have closed as this
    // request went out (the keep-alive race, which Node's documentation advises retrying): a request
    // lost before any status never reached a handler that answers, and this is all that tells why.
    req.on("error", (err: NodeJS.ErrnoException) =>
      finish({
        outcome: "lost",
        code: "transport",
        detail: `${err.code ?? "error"}: ${err.message}${req.reusedSocket ? " (on a reused keep-alive socket)" : ""}`,
      }),
    );
    req.end(r.body);
  });
}

/**
 * How long a kept-alive connection may sit idle before the client closes it itself: 4 s, undici's
 * default (what fetch, and so the OpenAI SDK, uses). workerd closes an idle connection after 15 s
 * without saying so in a `Keep-Alive` header (measured on `npm start`'s edge), and Node's agent
 * otherwise keeps an idle socket until the server closes it: a request sent on one just as the
 * server closes it is reset before any status (the keep-alive race Node's documentation describes),
 * which the client would count against the router as lost.
 */
export const IDLE_SOCKET_MS = 4_000;

/** Sends every request at its scheduled time and waits for every answer (or give-up). */
export async function replay(
  target: Target,
  schedule: readonly ScheduledRequest[],
  idleSocketMs: number = IDLE_SOCKET_MS,
): Promise<ReplayResult> {
  // `timeout` closes a socket idle that long in the agent's free list; one in use only hears of it.
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity, timeout: idleSocketMs });
  const loop = monitorLoopLag();
  const start = performance.now();
  const pending: Promise<RequestRecord>[] = [];
  const order = [...schedule].sort((a, b) => a.dueMs - b.dueMs || a.id - b.id);
  for (const r of order) {
    const wait = start + r.dueMs - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    pending.push(one(agent, target, r, Math.max(0, performance.now() - start - r.dueMs)));
  }
  const records = await Promise.all(pending);
  const wallMs = performance.now() - start;
  const loopLagMs = loop.stop();
  agent.destroy();
  return { records: records.sort((a, b) => a.id - b.id), wallMs, loopLagMs };
}
