/**
 * One request as a client sees it: the demo's figures are what the nodes reported in the stream's
 * usage chunk and what the client timed, so this is where the streamed answer is read and checked
 * (content, usage, `[DONE]`) and the router's x-warmpath-* headers are recorded.
 */
import type { WorkloadRequest } from "../workload.ts";

/** What one request measured, client side. */
export interface RequestResult {
  id: number;
  tenant: number;
  user: string;
  turn: number;
  ok: boolean;
  error?: string;
  status?: number;
  region?: string;
  node?: string;
  decision?: string;
  policy?: string;
  prefixMatch?: string;
  /** Wall ms from sending to the first content chunk. */
  ttftMs?: number;
  /** Wall ms from sending to the end of the stream. */
  latencyMs?: number;
  /**
   * Wall ms from sending to the last content chunk. With `ttftMs` and `completionTokens`, the
   * decode phase as the client saw it, which the simulated node times by its model alone
   * (harness.ts: how far the harness stretched it).
   */
  lastTokenMs?: number;
  /** The usage chunk's `completion_tokens`. */
  completionTokens?: number;
  /** Wall ms the request waited past its scheduled arrival (previous turn or concurrency bound). */
  delayMs?: number;
  promptTokens?: number;
  cachedTokens?: number;
  /** 429s waited out before this answer (as the official SDKs do), 0 mostly. */
  retries?: number;
}

/**
 * A 429 is waited out and sent again, as the official OpenAI SDKs do by default (2 retries, honouring
 * `Retry-After` up to 60 s): the fair share answers a tenant over its share of a contended region
 * with 429 and the time its queue takes to drain, and a real client comes back then.
 */
const MAX_RETRIES = 2;
const MAX_RETRY_AFTER_S = 60;

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

/** Sends one streamed request and measures it. Never throws. */
export async function sendRequest(
  url: string,
  request: WorkloadRequest,
  headers: Record<string, string>,
): Promise<Omit<RequestResult, "id" | "tenant" | "user" | "turn" | "delayMs">> {
  const sent = performance.now();
  try {
    const post = () =>
      fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify(request.body),
      });
    let res = await post();
    let retries = 0;
    for (; res.status === 429 && retries < MAX_RETRIES; retries++) {
      const wait = Number(res.headers.get("retry-after"));
      if (!(wait >= 0 && wait <= MAX_RETRY_AFTER_S)) break;
      await res.body?.cancel();
      await new Promise((r) => setTimeout(r, wait * 1000));
      res = await post();
    }
    const meta = {
      status: res.status,
      region: res.headers.get("x-warmpath-region") ?? undefined,
      node: res.headers.get("x-warmpath-node") ?? undefined,
      decision: res.headers.get("x-warmpath-decision") ?? undefined,
      policy: res.headers.get("x-warmpath-policy") ?? undefined,
      prefixMatch: res.headers.get("x-warmpath-prefix-match") ?? undefined,
      retries,
    };
    if (!res.ok || !res.body) {
      const text = await res.text().catch(() => "");
      return { ok: false, ...meta, error: `HTTP ${res.status}: ${text.slice(0, 200)}` };
    }
    let ttftMs: number | undefined;
    let lastTokenMs: number | undefined;
    let usage: Usage | undefined;
    let done = false;
    let buffer = "";
    const decoder = new TextDecoder();
    for await (const chunk of res.body) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
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
        const event = JSON.parse(data) as { choices?: Array<{ delta?: { content?: string } }>; usage?: Usage | null; error?: unknown };
        if (event.error) return { ok: false, ...meta, error: `stream error: ${JSON.stringify(event.error).slice(0, 200)}` };
        if (event.choices?.some((c) => (c.delta?.content ?? "") !== "")) {
          lastTokenMs = performance.now() - sent;
          ttftMs ??= lastTokenMs;
        }
        if (event.usage) usage = event.usage;
      }
    }
    const latencyMs = performance.now() - sent;
    if (!done) return { ok: false, ...meta, ttftMs, latencyMs, error: "stream ended without [DONE]" };
    if (ttftMs === undefined) return { ok: false, ...meta, latencyMs, error: "no content chunk" };
    if (!usage || typeof usage.prompt_tokens !== "number") return { ok: false, ...meta, ttftMs, latencyMs, error: "no usage chunk" };
    return {
      ok: true,
      ...meta,
      ttftMs,
      latencyMs,
      lastTokenMs,
      completionTokens: usage.completion_tokens,
      promptTokens: usage.prompt_tokens,
      cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    };
  } catch (e) {
    return {
      ok: false,
      latencyMs: performance.now() - sent,
      error: e instanceof Error ? `${e.message} ${String(e.cause ?? "")}` : String(e),
    };
  }
}
