/**
 * `[[regions]]` of the configuration (src/config/schema.ts): a GPU region, its nodes, placement,
 * routing policy and admission.
 */
import { z } from "zod";
import { nodeEngineSchema, nodeIdSchema, nodeMaxRunningSchema, nodeModelsSchema, nodeUrlSchema } from "../contracts/node.ts";
import { policySpecSchema } from "../core/policies/index.ts";
import { MAX_OBJECTIVE_MS } from "../contracts/routing.ts";
import { DEFAULT_REGION_SETTINGS } from "../core/region/index.ts";
import { MAX_ORIGIN_PATTERN_LENGTH, parseOriginPattern } from "../core/origins.ts";
import { MAX_SHARDS } from "../core/shard.ts";
import { LOCATION_HINTS } from "./location-hint.ts";
import { MAX_DURATION_MS, name, secretName } from "./schema-names.ts";

/** A policy table without `name` is warmpath's (`policy = { tie_tolerance_seconds = 0.1 }`). */
const regionPolicySchema = z.preprocess(
  (v) => (v !== null && typeof v === "object" && !Array.isArray(v) && !("name" in v) ? { ...v, name: "warmpath" } : v),
  policySpecSchema,
);

export const staticNodeSchema = z.strictObject({
  id: nodeIdSchema.describe("Node id, unique in the region."),
  url: nodeUrlSchema.describe("Where the router sends the node's requests."),
  models: nodeModelsSchema.describe("Models (and LoRA adapters) the node serves."),
  kv_capacity_tokens: z.number().int().positive().describe("KV cache size in tokens."),
  engine: nodeEngineSchema
    .optional()
    .describe(
      "Its engine (`vllm`, `sglang`, `llama.cpp`, `other`), as a reporting node's agent says: whether a stream it serves can be continued elsewhere. Default: not said (`other`).",
    ),
  max_running_requests: nodeMaxRunningSchema
    .optional()
    .describe(
      "The most requests its engine runs at once (vLLM `--max-num-seqs`, SGLang `--max-running-requests`, llama.cpp `--parallel`): past it a request waits for one to finish, and the router predicts that wait. Default: not said (no such wait is predicted).",
    ),
});

export const locationSchema = z.strictObject({
  lat: z.number().min(-90).max(90).describe("Latitude of the GPUs."),
  lon: z.number().min(-180).max(180).describe("Longitude of the GPUs."),
  continent: z
    .enum(["AF", "AN", "AS", "EU", "NA", "OC", "SA"])
    .optional()
    .describe("Cloudflare continent code: the fallback when a request has no coordinates."),
});

/**
 * The largest `max_index_entries` accepted: the index's hard bound at 2,000,000 entries is ~97 MB
 * (indexMemoryBound, src/core/prefix-index.ts), which leaves a region object room inside its 128 MB.
 */
export const MAX_INDEX_ENTRIES_LIMIT = 2_000_000;

/**
 * Cloudflare's targeted placement for a region's worker (wrangler's `placement`): a cloud
 * provider's region, or a host whose latency Cloudflare probes. One of the three.
 */
export const placementSchema = z.union([
  z.strictObject({ region: z.string().regex(/^[a-z0-9]+:[a-z0-9-]+$/, "must be provider:region, e.g. aws:us-east-1") }),
  z.strictObject({ hostname: z.string().regex(/^[A-Za-z0-9.-]{1,253}$/, "must be a host name") }),
  z.strictObject({ host: z.string().regex(/^[A-Za-z0-9.:[\]-]{1,261}:\d{1,5}$/, "must be host:port") }),
]);

const A = DEFAULT_REGION_SETTINGS.admission;

/**
 * How much longer than the request deadline (`limits.request_deadline_ms`) a region keeps a
 * request's ticket and budget hold before releasing it as abandoned. A ticket's clock starts at
 * dispatch, after the edge's arrival, so it already ends after the deadline; the margin covers what
 * happens past it: the relay ending the stream, the completion and bill reaching the region object
 * (a retried call, an object restarting), and the clocks of the edge's and the object's machines
 * differing. Those take seconds; a minute is far past them, and small beside the 15-minute default
 * deadline, so a lost request's hold outlives any live request by at most about a minute.
 */
export const REQUEST_TIMEOUT_MARGIN_MS = 60_000;

/** A region's `request_timeout_ms` when it sets none: the deadline plus {@link REQUEST_TIMEOUT_MARGIN_MS}. */
export function defaultRequestTimeoutMs(requestDeadlineMs: number): number {
  return requestDeadlineMs + REQUEST_TIMEOUT_MARGIN_MS;
}

/**
 * The most models a region's catalogue may list. A node reports at most 64 (nodeModelsSchema,
 * src/contracts/node.ts), but a region's catalogue is the union of its nodes' lists; 1,024, as
 * `prices` allows, is many nodes' worth of distinct models.
 */
export const MAX_REGION_MODELS = 1_024;

