/**
 * The node boundary: what a GPU node (or the agent beside it) sends the router. One zod contract,
 * used by the node API (`POST /v1/nodes/report`), the region Durable Object's RPC and the node
 * reporter alike, with the TypeScript types derived from it. The wire form is snake_case, as
 * documented in docs/API.md's Node API; nothing renames it on the way in.
 */
import { z } from "zod";

/** Node ids: lowercase letters, digits and dashes, at most 63 characters (a DNS label). */
export const NODE_ID_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;

export const nodeIdSchema = z.string().regex(NODE_ID_PATTERN, "must be lowercase letters, digits and dashes (max 63)");

/**
 * An http(s) URL: where the router sends a node's requests. The form only; what a region accepts
 * (no userinfo, inside its `allowed_origins`, never a metadata address) is src/core/origins.ts.
 */
export const nodeUrlSchema = z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }).max(2048, "must be at most 2048 characters");

/** Model (or LoRA adapter) names a node serves. */
export const nodeModelsSchema = z.array(z.string().min(1).max(256)).min(1).max(64);

/**
 * The inference engines warmpath knows how to continue a stream on (src/region/continuation.ts):
 * vLLM and SGLang take `continue_final_message`, llama.cpp's server continues a final assistant
 * message. `other` is any other OpenAI-compatible server.
 */
export const NODE_ENGINES = ["vllm", "sglang", "llama.cpp", "other"] as const;
export const nodeEngineSchema = z.enum(NODE_ENGINES);
export type NodeEngine = z.infer<typeof nodeEngineSchema>;

/**
 * The most requests a node runs at once: vLLM's `--max-num-seqs`, SGLang's
 * `--max-running-requests`, llama.cpp's `--parallel` (its slots). Past it the engine holds a
 * request in its own waiting queue until one finishes, which the router then models
 * (src/core/node-load.ts slotWaitMs). Bounded by what any engine runs.
 */
export const nodeMaxRunningSchema = z.number().int().min(1).max(65_536);

/**
 * The most requests a report may say a node runs or holds waiting: far past any engine's (a GPU runs
 * hundreds at once), so that one absurd figure is refused rather than modelled as hours of queue.
 */
export const MAX_REPORTED_REQUESTS = 1_000_000;

/**
 * A node's load report. The first valid report registers the node in its region. Unknown fields
 * are dropped rather than refused, so an agent newer than the router can still report.
 */
export const nodeReportSchema = z.object({
  node_id: nodeIdSchema,
  region: z.string().min(1).max(64),
  url: nodeUrlSchema,
  models: nodeModelsSchema,
  kv_capacity_tokens: z.number().int().positive(),
  running: z.number().int().min(0).max(MAX_REPORTED_REQUESTS),
  waiting: z.number().int().min(0).max(MAX_REPORTED_REQUESTS),
  kv_usage: z.number().min(0).max(1),
  /** Changes when the node restarts (its cache is then forgotten). */
  boot_id: z.string().min(1).max(128).optional(),
  /** The engine serving (what `warmpath-agent` detects); an engine this router does not know is `other`. */
  engine: nodeEngineSchema.catch("other").optional(),
  /** The most requests it runs at once ({@link nodeMaxRunningSchema}); not said: what configuration says, else none (not an earlier report's). */
  max_running_requests: nodeMaxRunningSchema.optional(),
});

export type NodeReport = z.infer<typeof nodeReportSchema>;
