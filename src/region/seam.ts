/**
 * The seam between two nodes' streams: one chat completion or completion answered by a first node
 * and, after it failed mid-stream, continued by another (continue.ts). The client must read one
 * stream, as one uninterrupted node would have sent it.
 *
 * The filter cuts the stream into whole events (a node's last, unfinished event is dropped when
 * it fails: its text was never shown, so it is not carried over either) and reads each:
 * - from the first node, every event passes byte for byte (as without continuation), and the
 *   filter keeps what a continuation needs: the answer's `id`, `created` and `model`, the text so
 *   far, the tokens it took (the node's usage if a chunk carried it, else one a chunk, as vLLM,
 *   SGLang and llama.cpp stream by default), its `finish_reason`, and what makes it impossible to
 *   continue (a tool call or reasoning being streamed, logprobs, a second choice);
 * - from a continuing node, each event is rewritten to read as the first's: the first's `id`,
 *   `created` and `model`; no second role (`delta.role`), and a chunk that only said the role is
 *   dropped; its usage made the whole answer's (prompt tokens: the original prompt's, completion
 *   tokens: both parts).
 * An event a node sends instead of its answer (`{"error": ...}`, vLLM's and SGLang's mid-stream
 * failure) or one that is not JSON ends that node's part: {@link StreamFailure}, which the relay
 * resumes or ends. The usage event the router asked for is taken out, as stream-usage.ts does.
 */
import { StreamFailure, type EventFilter } from "../proxy/event-filter.ts";
import { concatBytes } from "../http/body.ts";
import { SseEventSplitter, eventData } from "../proxy/sse-events.ts";
import { COMPLETION_SLACK_TOKENS, wellFormed } from "../proxy/usage-check.ts";

export type SeamKind = "chat" | "completion";

/** Why a stream cannot be continued, once seen in its events. */
type SeamBlocker = "tool-call" | "reasoning" | "logprobs" | "choices";

/** What the stream has shown so far (for a continuation's body and its log line). */
interface SeamState {
  /** Text of the answer so far (every node's part), kept up to the seam's bound (see `overflow`). */
  text: string;
  /** Characters of answer text relayed (all of it, past the bound too). */
  textChars: number;
  /** More text was relayed than a continuation's body may carry (`max_body_bytes`): `text` stops at the bound. */
  overflow: boolean;
  /** Completion tokens of the answer so far (measured or estimated, see {@link SeamFilter}). */
  tokens: number;
  finishReason: string | null;
  blocker: SeamBlocker | undefined;
  /** Events relayed from the first node (0: nothing reached the client). */
  events: number;
}

interface Ids {
  id: unknown;
  created: unknown;
  model: unknown;
}

type Json = Record<string, unknown>;
interface Usage extends Json {
  prompt_tokens: number;
  completion_tokens: number;
}

const encoder = new TextEncoder();

/**
 * A usage object whose counts are non-negative integers (src/proxy/usage-check.ts): another is not
 * usage at all here (a negative count mid-stream made a continuation ask for more than the client
 * did), so the stream's tokens are then counted by its chunks.
 */
function isUsage(u: unknown): u is Usage {
  if (!u || typeof u !== "object") return false;
  const j = u as Json;
  const cached = (j.prompt_tokens_details as Json | null | undefined)?.cached_tokens;
  return (
    typeof j.prompt_tokens === "number" &&
    typeof j.completion_tokens === "number" &&
    wellFormed({
      promptTokens: j.prompt_tokens,
      completionTokens: j.completion_tokens,
      cachedTokens: typeof cached === "number" ? cached : undefined,
    }) === undefined
  );
}

/** UTF-8 bytes one UTF-16 code unit of text can be: every token shown is at least one byte of it. */
const MAX_UTF8_BYTES_PER_CHAR = 3;

/** Characters of answer text the seam keeps when it is given no bound (the default `max_body_bytes`). */
const DEFAULT_MAX_TEXT_CHARS = 4 * 1024 * 1024;

function nonEmpty(v: unknown): boolean {
  return v !== undefined && v !== null && v !== "" && !(Array.isArray(v) && v.length === 0);
}

