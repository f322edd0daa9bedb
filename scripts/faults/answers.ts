/**
 * The answer one node of the fault fleet streams for a request, uninterrupted (deterministic filler:
 * fleet/openai.ts, fleet/continuation.ts), and how a stream that ended with `data: [DONE]` differs
 * from it (`corrupt`: scripts/faults/run.ts).
 */
import { planAnswer, planToken } from "../../fleet/continuation.ts";
import { countTokens, renderChat } from "../../fleet/prompt.ts";
import { ANSWER_TOKENS } from "./settings.ts";

/** The answer one node of the fault fleet streams, uninterrupted, for a request. */
export interface ExpectedAnswer {
  /** Its tokens' text, in order (fleet/continuation.ts: the filler of the prompt's seed). */
  tokens: string[];
  finishReason: string;
  /** Whether the client asked for the usage event (the router adds its own request for it and takes that out). */
  usage: boolean;
}

/**
 * What the fleet's node answers `body` (a chat completion) from start to end: the filler answer
 * of its rendered prompt (fleet/prompt.ts, fleet/continuation.ts), `max_tokens` of it or the
 * natural ANSWER_TOKENS (every node's `default_max_tokens` here, faultFleet), whichever is fewer.
 */
export function expectedAnswer(body: Record<string, unknown>, naturalTokens = ANSWER_TOKENS): ExpectedAnswer {
  const seed = countTokens(renderChat(body));
  const maxTokens = typeof body.max_tokens === "number" ? body.max_tokens : undefined;
  const plan = planAnswer({ seed, start: 0 }, maxTokens, naturalTokens);
  const so = body.stream_options as { include_usage?: unknown } | undefined;
  return {
    tokens: Array.from({ length: plan.completionTokens }, (_, i) => planToken(plan, i)),
    finishReason: plan.finishReason,
    usage: so?.include_usage === true,
  };
}

/** How a stream that ended with `data: [DONE]` differs from one uninterrupted node's answer. */
export interface AnswerProblem {
  /** `event` (an error event, one that is not JSON, or one after the end), `ids`, `role`, `finish`, `text` or `usage`. */
  kind: string;
  detail: string;
}

type Json = Record<string, unknown>;

/**
 * Whether a chat completion stream is, to the client, the answer one node streams uninterrupted
 * (undefined) or what is wrong with it: every event a JSON chunk up to one `data: [DONE]` (no
 * error event: one followed by `[DONE]` would otherwise pass for an answer); one `id`, `created`
 * and `model`; one role chunk, the first; one finish reason, the expected one, on the last text;
 * the text exactly the expected tokens (a token repeated or missing at a seam between two nodes
 * shows as the first place the text differs); with usage asked, one usage event whose
 * `completion_tokens` are the whole answer's (and `total_tokens` its sum), without, none.
 * `prompt_tokens` is not checked: after a continuation it is the router's arithmetic on the
 * continuing node's count, whose prompt held the carried text as the node tokenises it (the fleet:
 * 4 characters a token, while it streams a word a chunk).
 */
export function answerProblem(sse: string, want: ExpectedAnswer): AnswerProblem | undefined {
  const problem = (kind: string, detail: string) => ({ kind, detail });
  const ids = new Set<string>();
  let done = false;
  let chunks = 0;
  let roles = 0;
  let roleFirst = false;
  const finishes: string[] = [];
  let text = "";
  const usages: Json[] = [];
  for (const event of sse.split(/\r?\n\r?\n/)) {
    const lines = event.split(/\r?\n/).filter((l) => l.startsWith("data:"));
    if (lines.length === 0) continue; // a comment or keep-alive
    const data = lines.map((l) => l.slice(5).replace(/^ /, "")).join("\n");
    if (done) return problem("event", `an event after data: [DONE]: ${data.slice(0, 120)}`);
    if (data.trim() === "[DONE]") {
      done = true;
      continue;
    }
    let json: Json;
    try {
      json = JSON.parse(data) as Json;
    } catch {
      return problem("event", `an event that is not JSON: ${data.slice(0, 120)}`);
    }
    if (!json || typeof json !== "object" || Array.isArray(json)) {
      return problem("event", `an event that is not an object: ${data.slice(0, 120)}`);
    }
    if (json.error !== undefined) return problem("event", `an error event: ${data.slice(0, 200)}`);
    if (!Array.isArray(json.choices)) return problem("event", `a chunk without choices: ${data.slice(0, 120)}`);
    ids.add(JSON.stringify([json.id, json.created, json.model]));
    if (json.usage !== undefined && json.usage !== null) usages.push(json.usage as Json);
    for (const c of json.choices as Json[]) {
      if ((c.index ?? 0) !== 0) return problem("event", `a choice with index ${String(c.index)}`);
      const delta = (c.delta ?? {}) as Json;
      if (delta.role !== undefined) {
        roles++;
        if (chunks === 0) roleFirst = true;
      }
      const piece = typeof delta.content === "string" ? delta.content : typeof c.text === "string" ? c.text : "";
      if (piece !== "" && finishes.length > 0) {
        return problem("finish", `text after the finish reason: ${JSON.stringify(piece.slice(0, 40))}`);
      }
      text += piece;
      if (c.finish_reason !== null && c.finish_reason !== undefined) finishes.push(String(c.finish_reason));
      chunks++;
    }
  }
  if (!done) return problem("event", "no data: [DONE]");
  if (ids.size !== 1) return problem("ids", `${ids.size} different (id, created, model): ${[...ids].slice(0, 3).join(" ")}`);
  if (roles !== 1 || !roleFirst) {
    return problem("role", `${roles} role chunks${roles && !roleFirst ? ", the first chunk without one" : ""}`);
  }
  if (finishes.length !== 1 || finishes[0] !== want.finishReason) {
    return problem("finish", `finish reasons ${JSON.stringify(finishes)}, expected ["${want.finishReason}"]`);
  }
  const expected = want.tokens.join("");
  if (text !== expected) {
    let at = 0;
    while (at < text.length && text[at] === expected[at]) at++;
    let k = 0;
    for (let end = 0; k < want.tokens.length && end + want.tokens[k]!.length <= at; k++) end += want.tokens[k]!.length;
    return problem(
      "text",
      `differs from the uninterrupted answer at token ${k} of ${want.tokens.length} ` +
        `(character ${at}: ${JSON.stringify(text.slice(at, at + 40))} instead of ${JSON.stringify(expected.slice(at, at + 40))}; ` +
        `${text.length} characters, expected ${expected.length})`,
    );
  }
  if (!want.usage) return usages.length ? problem("usage", `${usages.length} usage events, none asked for`) : undefined;
  if (usages.length !== 1) return problem("usage", `${usages.length} usage events, one asked for`);
  const u = usages[0]!;
  if (u.completion_tokens !== want.tokens.length) {
    return problem("usage", `completion_tokens ${String(u.completion_tokens)}, the answer has ${want.tokens.length}`);
  }
  if (u.total_tokens !== (u.prompt_tokens as number) + (u.completion_tokens as number)) {
    return problem(
      "usage",
      `total_tokens ${String(u.total_tokens)} is not prompt_tokens ${String(u.prompt_tokens)} + completion_tokens ${String(u.completion_tokens)}`,
    );
  }
  return undefined;
}
