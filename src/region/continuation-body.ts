/**
 * The body that asks another node to finish an answer a failed node started (continue.ts): the
 * request as the client sent it (as the region forwarded it: cache salt and usage request
 * included), with the text the client already has appended, and the token budget less what it
 * used.
 * - chat: the messages plus a final assistant message holding the text, with
 *   `continue_final_message: true` and `add_generation_prompt: false` (vLLM's and SGLang's
 *   parameters; llama.cpp's server continues a final assistant message by default and takes them
 *   too), so the engine renders the assistant turn open and goes on from its last character. A
 *   request that already ends in an assistant message it asked to continue (a client's prefill)
 *   gets the text appended to that message instead;
 * - completions: the prompt with the text appended;
 * - `max_completion_tokens` / `max_tokens` less the tokens produced, never more than the client
 *   asked and never below 1 (a count that is not a non-negative integer is read as 0 produced: the
 *   caller's count is already bounded by the chunks relayed, src/region/seam.ts). A completion
 *   without `max_tokens` on vLLM or SGLang had their default of 16, which the continuation spends
 *   the rest of; other engines' defaults (unbounded) need no change.
 * A request whose continuation could not be exact is refused ({@link ContinuationRefusal}).
 */
import type { NodeEngine } from "../contracts/node.ts";
import type { SeamKind } from "./seam.ts";

/** vLLM's and SGLang's `max_tokens` for a completion that does not say (their CompletionRequest default). */
const COMPLETIONS_DEFAULT_MAX_TOKENS: Partial<Record<NodeEngine, number>> = { vllm: 16, sglang: 16 };

/**
 * Why a request's stream is not continued: more than one choice; logprobs (those of the text so far
 * are gone); a completion echoing its prompt or choosing among several (`best_of`), or a prompt
 * that is not one string; structured output (a grammar would start again at the continuation's
 * first token); a client prefill whose content is not a string.
 */
type ContinuationRefusal = "n" | "logprobs" | "echo" | "best-of" | "prompt" | "structured-output" | "prefill-parts";

type ContinuationBody =
  | { ok: true; body: Record<string, unknown> }
  /** The token budget is spent: the answer ends here, as the node would have ended it. */
  | { ok: false; finish: "length" }
  | { ok: false; refused: ContinuationRefusal };

type Json = Record<string, unknown>;

const STRUCTURED_KEYS = ["guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs", "json_schema", "grammar"];

/** Why this request's stream cannot be continued at all, whatever it streamed; undefined: it can. */
export function refusalOf(body: Json, kind: SeamKind): ContinuationRefusal | undefined {
  if (body.n !== undefined && body.n !== null && body.n !== 1) return "n";
  if (body.logprobs === true || (kind === "completion" && typeof body.logprobs === "number") || nonNull(body.top_logprobs))
    return "logprobs";
  if (kind === "completion") {
    if (body.echo === true) return "echo";
    if (typeof body.best_of === "number" && body.best_of > 1) return "best-of";
    if (typeof promptOf(body) !== "string" || nonNull(body.suffix)) return "prompt";
  }
  const format = (body.response_format as Json | null | undefined)?.type;
  if (format === "json_schema" || format === "json_object" || STRUCTURED_KEYS.some((k) => nonNull(body[k]))) return "structured-output";
  if (kind === "chat" && body.continue_final_message === true) {
    const last = lastMessage(body);
    if (last?.role === "assistant" && typeof last.content !== "string") return "prefill-parts";
  }
  return undefined;
}

/** The continuation's body, for a node running `engine`, after `text` (`tokens` of it) reached the client. */
export function continuationBody(
  body: Json,
  kind: SeamKind,
  text: string,
  tokens: number,
  engine: NodeEngine | undefined,
): ContinuationBody {
  const refused = refusalOf(body, kind);
  if (refused) return { ok: false, refused };
  const produced = Number.isSafeInteger(tokens) && tokens > 0 ? tokens : 0;
  const next: Json = { ...body };
  const budgetKeys = kind === "chat" ? ["max_completion_tokens", "max_tokens"] : ["max_tokens"];
  let budgeted = false;
  for (const key of budgetKeys) {
    const v = body[key];
    if (typeof v !== "number" || !Number.isFinite(v)) continue;
    budgeted = true;
    const left = Math.floor(v) - produced;
    if (left < 1) return { ok: false, finish: "length" };
    next[key] = Math.min(v, left);
  }
  const engineDefault = kind === "completion" && engine ? COMPLETIONS_DEFAULT_MAX_TOKENS[engine] : undefined;
  if (!budgeted && engineDefault !== undefined) {
    if (engineDefault - produced < 1) return { ok: false, finish: "length" };
    next.max_tokens = engineDefault - produced;
  }
  if (text === "") return { ok: true, body: next };
  if (kind === "completion") {
    next.prompt = promptOf(body)! + text;
    return { ok: true, body: next };
  }
  const messages = body.messages as Json[];
  const last = lastMessage(body);
  next.messages =
    body.continue_final_message === true && last?.role === "assistant"
      ? [...messages.slice(0, -1), { ...last, content: (last.content as string) + text }]
      : [...messages, { role: "assistant", content: text }];
  next.continue_final_message = true;
  next.add_generation_prompt = false;
  return { ok: true, body: next };
}

function nonNull(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false;
}

/** A completion's prompt when it is one string (alone or in a one-element array). */
function promptOf(body: Json): string | undefined {
  const p = body.prompt;
  if (typeof p === "string") return p;
  if (Array.isArray(p) && p.length === 1 && typeof p[0] === "string") return p[0];
  return undefined;
}

function lastMessage(body: Json): Json | undefined {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) return undefined;
  const last: unknown = messages[messages.length - 1];
  return last && typeof last === "object" ? (last as Json) : undefined;
}