/** The longest model name: as a node's report and a request may name one (src/contracts/node.ts, src/edge/api/schemas.ts). */
const MAX_MODEL_NAME_LENGTH = 256;

/** A node's breaker never stays open longer than this, however long the configured first cool-down (src/core/region/node-table.ts). */
const MAX_FAILURE_COOLDOWN_MS = 60_000;

/** `[regions.admission]`: admission by objective and the region's queue (src/core/region/admission-settings.ts). */
export const admissionConfigSchema = z.strictObject({
  enabled: z
    .boolean()
    .default(A.enabled)
    .describe(
      "Place a request only where its first token is predicted within its objective, hold the rest in the region's queue by class, tenant weight and deadline, and shed at once what cannot be served in time (503 to another region, else 429). `false`: every request goes to a node's queue at once.",
    ),
  objective_min_ms: z
    .number()
    .int()
    .min(1)
    .max(MAX_OBJECTIVE_MS)
    .default(A.objectiveMinMs)
    .describe(
      "The default objective's floor (ms): the default objective is max(this, objective_prefill_factor x the prompt's cold prefill time).",
    ),
  objective_prefill_factor: z
    .number()
    .positive()
    .max(1_000)
    .default(A.objectivePrefillFactor)
    .describe(
      "The default objective as a multiple of the prompt's cold prefill time (its whole prompt at the region's learned prefill rate).",
    ),
  dispatch_wait_ms: z
    .number()
    .min(0)
    .max(MAX_OBJECTIVE_MS)
    .default(A.dispatchWaitMs)
    .describe(
      "A node with more prefill queued than this (ms at its rate) takes nothing more from the queue: the rest waits in the region, where it can still be reordered.",
    ),
  order: z
    .enum(["deadline", "work"])
    .default(A.order)
    .describe("How one tenant's queued requests of one class are ordered: earliest deadline first, or least uncached work first."),
  max_queued: z
    .number()
    .int()
    .min(0)
    .max(100_000)
    .default(A.maxQueued)
    .describe("Requests the region's queue holds (split evenly over its shards); a full queue sheds the lowest class first."),
  max_queued_blocks: z
    .number()
    .int()
    .min(0)
    .max(16_777_216)
    .default(A.maxQueuedBlocks)
    .describe("Prompt blocks the region's queue holds (16 bytes each): its memory bound (split evenly over its shards)."),
});

