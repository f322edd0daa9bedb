/**
 * Reading the engine beside the agent: its `/metrics`, its model list (`GET /v1/models`, the
 * OpenAI shape every supported engine serves) and, for llama.cpp, `/props`. Any failure is an
 * `EngineError`; `refused` marks a refused connection, which means nothing listens: the server
 * process is gone (or not up yet), not merely slow.
 */
import { ConnectionError, briefBody, httpRequestText, redactUrl, type HttpResponse } from "./http.ts";
import { MAX_MODEL_NAME, MAX_MODELS } from "./limits.ts";

export class EngineError extends Error {
  readonly refused: boolean;
  constructor(message: string, refused = false) {
    super(message);
    this.refused = refused;
  }
}

export interface EngineRequest {
  timeoutMs: number;
  /** The engine's API key (vLLM `--api-key`, llama-server `--api-key`), sent as a bearer token. */
  apiKey?: string | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * GET `url`; resolves on 2xx, else throws an EngineError naming the URL (without the user and
 * password it may carry: the message is logged) and what went wrong.
 */
export async function engineGet(url: string, o: EngineRequest): Promise<HttpResponse> {
  const shown = redactUrl(url);
  let res: HttpResponse;
  try {
    res = await httpRequestText(url, {
      timeoutMs: o.timeoutMs,
      headers: o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {},
      signal: o.signal,
    });
  } catch (err) {
    const refused = err instanceof ConnectionError && err.code === "ECONNREFUSED";
    throw new EngineError(`GET ${shown}: ${refused ? "connection refused" : (err as Error).message}`, refused);
  }
  if (res.status < 200 || res.status > 299) {
    const body = briefBody(res.text);
    throw new EngineError(`GET ${shown}: HTTP ${res.status}${body ? `: ${body}` : ""}`);
  }
  return res;
}

export async function engineGetJson(url: string, o: EngineRequest): Promise<unknown> {
  const res = await engineGet(url, o);
  try {
    return JSON.parse(res.text) as unknown;
  } catch {
    throw new EngineError(`GET ${redactUrl(url)}: not JSON`);
  }
}

/** The ids of `GET {engineUrl}/v1/models` (`{"data":[{"id":...}]}`), deduplicated, in order. */
export async function fetchModels(engineUrl: string, o: EngineRequest): Promise<string[]> {
  const url = `${engineUrl}/v1/models`;
  return modelIds(await engineGetJson(url, o), redactUrl(url));
}

/** At most MAX_MODELS ids (the contract's bound), each at most MAX_MODEL_NAME characters. */
export function modelIds(body: unknown, url = "/v1/models"): string[] {
  const data = (body as { data?: unknown } | null)?.data;
  const ids = Array.isArray(data) ? data.map((m) => (m as { id?: unknown } | null)?.id) : [];
  const models = [...new Set(ids.filter((id): id is string => typeof id === "string" && id.length > 0 && id.length <= MAX_MODEL_NAME))];
  if (models.length === 0) throw new EngineError(`GET ${url}: no model ids in the answer`);
  return models.slice(0, MAX_MODELS);
}
