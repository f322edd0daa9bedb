/**
 * What every inference endpoint of a node shares, whatever the API's shapes: taking a request in
 * (the faults that strike before it is read, the model), and running its prompts through the
 * engine — one engine request per prompt (a batched completions request has several), the node's
 * metrics, the first byte by request tag (first-bytes.ts), the `*_after_tokens` faults that cut a
 * stream — while a Writer of the API's shapes writes the answer.
 *
 * Each request is held to the faults in force when it arrived (the prefill slowdown: when its
 * prefill starts). The `*_after_tokens` faults count the tokens the request generated, over all its
 * prompts, and cut a stream after that many: silence, a reset connection, the API's error event,
 * or an event whose data is not JSON.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Faults } from "./config.ts";
import type { JobHandle } from "./engine.ts";
import { parseJsonObject, readBody, sendJson, sendRedirect } from "./http-io.ts";
import type { NodeRuntime } from "./node-runtime.ts";
import { RequestError } from "./prompt.ts";
import { endWithMalformedEvent, openEventStream, resetConnection } from "./sse.ts";
import type { Output } from "./tools.ts";

/** A request the node will answer: its JSON body, the model it names, and the faults in force when it arrived. */
export interface Intake {
  body: Record<string, unknown>;
  model: string;
  faults: Faults;
}

/**
 * Reads a request in, with the faults that strike before anything is generated: extra latency,
 * a redirect, a 500 (`fail` writes it in the API's shape). Undefined when the request was answered
 * (or its client or the node went away meanwhile). Throws RequestError: bad JSON, no or unknown model.
 */
export async function takeRequest(
  node: NodeRuntime,
  req: IncomingMessage,
  res: ServerResponse,
  fail: (res: ServerResponse, message: string) => void,
): Promise<Intake | undefined> {
  const f = node.faults;
  const text = await readBody(req);
  if (f.extra_latency_ms > 0) {
    await node.sleep(f.extra_latency_ms);
    if (res.destroyed || !node.up) return undefined;
  }
  if (f.redirect_to !== null) {
    sendRedirect(res, f.redirect_to);
    return undefined;
  }
  if (f.error_rate > 0 && Math.random() < f.error_rate) {
    fail(res, "simulated node failure (fault injection)");
    return undefined;
  }
  const body = parseJsonObject(text);
  const requested = body.model;
  if (typeof requested !== "string") throw new RequestError("model must be a string", "model");
  if (!node.o.models.includes(requested)) throw new RequestError(`The model \`${requested}\` does not exist.`, "model", 404);
  return { body, model: requested, faults: f };
}

export function optionalPositiveInt(body: Record<string, unknown>, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw new RequestError(`${key} must be a positive integer`, key);
  return v;
}

/** vLLM's 400 for a prompt and answer longer than the model's context (`max_model_len`). */
export function checkContext(node: NodeRuntime, promptTokens: number, completionTokens: number, param: string): void {
  const { maxModelLen } = node;
  if (promptTokens + completionTokens > maxModelLen) {
    throw new RequestError(
      `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${promptTokens + completionTokens} tokens (${promptTokens} in the messages, ${completionTokens} in the completion).`,
      param,
    );
  }
}

/** The `*_after_tokens` faults that cut a stream, in the order that breaks a tie. */
const STREAM_CUTS = ["die_after_tokens", "error_event_after_tokens", "malformed_after_tokens", "hang_after_tokens"] as const;
type StreamCut = (typeof STREAM_CUTS)[number];

/** The fault that cuts a stream first (the smallest token count), if any. */
function streamCut(f: Faults): { kind: StreamCut; after: number } | undefined {
  let cut: { kind: StreamCut; after: number } | undefined;
  for (const kind of STREAM_CUTS) {
    const after = f[kind];
    if (after !== null && (cut === undefined || after < cut.after)) cut = { kind, after };
  }
  return cut;
}

/** One engine request: a prompt and what it generates. */
export interface Sequence {
  /** Chained hashes of the prompt's full blocks (prompt.ts). */
  hashes: readonly string[];
  promptTokens: number;
  output: Output;
}

/** What the engine has told of a sequence so far. */
export interface SequenceState {
  /** Prompt tokens the node's cache held (set when its prefill ends, before its first token). */
  cachedTokens: number;
}

