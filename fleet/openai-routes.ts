/**
 * A node's OpenAI-compatible endpoints: POST /v1/chat/completions and /v1/completions (faults,
 * validation, then the engine drives the answer, streamed or whole: generate.ts) and GET
 * /v1/models. A request's first byte is recorded by the tag in its prompt, if any
 * (first-bytes.ts), apart when the request continues an interrupted answer (continuation.ts).
 * Chat calls one of the request's functions when the simulated model decides to (tools.ts), else
 * answers in JSON when `response_format` asks (structured-output.ts, completions too); completions
 * take a string, strings (one choice each, as vLLM batches them) or token ids.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import {
  chunk,
  errorBody,
  fullCompletions,
  fullResponse,
  fullToolCallResponse,
  newId,
  toolCallChunk,
  usage,
  usageChunk,
  type Kind,
  type StreamIds,
} from "./openai.ts";
import { RequestError, blockHashes, contentText, countTokens, renderChatPrompt, renderCompletions } from "./prompt.ts";
import { chatContinuation, completionContinuation, planAnswer, type AnswerStart } from "./continuation.ts";
import { sendError, sendJson } from "./http-io.ts";
import { requestTag } from "./first-bytes.ts";
import { endEventStream, endWithErrorEvent, writeEvent } from "./sse.ts";
import { checkContext, optionalPositiveInt, run, takeRequest, type Sequence, type Totals, type Writer } from "./generate.ts";
import {
  chatFunctionTools,
  chatNamedFunction,
  chooseTool,
  openaiToolChoice,
  textOutput,
  toolCallOutput,
  type FunctionTool,
} from "./tools.ts";
import type { NodeRuntime } from "./node-runtime.ts";
import { chatResponseFormat, jsonOutput, structuredText } from "./structured-output.ts";

/** The text of a chat request's final message if it is the user's, for the tool decision (tools.ts). */
function lastUserText(body: Record<string, unknown>): string | undefined {
  const messages = body.messages as Record<string, unknown>[];
  const last = messages[messages.length - 1]!;
  return last.role === "user" ? contentText(last.content, `messages[${messages.length - 1}].content`) : undefined;
}

export async function inference(node: NodeRuntime, kind: Kind, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const taken = await takeRequest(node, req, res, (r, message) => sendError(r, 500, message, "InternalServerError"));
  if (!taken) return;
  const { body, model: requested, faults } = taken;
  const { o, defaultMaxTokens } = node;
  // The answer's seed is its prompt's tokens, unless the request continues an answer (continuation.ts).
  // A structured answer is generated whole, even after carried text (structured-output.ts).
  const format = chatResponseFormat(body.response_format);
  const structured = format.type === "text" ? undefined : format;
  let prompts: { prompt: string; at: AnswerStart | undefined }[];
  if (kind === "chat") {
    const chat = renderChatPrompt(body);
    const at =
      chat.continued && !structured ? chatContinuation(chat.continued.before, chat.continued.content, defaultMaxTokens) : undefined;
    prompts = [{ prompt: chat.prompt, at }];
  } else {
    prompts = renderCompletions(body).map((p) => {
      if (p.tokenIds || structured) return { prompt: p.text, at: undefined };
      const found = completionContinuation(p.text, defaultMaxTokens);
      return { prompt: p.text, at: found.start > 0 ? found : undefined };
    });
  }
  if (body.n !== undefined && body.n !== null && body.n !== 1) throw new RequestError("n > 1 is not simulated", "n");
  const maxTokens = optionalPositiveInt(body, "max_completion_tokens") ?? optionalPositiveInt(body, "max_tokens");
  // A chat request may get a function call instead of text; never one that continues an answer.
  let tool: FunctionTool | undefined;
  if (kind === "chat") {
    const choice = openaiToolChoice(body.tool_choice, chatNamedFunction);
    if (!prompts[0]!.at) tool = chooseTool(chatFunctionTools(body.tools), choice, lastUserText(body));
  }
  const cacheSalt = typeof body.cache_salt === "string" ? body.cache_salt : undefined;
  const sequences: Sequence[] = prompts.map(({ prompt, at }) => {
    const promptTokens = countTokens(prompt);
    const output = tool
      ? toolCallOutput(tool, promptTokens, "chatcmpl-tool-" + randomBytes(16).toString("hex"), maxTokens)
      : structured
        ? jsonOutput(structuredText(structured, promptTokens, defaultMaxTokens), maxTokens)
        : textOutput(planAnswer(at ?? { seed: promptTokens, start: 0 }, maxTokens, defaultMaxTokens));
    checkContext(node, promptTokens, output.completionTokens, "messages");
    return { hashes: blockHashes(prompt, requested, cacheSalt), promptTokens, output };
  });
  const stream = body.stream === true;
  const so = body.stream_options as { include_usage?: unknown } | undefined;
  const includeUsage = o.forceIncludeUsage === true || so?.include_usage === true;
  const ids: StreamIds = { kind, id: newId(kind), created: Math.floor(Date.now() / 1000), model: requested };

  const writer = (_states: unknown, totals: () => Totals): Writer => {
    const u = () => {
      const t = totals();
      return usage(t.promptTokens, t.completionTokens, t.cachedTokens);
    };
    /** The chunk of token `i` of sequence `s`, with `finishReason` on it. */
    const chunkOf = (s: number, i: number, finishReason: string | null) => {
      const out = sequences[s]!.output;
      return out.call
        ? toolCallChunk(ids, out.call, out.piece(i), finishReason, i === 0)
        : chunk(ids, out.piece(i), finishReason, i === 0, s);
    };
    return {
      token(s, i) {
        const out = sequences[s]!.output;
        writeEvent(res, chunkOf(s, i, i === out.completionTokens - 1 ? out.finishReason : null));
      },
      end() {
        if (includeUsage) writeEvent(res, usageChunk(ids, u()));
        endEventStream(res);
      },
      whole() {
        if (kind === "completion") {
          return fullCompletions(
            ids,
            sequences.map((s) => ({ text: s.output.text(), finishReason: s.output.finishReason })),
            u(),
          );
        }
        const out = sequences[0]!.output;
        return out.call ? fullToolCallResponse(ids, out.call, out.finishReason, u()) : fullResponse(ids, out.text(), out.finishReason, u());
      },
      errorEvent() {
        endWithErrorEvent(res, errorBody("Internal server error", "InternalServerError", null, 500));
      },
      eventOf(s, i) {
        return { data: JSON.stringify(chunkOf(s, i, null)) };
      },
    };
  };
  run(node, res, {
    stream,
    requestId: ids.id,
    sequences,
    writer,
    tag: prompts.map((p) => requestTag(p.prompt)).find((t) => t !== undefined),
    continued: prompts.some((p) => p.at !== undefined),
    faults,
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
