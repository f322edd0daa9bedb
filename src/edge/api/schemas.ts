/**
 * Request validation: only what routing needs. The output is used for canonicalisation; the
 * client's original bytes are what gets forwarded, so fields not listed here (`tools` options,
 * `response_format`, vendor extensions...) reach the node untouched.
 */
import { z } from "zod";
import {
  ANTHROPIC_ROLES,
  CHAT_ROLES,
  MAX_MESSAGE_ID_CHARS,
  isAnthropicMessages,
  isChatMessages,
  isCompletionPrompt,
  isContentParts,
  isObjectList,
} from "./list-checks.ts";

const MAX_MESSAGES = 10_000;
const MAX_PROMPTS = 1_024;

const contentPart = z.looseObject({ type: z.string().min(1, "content part needs a type") });

const chatMessageSchema = z.looseObject({
  role: z.enum(CHAT_ROLES),
  content: z.union([z.string(), z.array(contentPart), z.null()]).optional(),
  name: z.string().max(MAX_MESSAGE_ID_CHARS).nullish(),
  tool_calls: z.array(z.record(z.string(), z.unknown())).nullish(),
  tool_call_id: z.string().max(MAX_MESSAGE_ID_CHARS).nullish(),
});

/** Fields shared by both endpoints that routing reads. */
const common = {
  model: z.string().min(1, "model must be a non-empty string").max(256),
  stream: z.boolean().nullish(),
  user: z.string().max(512).nullish(),
  /** vLLM's per-request cache isolation salt: part of the cache namespace. */
  cache_salt: z.string().max(256).nullish(),
  /** OpenAI's cache routing hint: used as a session hint, never as a pin. */
  prompt_cache_key: z.string().max(512).nullish(),
};

export const chatCompletionSchema = z.looseObject({
  ...common,
  messages: z.array(chatMessageSchema).min(1, "messages must contain at least one message").max(MAX_MESSAGES),
  tools: z.array(z.record(z.string(), z.unknown())).nullish(),
});

const tokenIds = z.array(z.number().int().nonnegative());

export const completionSchema = z.looseObject({
  ...common,
  prompt: z.union([
    z.string(),
    z.array(z.string()).min(1).max(MAX_PROMPTS),
    tokenIds.min(1),
    z.array(tokenIds.min(1)).min(1).max(MAX_PROMPTS),
  ]),
});

/**
 * The Responses API: `input` is a string or a list of items (messages, function calls and their
 * outputs, ...); `previous_response_id` continues a response stored on the node that produced it.
 */
export const responsesSchema = z.looseObject({
  ...common,
  input: z.union([z.string(), z.array(z.record(z.string(), z.unknown())).max(MAX_MESSAGES)]),
  instructions: z.string().nullish(),
  tools: z.array(z.record(z.string(), z.unknown())).nullish(),
  previous_response_id: z.string().min(1).max(256).nullish(),
});

/** Anthropic's Messages API (`max_tokens` is required there, as Anthropic requires it). */
export const messagesSchema = z.looseObject({
  model: common.model,
  stream: common.stream,
  max_tokens: z.number().int().positive(),
  messages: z
    .array(
      z.looseObject({
        role: z.enum(ANTHROPIC_ROLES),
        content: z.union([z.string(), z.array(contentPart)]),
      }),
    )
    .min(1, "messages must contain at least one message")
    .max(MAX_MESSAGES),
  system: z.union([z.string(), z.array(contentPart)]).nullish(),
  tools: z.array(z.record(z.string(), z.unknown())).nullish(),
  metadata: z.looseObject({ user_id: z.string().max(512).nullish() }).nullish(),
});

export type ChatCompletionRequest = z.output<typeof chatCompletionSchema>;
export type CompletionRequest = z.output<typeof completionSchema>;
type ResponsesRequest = z.output<typeof responsesSchema>;
type MessagesRequest = z.output<typeof messagesSchema>;

/** `tools`, when given: a list of objects (the schemas' `z.array(z.record(...)).nullish()`). */
const fastTools = <T>() => z.custom<T>((v) => v === null || isObjectList(v, Infinity)).optional();

/**
 * The schemas above with their long lists checked by one loop each (list-checks.ts), tried first
 * (inference.ts); a body one refuses is parsed again by its schema above, which names the issue.
 * What one accepts, its schema accepts, with the same value (test/edge/api/list-checks.test.ts).
 */
export const fastSchemas = {
  chat: chatCompletionSchema.extend({
    messages: z.custom<ChatCompletionRequest["messages"]>((v) => isChatMessages(v, MAX_MESSAGES)),
    tools: fastTools<ChatCompletionRequest["tools"]>(),
  }),
  completion: completionSchema.extend({ prompt: z.custom<CompletionRequest["prompt"]>((v) => isCompletionPrompt(v, MAX_PROMPTS)) }),
  responses: responsesSchema.extend({
    input: z.custom<ResponsesRequest["input"]>((v) => typeof v === "string" || isObjectList(v, MAX_MESSAGES)),
    tools: fastTools<ResponsesRequest["tools"]>(),
  }),
  messages: messagesSchema.extend({
    messages: z.custom<MessagesRequest["messages"]>((v) => isAnthropicMessages(v, MAX_MESSAGES)),
    system: z.custom<MessagesRequest["system"]>((v) => v === null || typeof v === "string" || isContentParts(v)).optional(),
    tools: fastTools<MessagesRequest["tools"]>(),
  }),
};

/** The schema error as one message naming the field, e.g. `messages.0.role: Invalid option...`. */
export function firstIssue(error: z.ZodError): { message: string; param: string } {
  const issue = error.issues[0]!;
  const param = issue.path.map(String).join(".") || "(body)";
  return { message: `Invalid request: ${param}: ${issue.message}`, param };
}