export class SeamFilter implements EventFilter {
  private readonly events = new SseEventSplitter();
  private readonly decoder = new TextDecoder();
  private ids: Ids | undefined;
  /** 0: the first node; n: the n-th continuation. */
  private segment = 0;
  /** Tokens produced before the current node's part, and by it (chunks with text, or its usage). */
  private carried = 0;
  private segmentChunks = 0;
  private segmentChars = 0;
  private segmentUsageTokens: number | undefined;
  private readonly state: SeamState = {
    text: "",
    textChars: 0,
    overflow: false,
    tokens: 0,
    finishReason: null,
    blocker: undefined,
    events: 0,
  };
  /** The whole answer's usage as the client's stream carries it (or would, had it asked): the ledger bills this. */
  private whole: Usage | undefined;

  /**
   * @param kind chat completions (`delta.content`) or completions (`text`).
   * @param dropUsage the usage event was asked for by the router, not the client: it is taken out.
   * @param maxTextChars text kept for a continuation: a body carrying more would be over
   *   `max_body_bytes` (each character is at least a byte), so past it the seam only counts (default 4 MiB).
   */
  private readonly kind: SeamKind;
  private readonly dropUsage: boolean;
  private readonly maxTextChars: number;

  constructor(kind: SeamKind, dropUsage: boolean, maxTextChars: number = DEFAULT_MAX_TEXT_CHARS) {
    this.kind = kind;
    this.dropUsage = dropUsage;
    this.maxTextChars = maxTextChars;
  }

  /** The stream so far. */
  snapshot(): Readonly<SeamState> {
    return { ...this.state, tokens: this.tokensSoFar() };
  }

  /**
   * The whole answer's usage (the last node's, with the carried text counted as completion), once
   * the node answering last sent it; undefined before, or if it never did.
   */
  answerUsage(): { promptTokens: number; cachedTokens: number | undefined; completionTokens: number } | undefined {
    const u = this.whole;
    if (!u) return undefined;
    const cached = (u.prompt_tokens_details as Json | null | undefined)?.cached_tokens;
    return {
      promptTokens: u.prompt_tokens,
      cachedTokens: typeof cached === "number" ? cached : undefined,
      completionTokens: u.completion_tokens,
    };
  }

  /** The next node's events follow: they are made to read as the first's. */
  beginSegment(): void {
    this.whole = undefined;
    this.carried = this.tokensSoFar();
    this.segment++;
    this.segmentChunks = 0;
    this.segmentChars = 0;
    this.segmentUsageTokens = undefined;
    this.state.finishReason = null;
  }

  /** The last chunk of an answer the router ends itself (its token budget was spent), as the first node's. */
  finishEvent(reason: string): Uint8Array {
    const choice = this.kind === "chat" ? { index: 0, delta: {}, finish_reason: reason } : { index: 0, text: "", finish_reason: reason };
    const object = this.kind === "chat" ? "chat.completion.chunk" : "text_completion";
    return this.rewritten({ id: undefined, object, created: undefined, model: undefined, choices: [choice] });
  }

  push(chunk: Uint8Array): Uint8Array {
    const out: Uint8Array[] = [];
    for (const event of this.events.push(chunk)) {
      const passed = this.read(event);
      if (passed) out.push(passed);
    }
    return concatBytes(out);
  }

  flush(): Uint8Array {
    return this.events.rest();
  }

  abandon(): void {
    this.events.rest();
  }

  /**
   * Tokens the client has so far: the node's count when it gave one, held between what the chunks
   * relayed can hold (each chunk with text is at least one token; each token at least one byte of
   * text, plus a stop token's slack), so a node's count can neither inflate nor shrink what a
   * continuation is left to spend.
   */
  private tokensSoFar(): number {
    const most = this.segmentChars * MAX_UTF8_BYTES_PER_CHAR + COMPLETION_SLACK_TOKENS;
    const reported = this.segmentUsageTokens ?? this.segmentChunks;
    return this.carried + Math.max(this.segmentChunks, Math.min(reported, most));
  }

