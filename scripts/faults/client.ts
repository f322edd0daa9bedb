/**
 * The scenarios' client: one streamed chat completion sent and classified by how it ended (ok,
 * failed cleanly, lost, corrupt: scripts/faults/run.ts), its tag in its prompt and `x-request-id`.
 */
import type { System } from "../system.ts";
import { type AnswerProblem, answerProblem, expectedAnswer } from "./answers.ts";
import { TENANT_OF_KEY, USAGE_TENANT_KEY } from "./ledger.ts";
import type { Outcome } from "./results.ts";
import { ANSWER_TOKENS, CLIENT_TIMEOUT_MS, INTERNAL_MARKER } from "./settings.ts";

/** One request, streamed, classified by how it ended. */
export interface Sent {
  outcome: Outcome;
  detail: string;
  /** When it was sent and when its answer ended (ms epoch). */
  at: number;
  endedAt: number;
  /** Whether the answer (body or headers) showed an internal URL. */
  leaked: boolean;
  /** Its tag (also its `x-request-id`), if it has one. */
  tag?: string | undefined;
  /** Status, time to the first byte, region and node that answered, nodes tried (x-warmpath-attempts), decision. */
  status?: number | undefined;
  ttftMs?: number | undefined;
  region?: string | undefined;
  node?: string | undefined;
  attempts?: number | undefined;
  decision?: string | undefined;
  /** A corrupt answer: what was wrong with it. */
  corrupt?: AnswerProblem | undefined;
  /** Any answer but an `ok` one: the last characters the client read. */
  tail?: string | undefined;
  /** The tenant that sent it (the usage ledger's key). */
  tenant?: string | undefined;
  /** The usage event the answer carried (the tenant that asks for it), as prompt and completion tokens. */
  usage?: { prompt: number; completion: number } | undefined;
}

/** One streamed chat completion as a scenario, the flood or a light tenant sends it. */
interface Ask {
  messages: unknown[];
  maxTokens: number;
  /** Sent as `x-request-id` (the router's log lines then carry it); also in the prompt, for the fleet. */
  tag?: string;
  /** Asks for the usage event (`stream_options.include_usage`). */
  usage?: boolean;
  /** The tenant the key belongs to, for the usage ledger's check. */
  tenant?: string;
}

/** Characters of a failed or lost stream kept for its diagnosis. */
const TAIL_CHARS = 600;

/**
 * One streamed request, timed to its first byte and classified by how it ended; a stream that
 * ended with `data: [DONE]` is `ok` only if it is, event for event, the answer one uninterrupted
 * node gives this request ({@link answerProblem}), else `corrupt`.
 */
export async function post(system: System, key: string, ask: Ask, timeoutMs: number): Promise<Sent> {
  const at = Date.now();
  const started = performance.now();
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  const body: Record<string, unknown> = {
    model: "llama-3.1-8b-instruct",
    stream: true,
    max_tokens: ask.maxTokens,
    messages: ask.messages,
    ...(ask.usage ? { stream_options: { include_usage: true } } : {}),
  };
  const tag = ask.tag;
  try {
    const res = await fetch(`${system.url}/v1/chat/completions`, {
      method: "POST",
      signal: abort.signal,
      // A redirect is the router's to handle: passed on to the client, it is counted, never followed.
      redirect: "manual",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        ...(tag === undefined ? {} : { "x-request-id": tag }),
      },
      body: JSON.stringify(body),
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
      tag,
      leaked: text.includes(INTERNAL_MARKER) || [...res.headers.values()].some((v) => v.includes(INTERNAL_MARKER)),
      status: res.status,
      ttftMs,
      region: res.headers.get("x-warmpath-region") ?? undefined,
      node: res.headers.get("x-warmpath-node") ?? undefined,
      attempts: Number(res.headers.get("x-warmpath-attempts") ?? 0),
      decision: res.headers.get("x-warmpath-decision") ?? undefined,
      tenant: ask.tenant,
      usage: res.status === 200 ? lastUsage(text) : undefined,
    };
    const tail = text.slice(-TAIL_CHARS);
    if (res.status !== 200) {
      const code = /"code":"([^"]+)"/.exec(text)?.[1] ?? "unknown";
      return { outcome: text.includes('"error"') ? "failed-cleanly" : "lost", detail: `${res.status} ${code}`, tail, ...seen };
    }
    if (text.trimEnd().endsWith("data: [DONE]")) {
      const problem = answerProblem(text, expectedAnswer(body));
      return problem
        ? { outcome: "corrupt", detail: problem.kind, corrupt: problem, tail, ...seen }
        : { outcome: "ok", detail: "200", ...seen };
    }
    const code = /"code":"([^"]+)"/.exec(text.slice(-2_000))?.[1];
    return code
      ? { outcome: "failed-cleanly", detail: `stream ${code}`, tail, ...seen }
      : { outcome: "lost", detail: "stream cut without an error event", tail, ...seen };
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    return {
      outcome: "lost",
      detail: abort.signal.aborted
        ? "no answer within the client timeout"
        : `connection: ${(e as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ""}`,
      at,
      endedAt: Date.now(),
      tag,
      leaked: false,
      tail: "",
    };
  } finally {
    clearTimeout(timer);
  }
}

/** The last usage event of a stream (its `usage` with prompt and completion tokens), if any. */
function lastUsage(text: string): { prompt: number; completion: number } | undefined {
  const at = text.lastIndexOf('"usage":{');
  if (at < 0) return undefined;
  const prompt = /"prompt_tokens":(\d+)/.exec(text.slice(at))?.[1];
  const completion = /"completion_tokens":(\d+)/.exec(text.slice(at))?.[1];
  return prompt && completion ? { prompt: Number(prompt), completion: Number(completion) } : undefined;
}

/**
 * A scenario's request: one of five support prompts (cached on the nodes after their first use),
 * then a user message with its tag and ~1,000 tokens of its own (uncached: 10 ms of prefill at the
 * fleet's speed, 100 ms on the slow node), answered in ANSWER_TOKENS tokens.
 */
export function send(system: System, key: string, i: number, tag: string): Promise<Sent> {
  const messages = [
    { role: "system", content: `Support agent ${i % 5}. ` + "Follow the policy. ".repeat(200) },
    { role: "user", content: `[request-tag:${tag}] question ${i}: ` + "Here is what happened to my order. ".repeat(115) },
  ];
  // One tenant asks for the usage event, the other does not (the router then takes out the one it asks for).
  const ask = { messages, maxTokens: ANSWER_TOKENS, tag, usage: key === USAGE_TENANT_KEY, tenant: TENANT_OF_KEY.get(key)! };
  return post(system, key, ask, CLIENT_TIMEOUT_MS);
}