export const regionSchema = z.strictObject({
  name: name().describe("Region name, also the Durable Object's name."),
  location: locationSchema.describe("Where the GPUs are, for nearest-region choice."),
  location_hint: z
    .enum(LOCATION_HINTS)
    .optional()
    .describe("Where the region's Durable Object is created (`wnam`, `enam`, `weur`, ...); default: derived from `location`."),
  placement: placementSchema
    .optional()
    .describe(
      'Where Cloudflare runs the region\'s worker, by its GPUs: `{ region = "aws:us-east-1" }` (a cloud region), `{ hostname = "ingress.us-east.gpus.example.com" }` or `{ host = "10.10.0.1:8000" }` (probed for the lowest latency). Required by `npm run deploy`: without it the region\'s worker runs at the client\'s edge and every request crosses the long haul twice (docs/SCALING.md).',
    ),
  models: z
    .array(z.string().min(1).max(MAX_MODEL_NAME_LENGTH))
    .min(1)
    .max(MAX_REGION_MODELS)
    .describe(
      `Model catalogue of the region (others get 404): at most ${MAX_REGION_MODELS.toLocaleString("en-US")} names of at most ${MAX_MODEL_NAME_LENGTH} characters.`,
    ),
  node_token_secret: z
    .union([secretName(), z.array(secretName()).min(1).max(4)])
    .describe(
      "Secret holding the region's node token, which registers new nodes (each then reports with its own node secret). A list accepts each of its secrets' tokens: rotate by adding the new secret, moving the agents to it, then removing the old one; registered nodes keep their node secrets throughout.",
    ),
  origin_token_secret: secretName()
    .optional()
    .describe("Secret holding a bearer token sent to the region's nodes (e.g. vLLM's `--api-key`), only to URLs inside `allowed_origins`."),
  allowed_origins: z
    .array(
      z
        .string()
        .max(MAX_ORIGIN_PATTERN_LENGTH)
        .superRefine((entry, ctx) => {
          const parsed = parseOriginPattern(entry);
          if ("error" in parsed) ctx.addIssue({ code: "custom", message: parsed.error });
        }),
    )
    .max(256)
    .optional()
    .describe(
      "Where the region's nodes may be (a report's `url` outside is refused, 403 `origin_not_allowed`): `[http(s)://]host[:port]` entries, the host a name (`gpu-1.example.com`), a suffix wildcard (`*.gpus.example.com`), or an IPv4/IPv6 address or CIDR range (`10.0.0.0/8`, `[fd00::/8]:8000`). Default: only the static `nodes`' origins (which are always allowed), plus loopback in `mode = \"development\"`. Link-local, cloud metadata, unspecified, multicast and (outside development) loopback addresses are refused even inside a range listed here. Names are matched as names: where they resolve is not checked.",
    ),
  policy: regionPolicySchema
    .prefault({ name: "warmpath" })
    .describe("The routing policy and its options (below); options of another policy are refused."),
  nodes: z.array(staticNodeSchema).default([]).describe("Static nodes `{ id, url, models, kv_capacity_tokens }`; they never expire."),
  node_silence_ms: z
    .number()
    .int()
    .min(100)
    .max(MAX_DURATION_MS)
    .default(DEFAULT_REGION_SETTINGS.nodeSilenceMs)
    .describe("A reporting node silent this long leaves."),
  prefill_tokens_per_second: z
    .number()
    .positive()
    .default(DEFAULT_REGION_SETTINGS.prefillTokensPerSecond)
    .describe("Prefill rate assumed for a node until measured."),
  max_inflight_per_node: z
    .number()
    .int()
    .positive()
    .default(DEFAULT_REGION_SETTINGS.maxInflightPerNode)
    .describe("A node with this many requests in flight takes no more."),
  max_queue_seconds: z
    .number()
    .positive()
    .max(MAX_DURATION_MS / 1000)
    .default(DEFAULT_REGION_SETTINGS.maxQueueSeconds)
    .describe("Past this modelled wait on every node, the region is saturated (failover/503)."),
  fair_share_wait_seconds: z
    .number()
    .positive()
    .max(MAX_DURATION_MS / 1000)
    .default(DEFAULT_REGION_SETTINGS.fairShareWaitSeconds)
    .describe(
      "The short queue a tenant may build: past its weighted share of it, a tenant keeps off the nodes held for the others, and past this wait on its own nodes, one over 1.5x its share of the recent prefill is refused here (another region, else 429).",
    ),
  failure_cooldown_ms: z
    .number()
    .int()
    .min(0)
    .max(MAX_FAILURE_COOLDOWN_MS)
    .default(DEFAULT_REGION_SETTINGS.failureCooldownMs)
    .describe("First cool-down after a node fails; doubles per failure, at most 60 s."),
  // No default here: it follows `limits.request_deadline_ms` (load.ts), and a value below the
  // deadline plus the margin is refused (schema.ts), so a request the deadline still allows keeps
  // its ticket and budget hold.
  request_timeout_ms: z
    .number()
    .int()
    .min(1000)
    .max(MAX_DURATION_MS + REQUEST_TIMEOUT_MARGIN_MS)
    .optional()
    .describe(
      "An in-flight request never completed (its worker was lost) is released after this, its ticket and budget hold with it. At least `limits.request_deadline_ms` + 60 s. Default: `limits.request_deadline_ms` + 60 s (960000 with the default deadline).",
    ),
  max_index_entries: z
    .number()
    .int()
    .min(1024)
    .max(MAX_INDEX_ENTRIES_LIMIT)
    .default(DEFAULT_REGION_SETTINGS.maxIndexEntries)
    .describe("Hard bound on prefix index entries (at most about 50 bytes each: 50 MB at 10^6, bench/ROUTE_COST.md)."),
  max_sessions: z.number().int().min(0).default(DEFAULT_REGION_SETTINGS.maxSessions).describe("Session hints remembered."),
  admission: admissionConfigSchema
    .prefault({})
    .describe("Admission by time-to-first-token objective and the region's queue (docs/ADMISSION.md)."),
  shards: z
    .number()
    .int()
    .min(1)
    .max(MAX_SHARDS)
    .default(DEFAULT_REGION_SETTINGS.shards)
    .describe(
      "Durable Objects the region's routing is split over, each owning the prompts whose first block it wins (every prefix keeps one writer; the shards share their load every 20 ms). Raise it when one object's ~1,000 decisions a second are not enough (bench/SHARDS.md); 1 is one object, as before.",
    ),
  engine_cache_isolation: z
    .enum(["cache_salt", "none"])
    .default("cache_salt")
    .describe(
      "`cache_salt`: the forwarded body carries the tenant's cache namespace as `cache_salt` (vLLM, SGLang), so two tenants never share KV blocks on a node; `none`: the body as sent (engines without a salt: dedicate nodes instead).",
    ),
  continuation_engines: z
    .array(nodeEngineSchema)
    .max(4)
    .default(["vllm", "sglang", "llama.cpp"])
    .describe(
      "Engines a stream whose node failed after its first byte may be continued on (docs/CONTINUATION.md): those that take the text so far as a final assistant message. `[]` turns continuation off in the region; add `other` for OpenAI-compatible servers declared to continue the same way.",
    ),
  node_tenants: z
    .record(nodeIdSchema, z.array(name()).min(1))
    .default({})
    .describe(
      "Nodes dedicated to tenants, `{ node_id = [tenant ids] }`: only they are sent there (isolation for engines without `cache_salt`, e.g. llama.cpp).",
    ),
});
