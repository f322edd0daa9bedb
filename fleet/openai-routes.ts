/**
 * A node's OpenAI-compatible endpoints: POST /v1/chat/completions and /v1/completions (faults,
 * validation, then the engine drives the answer, streamed or whole) and GET /v1/models. Each
 * request is held to the faults in force when it arrived (the prefill slowdown: when its prefill
 * starts); its first byte is recorded by the tag in its prompt, if any (first-bytes.ts), apart
 * when the request continues an interrupted answer (continuation.ts). The `*_after_tokens` faults
 * cut a streamed answer after that many tokens: silence, a reset connection, vLLM's error event,
 * or a line that is not JSON.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { chunk, errorBody, fullResponse, newId, usage, usageChunk, type Kind, type StreamIds } from "./openai.ts";
import { RequestError, blockHashes, countTokens, renderChatPrompt, renderCompletion } from "./prompt.ts";
import { chatContinuation, completionContinuation, planAnswer, planToken, type AnswerStart } from "./continuation.ts";
import type { Faults } from "./config.ts";
import { parseJsonObject, readBody, sendError, sendJson, sendRedirect } from "./http-io.ts";
import { requestTag } from "./first-bytes.ts";
import { endEventStream, endWithErrorEvent, endWithMalformedEvent, openEventStream, resetConnection, writeEvent } from "./sse.ts";
import type { NodeRuntime } from "./node-runtime.ts";

function optionalPositiveInt(body: Record<string, unknown>, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw new RequestError(`${key} must be a positive integer`, key);
  return v;
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

export async function inference(node: NodeRuntime, kind: Kind, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { o, defaultMaxTokens, maxModelLen } = node;
  const f = node.faults;
  const text = await readBody(req);
  if (f.extra_latency_ms > 0) {
    await node.sleep(f.extra_latency_ms);
    if (res.destroyed || !node.up) return;
  }
  if (f.redirect_to !== null) return sendRedirect(res, f.redirect_to);
  if (f.error_rate > 0 && Math.random() < f.error_rate) {
    sendError(res, 500, "simulated node failure (fault injection)", "InternalServerError");
    return;
  }
  const body = parseJsonObject(text);
  const requested = body.model;
  if (typeof requested !== "string") throw new RequestError("model must be a string", "model");
  if (!o.models.includes(requested)) throw new RequestError(`The model \`${requested}\` does not exist.`, "model", 404);
  // The answer's seed is its prompt's tokens, unless the request continues an answer (continuation.ts).
  let prompt: string;
  let at: AnswerStart | undefined;
  if (kind === "chat") {
    const chat = renderChatPrompt(body);
    prompt = chat.prompt;
    if (chat.continued) at = chatContinuation(chat.continued.before, chat.continued.content, defaultMaxTokens);
  } else {
    prompt = renderCompletion(body);
    const found = completionContinuation(prompt, defaultMaxTokens);
    if (found.start > 0) at = found;
  }
  if (body.n !== undefined && body.n !== null && body.n !== 1) throw new RequestError("n > 1 is not simulated", "n");
  const maxTokens = optionalPositiveInt(body, "max_completion_tokens") ?? optionalPositiveInt(body, "max_tokens");
  const promptTokens = countTokens(prompt);
  const plan = planAnswer(at ?? { seed: promptTokens, start: 0 }, maxTokens, defaultMaxTokens);
  const { completionTokens, finishReason } = plan;
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
  const tag = requestTag(prompt);
  // A continuation's first byte is not a generation started twice: it is counted apart.
  const firstBytes = at ? node.continuedBytes : node.firstBytes;
  const cut = stream ? streamCut(f) : undefined;

  if (stream) openEventStream(res, ids.id);
  let cachedTokens = 0;
  let answer = "";
  let finished = false;
  const finish = (reason: string) => {
    finished = true;
    node.success[reason] = (node.success[reason] ?? 0) + 1;
  };
  /** The fault `cut` strikes instead of token `i` (the first `i` were sent). */
  const strike = (c: { kind: StreamCut }, i: number) => {
    handle.cancel();
    node.injectedFaults[c.kind] = (node.injectedFaults[c.kind] ?? 0) + 1;
    switch (c.kind) {
      case "hang_after_tokens": // silent from here on: the stream is left open, never ended
        return;
      case "die_after_tokens": // counted as an abort when the socket closes
        return resetConnection(res);
      case "error_event_after_tokens":
        finish("error");
        return endWithErrorEvent(res, errorBody("Internal server error", "InternalServerError", null, 500));
      case "malformed_after_tokens": {
        finish("error");
        // The chunk of token i, cut off in the middle: not JSON.
        const whole = JSON.stringify(chunk(ids, planToken(plan, i), null, false));
        return endWithMalformedEvent(res, whole.slice(0, Math.floor(whole.length / 2)));
      }
    }
  };
  const handle = node.engine.submit({
    hashes,
    promptTokens,
    completionTokens,
    onPrefilled: (info) => {
      cachedTokens = info.cachedTokens;
      node.queueTime.observe(info.queuedMs / 1000);
      firstBytes.recordWait(tag, info.queuedMs); // a continuation's wait does not replace the original's
      node.ttft.observe((info.queuedMs + info.prefillMs) / 1000);
    },
    onToken: (i) => {
      if (cut && i === cut.after) return strike(cut, i);
      const t = planToken(plan, i);
      answer += t;
      if (!stream) return;
      writeEvent(res, chunk(ids, t, i === completionTokens - 1 ? finishReason : null, i === 0));
      if (i === 0) firstBytes.record(tag);
    },
    onDone: () => {
      finish(finishReason);
      const u = usage(promptTokens, completionTokens, cachedTokens);
      if (!stream) {
        firstBytes.record(tag);
        return sendJson(res, 200, fullResponse(ids, answer, finishReason, u));
      }
      if (includeUsage) writeEvent(res, usageChunk(ids, u));
      endEventStream(res);
    },
  });
  res.on("close", () => {
    if (!finished) {
      handle.cancel();
      node.success.abort = (node.success.abort ?? 0) + 1;
    }
  });
}

export function listModels(node: NodeRuntime, res: ServerResponse): void {
  const created = Math.floor(Date.now() / 1000);
  sendJson(res, 200, {
    object: "list",
    data: node.o.models.map((id) => ({
      id,
      object: "model",
      created,
      owned_by: "warmpath-fleet",
      root: id,
      parent: null,
      max_model_len: node.maxModelLen,
    })),
  });
}
