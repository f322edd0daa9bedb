/**
 * The configuration document: one zod schema, validated at the boundary (first request of an
 * isolate). Field names are snake_case, as written in wrangler.toml. Every object is strict: an
 * unknown key (a typo such as `load_facter`) is an error naming the key and where it is, never a
 * silent no-op. Each field's default and meaning are stated here once; docs/CONFIGURATION.md's configuration
 * table is generated from this file (`npm run config:docs`, checked by `npm test`).
 *
 * Policy options belong to their policy: each policy module declares its own options schema with
 * its defaults, and the registry (src/core/policies/index.ts) unites them on `name`, so an option
 * of another policy is an unknown key too.
 */
import { z } from "zod";
import { nodeEngineSchema, nodeIdSchema, nodeModelsSchema, nodeUrlSchema } from "../contracts/node.ts";
import { policySpecSchema } from "../core/policies/index.ts";
import { MAX_OBJECTIVE_MS, priorityClassSchema } from "../contracts/routing.ts";
import { DEFAULT_PREFIX_SETTINGS } from "../core/prefix.ts";
import { DEFAULT_REGION_SETTINGS } from "../core/region/index.ts";
import { MAX_ORIGIN_PATTERN_LENGTH, parseOriginPattern } from "../core/origins.ts";
import { MAX_SHARDS } from "../core/shard.ts";
import { LOCATION_HINTS } from "./location-hint.ts";
import { budgetSchema, pricesSchema, usageSchema } from "./usage-schema.ts";

const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const SECRET_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
const name = () => z.string().regex(NAME, "must be lowercase letters, digits and dashes");
const secretName = () => z.string().regex(SECRET_NAME, "must be an UPPER_SNAKE_CASE binding name");

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
  models: z.array(z.string().min(1)).min(1).describe("Model catalogue of the region (others get 404)."),
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
    .default(DEFAULT_REGION_SETTINGS.maxQueueSeconds)
    .describe("Past this modelled wait on every node, the region is saturated (failover/503)."),
  fair_share_wait_seconds: z
    .number()
    .positive()
    .default(DEFAULT_REGION_SETTINGS.fairShareWaitSeconds)
    .describe(
      "The short queue a tenant may build: past its weighted share of it, a tenant keeps off the nodes held for the others, and past this wait on its own nodes, one over 1.5x its share of the recent prefill is refused here (another region, else 429).",
    ),
  failure_cooldown_ms: z
    .number()
    .int()
    .min(0)
    .default(DEFAULT_REGION_SETTINGS.failureCooldownMs)
    .describe("First cool-down after a node fails; doubles per failure, at most 60 s."),
  request_timeout_ms: z
    .number()
    .int()
    .min(1000)
    .default(DEFAULT_REGION_SETTINGS.requestTimeoutMs)
    .describe("An in-flight request never completed is released after this."),
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

export const tenantSchema = z.strictObject({
  id: name().describe("Tenant id; its own cache namespace."),
  api_key_sha256: z
    .array(z.string().regex(SHA256_HEX, "must be 64 lowercase hex characters"))
    .min(1)
    .describe('SHA-256 (hex) of each API key: `printf %s "$KEY" | sha256sum`. The keys themselves are never stored.'),
  weight: z
    .number()
    .positive()
    .max(1_000)
    .default(1)
    .describe("Its weight in each region's fair share of prefill capacity, against the other active tenants."),
  regions: z
    .array(name())
    .min(1)
    .optional()
    .describe(
      'The regions its requests may go to (data residency), e.g. `["eu-west"]`: never routed, failed over or sent for a warm prefix anywhere else; `x-warmpath-region` naming another is refused (403 `region_not_allowed`). Default: every region.',
    ),
  shared_namespaces: z
    .array(name())
    .default([])
    .describe(
      "Namespaces it may share with other tenants (`x-warmpath-namespace`). Shared caches leak timing between tenants: share only within one organisation.",
    ),
  rate_limits: z
    .strictObject({
      requests_per_minute: z
        .number()
        .int()
        .positive()
        .optional()
        .describe("Requests a minute, per region (429 `rate_limit_exceeded` past it)."),
      prompt_tokens_per_minute: z
        .number()
        .int()
        .positive()
        .optional()
        .describe("Estimated prompt tokens a minute, per region (429 `rate_limit_exceeded` past it)."),
    })
    .optional()
    .describe("Its rate limits in each region, as token buckets (a minute's budget may be spent at once); default none."),
  budget: budgetSchema
    .optional()
    .describe(
      "What it may spend over every region, in tokens or USD, a UTC day and a calendar month: past it, 429 `insufficient_quota` until the period resets (docs/USAGE.md). Default none.",
    ),
  prices: pricesSchema
    .optional()
    .describe("Its own prices for some models (e.g. a negotiated rate), each replacing the top-level `prices` entry of that model."),
  priority: priorityClassSchema
    .default("standard")
    .describe(
      "Its priority class in every region's queue (docs/ADMISSION.md): `interactive` is released first, `batch` last and only onto idle nodes while a higher class is active, so batch absorbs shedding first. A request may lower its own with `x-warmpath-priority`, never raise it.",
    ),
  ttft_objective_ms: z
    .number()
    .int()
    .min(1)
    .max(MAX_OBJECTIVE_MS)
    .optional()
    .describe(
      "Its time-to-first-token objective (ms), replacing the region's default (max(objective_min_ms, objective_prefill_factor x the cold prefill)); a request may ask for a tighter one with `x-warmpath-ttft-objective-ms`.",
    ),
});