/** Token counts over a request's sequences, as every API's usage reports them. */
export interface Totals {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

/** Writes one answer in its API's shapes. Streamed answers get `open`, `token`s, then `end`; whole ones `whole`. */
export interface Writer {
  /** After the stream's head, before the prefill: events an API sends at once. Whether it wrote any. */
  open?(): boolean;
  /** The events of token `i` of sequence `s`. */
  token(s: number, i: number): void;
  /** After every sequence's last token: the closing events, then the end of the body. */
  end(): void;
  /** The JSON answer, once every sequence is done. */
  whole(): unknown;
  /** `error_event_after_tokens`: the API's mid-stream error event, then the end of the body. */
  errorEvent(): void;
  /** The event token `i` of sequence `s` would have been (`malformed_after_tokens` sends its data cut in half). */
  eventOf(s: number, i: number): { event?: string; data: string };
}

export interface RunOptions {
  stream: boolean;
  /** Sent as `x-request-id` on a stream's head. */
  requestId: string;
  sequences: readonly Sequence[];
  /** The API's writer, given the sequences' states (filled in as the engine goes) and their totals. */
  writer: (states: readonly SequenceState[], totals: () => Totals) => Writer;
  /** The request's tag (first-bytes.ts), if its prompt carries one. */
  tag: string | undefined;
  /** Continues an interrupted answer: its first byte is counted apart (continuation.ts). */
  continued: boolean;
  faults: Faults;
}

/**
 * Runs a request's sequences through the engine and answers it: a stream's head at once, its
 * events as tokens come (`Writer.open` before the prefill), or the JSON answer when all are done.
 */
export function run(node: NodeRuntime, res: ServerResponse, o: RunOptions): void {
  const { sequences, stream, tag } = o;
  const states: SequenceState[] = sequences.map(() => ({ cachedTokens: 0 }));
  const totals = (): Totals => {
    const t = { promptTokens: 0, completionTokens: 0, cachedTokens: 0 };
    sequences.forEach((s, i) => {
      t.promptTokens += s.promptTokens;
      t.completionTokens += s.output.completionTokens;
      t.cachedTokens += states[i]!.cachedTokens;
    });
    return t;
  };
  const w = o.writer(states, totals);
  // A continuation's first byte is not a generation started twice: it is counted apart.
  const firstBytes = o.continued ? node.continuedBytes : node.firstBytes;
  const cut = stream ? streamCut(o.faults) : undefined;

  let sentFirst = false;
  if (stream) {
    openEventStream(res, o.requestId);
    if (w.open?.()) {
      sentFirst = true;
      firstBytes.record(tag);
    }
  }
  const handles: JobHandle[] = [];
  let generated = 0;
  let running = sequences.length;
  let finished = false;
  const count = (reason: string) => {
    node.success[reason] = (node.success[reason] ?? 0) + 1;
  };
  const finish = (reason: string) => {
    finished = true;
    count(reason);
  };
  /** The fault `c` strikes instead of token `i` of sequence `s` (`generated` tokens were sent). */
  const strike = (c: { kind: StreamCut }, s: number, i: number) => {
    for (const h of handles) h.cancel();
    node.injectedFaults[c.kind] = (node.injectedFaults[c.kind] ?? 0) + 1;
    switch (c.kind) {
      case "hang_after_tokens": // silent from here on: the stream is left open, never ended
        return;
      case "die_after_tokens": // counted as an abort when the socket closes
        return resetConnection(res);
      case "error_event_after_tokens":
        finish("error");
        return w.errorEvent();
      case "malformed_after_tokens": {
        finish("error");
        // The event of token i, cut off in the middle: not JSON.
        const whole = w.eventOf(s, i);
        return endWithMalformedEvent(res, whole.data.slice(0, Math.floor(whole.data.length / 2)), whole.event);
      }
    }
  };
  sequences.forEach((seq, s) => {
    const handle = node.engine.submit({
      hashes: seq.hashes,
      promptTokens: seq.promptTokens,
      completionTokens: seq.output.completionTokens,
      onPrefilled: (info) => {
        states[s]!.cachedTokens = info.cachedTokens;
        node.queueTime.observe(info.queuedMs / 1000);
        firstBytes.recordWait(tag, info.queuedMs); // a continuation's wait does not replace the original's
        node.ttft.observe((info.queuedMs + info.prefillMs) / 1000);
      },
      onToken: (i) => {
        if (cut && generated === cut.after) return strike(cut, s, i);
        generated++;
        if (!stream) return;
        w.token(s, i);
        if (!sentFirst) {
          sentFirst = true;
          firstBytes.record(tag);
        }
      },
      onDone: () => {
        // The engine's finish reason: a tool call is the end of a turn ("stop"), as vLLM counts it.
        const reason = seq.output.finishReason === "length" ? "length" : "stop";
        if (--running > 0) return count(reason);
        finish(reason);
        if (!stream) {
          firstBytes.record(tag);
          return sendJson(res, 200, w.whole());
        }
        w.end();
      },
    });
    handles.push(handle);
  });
  res.on("close", () => {
    if (!finished) {
      for (const h of handles) h.cancel();
      node.success.abort = (node.success.abort ?? 0) + 1;
    }
  });
}
