/**
 * A node's OpenAI-compatible endpoints: POST /v1/chat/completions and /v1/completions (faults,
 * validation, then the engine drives the answer, streamed or whole) and GET /v1/models. Each
 * request is held to the faults in force when it arrived (the prefill slowdown: when its prefill
 * starts); its first byte is recorded by the tag in its prompt, if any (first-bytes.ts).
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { chunk, fillerToken, fullResponse, newId, usage, usageChunk, type Kind, type StreamIds } from "./openai.ts";
import { RequestError, blockHashes, countTokens, renderChat, renderCompletion } from "./prompt.ts";
import { parseJsonObject, readBody, sendError, sendJson, sendRedirect } from "./http-io.ts";
import { requestTag } from "./first-bytes.ts";
import { endEventStream, openEventStream, writeEvent } from "./sse.ts";
import type { NodeRuntime } from "./node-runtime.ts";

function optionalPositiveInt(body: Record<string, unknown>, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw new RequestError(`${key} must be a positive integer`, key);
  return v;
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
  const tag = requestTag(prompt);

  if (stream) openEventStream(res, ids.id);
  let cachedTokens = 0;
  let answer = "";
  let finished = false;
  const handle = node.engine.submit({
    hashes,
    promptTokens,
    completionTokens,
    onPrefilled: (info) => {
      cachedTokens = info.cachedTokens;
      node.queueTime.observe(info.queuedMs / 1000);
      node.firstBytes.recordWait(tag, info.queuedMs);
      node.ttft.observe((info.queuedMs + info.prefillMs) / 1000);
    },
    onToken: (i) => {
      // Silent from here on: no more work, and the stream is left open, never ended.
      if (stream && i === f.hang_after_tokens) return handle.cancel();
      const t = fillerToken(seed, i);
      answer += t;
      if (!stream) return;
      writeEvent(res, chunk(ids, t, i === completionTokens - 1 ? finishReason : null, i === 0));
      if (i === 0) node.firstBytes.record(tag);
    },
    onDone: () => {
      finished = true;
      node.success[finishReason] = (node.success[finishReason] ?? 0) + 1;
      const u = usage(promptTokens, completionTokens, cachedTokens);
      if (!stream) {
        node.firstBytes.record(tag);
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