export const limitsSchema = z.strictObject({
  max_body_bytes: z
    .number()
    .int()
    .positive()
    .default(4 * 1024 * 1024)
    .describe("Largest request body."),
  max_retries: z.number().int().min(0).max(5).default(2).describe("Extra nodes tried per region before the first byte."),
  max_region_attempts: z.number().int().min(1).max(10).default(3).describe("Regions tried, nearest first."),
  first_byte_timeout_ms: z
    .number()
    .int()
    .positive()
    .default(120_000)
    .describe(
      "Longest wait for a node's first body byte. The wait actually allowed adapts to the request: 4x the load model's estimated time to first token on that node, at least `first_byte_timeout_floor_ms`, at most this.",
    ),
  first_byte_timeout_floor_ms: z
    .number()
    .int()
    .positive()
    .default(10_000)
    .describe("Shortest first-byte wait, however small the estimate (a cached prompt on an idle node)."),
  stream_idle_timeout_ms: z
    .number()
    .int()
    .positive()
    .default(60_000)
    .describe("Longest silence from a node between two chunks of its answer: past it the stream ends with an error event."),
  continuations: z
    .number()
    .int()
    .min(0)
    .max(5)
    .default(2)
    .describe(
      "Times a streamed chat completion or completion whose node failed after its first byte is continued on another node, within the request's deadline (docs/CONTINUATION.md); 0: such a stream ends with an error event.",
    ),
  request_deadline_ms: z
    .number()
    .int()
    .positive()
    .default(900_000)
    .describe("Longest a request may take from arrival to its last byte: past it the answer ends with an error event."),
});

export const prefixSchema = z.strictObject({
  block_chars: z
    .number()
    .int()
    .min(16)
    .max(65_536)
    .default(DEFAULT_PREFIX_SETTINGS.blockChars)
    .describe(
      "Characters per block (~128 tokens) for the first 512 blocks: fine enough to match a shared prompt to within a few percent, coarse enough that a 100k-character prompt is ~200 hashes.",
    ),
  max_blocks: z
    .number()
    .int()
    .min(1)
    .max(4096)
    .default(DEFAULT_PREFIX_SETTINGS.maxBlocks)
    .describe(
      "Blocks hashed per request. Blocks double in size every 256 after the first 512, so 2,048 blocks cover ~16.8M characters: the whole of any prompt the body limit admits, at index work growing with the log of its length.",
    ),
  chars_per_token: z
    .number()
    .positive()
    .max(16)
    .default(DEFAULT_PREFIX_SETTINGS.charsPerToken)
    .describe("For token estimates without a tokenizer."),
});

export const configSchema = z
  .strictObject({
    mode: z
      .enum(["development", "production"])
      .default("production")
      .describe('`"development"` accepts the development credentials, on a loopback host only.'),
    regions: z.array(regionSchema).min(1),
    tenants: z.array(tenantSchema).min(1),
    limits: limitsSchema.prefault({}),
    prices: pricesSchema
      .default([])
      .describe(
        "USD per million prompt, cached prompt and completion tokens, by model: the usage ledger's `cost_usd` and the budgets in USD (docs/USAGE.md). A model without a price costs 0.",
      ),
    usage: usageSchema.prefault({}),
    prefix: prefixSchema.prefault({}),
    admin_token_secret: secretName().default("ADMIN_TOKEN").describe("Secret holding the admin token (state API and dashboard)."),
    cors_allowed_origins: z
      .array(z.union([z.literal("*"), z.string().regex(/^https?:\/\/[^/\s]+$/, "must be an origin such as https://app.example.com, or *")]))
      .max(64)
      .default([])
      .describe(
        "Browser origins allowed to call the client API (CORS), e.g. `https://app.example.com`; `*` allows any. None: browsers get no CORS headers.",
      ),
    decision_log_sample_rate: z
      .number()
      .min(0)
      .max(1)
      .default(1)
      .describe(
        "Share of answered requests whose decision is logged (one JSON line each); every error, refusal and failure is logged whatever this says. Also the share of traces warmpath starts that are sampled (their spans logged; a client's `traceparent` keeps its own flag).",
      ),
  })
  .superRefine((cfg, ctx) => {
    const seen = new Set<string>();
    cfg.regions.forEach((r, i) => {
      if (seen.has(r.name)) ctx.addIssue({ code: "custom", path: ["regions", i, "name"], message: `duplicate region ${r.name}` });
      seen.add(r.name);
      const ids = new Set<string>();
      r.nodes.forEach((n, j) => {
        if (ids.has(n.id)) ctx.addIssue({ code: "custom", path: ["regions", i, "nodes", j, "id"], message: `duplicate node ${n.id}` });
        ids.add(n.id);
      });
    });
    const tenants = new Set<string>();
    const keys = new Set<string>();
    cfg.tenants.forEach((t, i) => {
      if (tenants.has(t.id)) ctx.addIssue({ code: "custom", path: ["tenants", i, "id"], message: `duplicate tenant ${t.id}` });
      tenants.add(t.id);
      t.api_key_sha256.forEach((k, j) => {
        if (keys.has(k)) ctx.addIssue({ code: "custom", path: ["tenants", i, "api_key_sha256", j], message: "key hash used twice" });
        keys.add(k);
      });
    });
  });

export type WarmpathConfig = z.output<typeof configSchema>;
export type RegionConfig = z.output<typeof regionSchema>;
export type TenantConfig = z.output<typeof tenantSchema>;

/** Formats zod issues as `path.to.field: message; ...`, naming every bad field. */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.map(String).join(".") : "(root)"}: ${i.message}`).join("; ");
}
