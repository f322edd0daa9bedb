/**
 * The configuration document: one zod schema, validated at the boundary (first request of an
 * isolate). Field names are snake_case, as written in wrangler.toml. Every default is stated here
 * and in README's configuration reference.
 */
import { z } from "zod";
import { POLICY_NAMES } from "../core/policies/index.ts";
import { DEFAULT_PREFIX_SETTINGS } from "../core/prefix.ts";
import { DEFAULT_REGION_SETTINGS } from "../core/region-router.ts";

const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const SECRET_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;

export const policySchema = z.object({
  name: z.enum(POLICY_NAMES).default("warmpath"),
  load_factor: z.number().min(1).max(10).optional(),
  tie_tolerance_seconds: z.number().min(0).max(10).optional(),
  kv_pressure_threshold: z.number().min(0).max(1).optional(),
  cache_threshold: z.number().min(0).max(1).optional(),
  balance_abs_threshold: z.number().int().min(0).optional(),
  balance_rel_threshold: z.number().min(1).optional(),
  overlap_weight: z.number().min(0).optional(),
});

export const staticNodeSchema = z.object({
  id: z.string().regex(NAME, "must be lowercase letters, digits and dashes"),
  url: z.url({ protocol: /^https?$/ }),
  models: z.array(z.string().min(1)).min(1),
  kv_capacity_tokens: z.number().int().positive(),
});

export const regionSchema = z.object({
  name: z.string().regex(NAME, "must be lowercase letters, digits and dashes"),
  /** Where the GPUs are, for nearest-region choice. */
  location: z.object({
    lat: z.number().min(-90).max(90),
    lon: z.number().min(-180).max(180),
    /** Cloudflare continent code (AF, AN, AS, EU, NA, OC, SA): the fallback when a request has no coordinates. */
    continent: z.enum(["AF", "AN", "AS", "EU", "NA", "OC", "SA"]).optional(),
  }),
  /** The model catalogue this region serves (GET /v1/models; unknown models are 404). */
  models: z.array(z.string().min(1)).min(1),
  /** Name of the secret (wrangler secret / .dev.vars / var) holding this region's node token. */
  node_token_secret: z.string().regex(SECRET_NAME, "must be an UPPER_SNAKE_CASE binding name"),
  /** Optional secret holding a bearer token the worker sends to this region's nodes (e.g. vLLM's --api-key). */
  origin_token_secret: z.string().regex(SECRET_NAME, "must be an UPPER_SNAKE_CASE binding name").optional(),
  policy: policySchema.default({ name: "warmpath" }),
  /** Nodes declared here need no reports; they never expire by silence. */
  nodes: z.array(staticNodeSchema).default([]),
  node_silence_ms: z.number().int().min(100).default(DEFAULT_REGION_SETTINGS.nodeSilenceMs),
  prefill_tokens_per_second: z.number().positive().default(DEFAULT_REGION_SETTINGS.prefillTokensPerSecond),
  max_inflight_per_node: z.number().int().positive().default(DEFAULT_REGION_SETTINGS.maxInflightPerNode),
  max_queue_seconds: z.number().positive().default(DEFAULT_REGION_SETTINGS.maxQueueSeconds),
  failure_cooldown_ms: z.number().int().min(0).default(DEFAULT_REGION_SETTINGS.failureCooldownMs),
  request_timeout_ms: z.number().int().min(1000).default(DEFAULT_REGION_SETTINGS.requestTimeoutMs),
  max_index_entries: z.number().int().min(1024).max(4_000_000).default(DEFAULT_REGION_SETTINGS.maxIndexEntries),
  max_sessions: z.number().int().min(0).default(DEFAULT_REGION_SETTINGS.maxSessions),
});

export const tenantSchema = z.object({
  id: z.string().regex(NAME, "must be lowercase letters, digits and dashes"),
  /** SHA-256 (hex) of each API key; the keys themselves are never stored. */
  api_key_sha256: z.array(z.string().regex(SHA256_HEX, "must be 64 lowercase hex characters")).min(1),
  /**
   * Extra cache namespaces this tenant may use (chosen per request with `x-warmpath-namespace`).
   * Tenants that list the same namespace share prefixes; by default a tenant's cache is its own.
   */
  shared_namespaces: z.array(z.string().regex(NAME, "must be lowercase letters, digits and dashes")).default([]),
});

export const limitsSchema = z.object({
  /** Largest request body accepted. Default 4 MiB. */
  max_body_bytes: z
    .number()
    .int()
    .positive()
    .default(4 * 1024 * 1024),
  /** Extra nodes tried when a node fails before the first byte. Default 2. */
  max_retries: z.number().int().min(0).max(5).default(2),
  /** Regions tried, nearest first. Default 3. */
  max_region_attempts: z.number().int().min(1).max(10).default(3),
  /** Time allowed for a node to send response headers and the first body byte. Default 120 s (a long prefill behind a queue). */
  first_byte_timeout_ms: z.number().int().positive().default(120_000),
});

export const prefixSchema = z.object({
  block_chars: z.number().int().min(16).max(65_536).default(DEFAULT_PREFIX_SETTINGS.blockChars),
  max_blocks: z.number().int().min(1).max(4096).default(DEFAULT_PREFIX_SETTINGS.maxBlocks),
  chars_per_token: z.number().positive().max(16).default(DEFAULT_PREFIX_SETTINGS.charsPerToken),
});

export const configSchema = z
  .object({
    /** `development` accepts the documented development credentials, on a loopback host only. */
    mode: z.enum(["development", "production"]).default("production"),
    regions: z.array(regionSchema).min(1),
    tenants: z.array(tenantSchema).min(1),
    limits: limitsSchema.default(limitsSchema.parse({})),
    prefix: prefixSchema.default(prefixSchema.parse({})),
    /** Name of the secret holding the admin token (state API and dashboard). */
    admin_token_secret: z.string().regex(SECRET_NAME).default("ADMIN_TOKEN"),
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