  /** One whole event: the bytes the client gets (the event, rewritten, or nothing). */
  private read(event: Uint8Array): Uint8Array | undefined {
    const data = eventData(this.decoder.decode(event));
    // Comments and keep-alives, and the terminator, pass as they are.
    if (data === undefined || data.trim() === "[DONE]") return event;
    let json: Json;
    try {
      const parsed: unknown = JSON.parse(data);
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
      json = parsed as Json;
    } catch {
      throw new StreamFailure("malformed", "the node sent an event that is not a JSON object");
    }
    const choices = json.choices;
    if (json.error !== undefined && !Array.isArray(choices)) throw new StreamFailure("error-event", "the node sent an error event");
    if (!Array.isArray(choices)) throw new StreamFailure("malformed", "the node sent a chunk without choices");
    const usage = isUsage(json.usage) ? json.usage : undefined;
    if (usage) {
      this.segmentUsageTokens = usage.completion_tokens;
      this.whole = this.segment === 0 ? usage : this.wholeUsage(usage);
    }
    if (choices.length === 0 && usage) {
      if (this.dropUsage) return undefined;
      if (this.segment === 0) return event;
      json.usage = this.wholeUsage(usage);
      return this.rewritten(json);
    }
    let spoke = false;
    for (const c of choices as Json[]) spoke = this.observe(c) || spoke;
    if (this.segment === 0) {
      this.ids ??= { id: json.id, created: json.created, model: json.model };
      this.state.events++;
      return event;
    }
    if (usage) json.usage = this.wholeUsage(usage);
    // A continuing chat node opens with the assistant's role again: the client already has it.
    if (this.kind === "chat" && !spoke && !usage && choices.every((c) => (c as Json).finish_reason == null)) return undefined;
    return this.rewritten(json);
  }

  /** Takes in one choice of a chunk; returns whether it carried anything but a role. */
  private observe(c: Json): boolean {
    if (c.index !== undefined && c.index !== 0) this.state.blocker ??= "choices";
    if (nonEmpty(c.logprobs)) this.state.blocker ??= "logprobs";
    if (c.finish_reason != null) this.state.finishReason = String(c.finish_reason);
    let text: unknown;
    let other = false;
    if (this.kind === "chat") {
      const delta = (c.delta ?? {}) as Json;
      if (nonEmpty(delta.tool_calls) || nonEmpty(delta.function_call)) this.state.blocker ??= "tool-call";
      if (nonEmpty(delta.reasoning_content) || nonEmpty(delta.reasoning)) this.state.blocker ??= "reasoning";
      text = delta.content;
      other = Object.keys(delta).some((k) => k !== "role" && k !== "content" && nonEmpty(delta[k]));
      if (this.segment > 0) delete delta.role;
    } else text = c.text;
    if (typeof text === "string" && text !== "") {
      this.keep(text);
      this.segmentChunks++;
      this.segmentChars += text.length;
      return true;
    }
    return other;
  }

  /** Keeps `text` for a continuation, up to the bound; past it the stream can no longer be continued. */
  private keep(text: string): void {
    this.state.textChars += text.length;
    if (this.state.overflow) return;
    if (this.state.text.length + text.length > this.maxTextChars) {
      this.state.overflow = true;
      this.state.text = "";
      return;
    }
    this.state.text += text;
  }

  /** The current node's usage as the whole answer's: its prompt held the carried text, which the client counts as completion. */
  private wholeUsage(u: Usage): Usage {
    const prompt = Math.max(0, u.prompt_tokens - this.carried);
    const completion = u.completion_tokens + this.carried;
    const whole: Usage = { ...u, prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
    const details = u.prompt_tokens_details as Json | null | undefined;
    if (details && typeof details.cached_tokens === "number") {
      whole.prompt_tokens_details = { ...details, cached_tokens: Math.min(details.cached_tokens, prompt) };
    }
    return whole;
  }

  private rewritten(json: Json): Uint8Array {
    if (this.ids) {
      json.id = this.ids.id;
      json.created = this.ids.created;
      json.model = this.ids.model;
    }
    return encoder.encode(`data: ${JSON.stringify(json)}\n\n`);
  }
}
