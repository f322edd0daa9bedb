/**
 * Loading the configuration: parse once per isolate, fail loudly, never half-read.
 *
 * The document comes from `env.WARMPATH_CONFIG`. It is validated with zod and its secrets are
 * resolved; if anything is wrong the result is a {@link ConfigError} naming every bad field, which
 * the app answers with a 500 on *every* request (and logs), instead of routing with part of a
 * configuration. The parsed result is cached per isolate, keyed by the raw value, so a new
 * deployment's configuration is picked up and an unchanged one costs nothing per request.
 */
import {
  configSchema,
  defaultRequestTimeoutMs,
  describeIssues,
  type RegionConfig,
  type TenantConfig,
  type WarmpathConfig,
} from "./schema.ts";
import { regionInitFingerprint, type RegionInit, type RegionInitRef } from "../contracts/region-init.ts";
import { loadExchangeName, shardObjectName } from "../core/shard.ts";
import { DEFAULT_REGION_SETTINGS, type RegionSettings } from "../core/region/index.ts";
import type { PrefixSettings } from "../core/prefix.ts";
import { locationHintFor, type LocationHint } from "./location-hint.ts";
import { originPolicy, type OriginPolicy } from "../core/origins.ts";
import { budgetLedgerRegion } from "./ledger-home.ts";
import { VERSION_METADATA_BINDING } from "../contracts/topology.ts";

export class ConfigError extends Error {}

export interface LoadedRegion {
  config: RegionConfig;
  /** The first of {@link nodeTokens} (the current one during a rotation). */
  nodeToken: string;
  /** Every node token the region accepts for registrations: one, or during a rotation old and new. */
  nodeTokens: string[];
  /** Where the region's nodes may be (src/core/origins.ts): `allowed_origins`, the static nodes' origins, loopback in development. */
  origins: OriginPolicy;
  /** Bearer sent to this region's nodes, if the region names one. */
  originToken: string | undefined;
  init: RegionInit;
  /** What a `route` call carries: {@link init}'s fingerprint only (src/contracts/region-init.ts). */
  initRef: RegionInitRef;
  /** Where its Durable Object is created: the configured hint, or the area of its GPUs. */
  locationHint: LocationHint;
}

export interface LoadedConfig {
  raw: WarmpathConfig;
  regions: LoadedRegion[];
  regionByName: Map<string, LoadedRegion>;
  tenantByKeyHash: Map<string, TenantConfig>;
  tenantById: Map<string, TenantConfig>;
  prefix: PrefixSettings;
  adminToken: string | undefined;
  models: string[];
}

/**
 * Which worker loads the configuration, and so which secrets it must have: the edge holds the
 * node and admin tokens, a region's worker the origin token of its own region (`served`), the
 * local single-process composition (src/index.ts) all of them. A worker is never handed a secret
 * it does not use, and a missing one is an error only where it is used.
 */
export type ConfigRole = { kind: "edge" } | { kind: "region"; served: string | undefined } | { kind: "all" };

const ALL: ConfigRole = { kind: "all" };

/** One entry per role: in the local composition the edge and the region service share an isolate. */
const cache = new Map<string, { source: unknown; result: LoadedConfig | ConfigError }>();

/**
 * Secrets are bindings the configuration names (`node_token_secret = "NODE_TOKEN_US_EAST"`); the
 * production ones are set with `wrangler secret put` and so are not in the generated `Env`.
 */
function binding(env: Env, name: string): unknown {
  return (env as unknown as Record<string, unknown>)[name];
}

/** Returns the loaded configuration, or throws the {@link ConfigError} describing what is wrong. */
/**
 * When this worker's version was uploaded (ms epoch), from its version metadata binding
 * (VERSION_METADATA_BINDING), if it has one: it orders the inits two versions of a region's worker
 * send during a gradual deployment (durable-objects/init-order.ts).
 */
function versionUploadedAt(env: Env): number | undefined {
  const metadata = (env as unknown as Record<string, { timestamp?: unknown } | undefined>)[VERSION_METADATA_BINDING];
  const at = typeof metadata?.timestamp === "string" ? Date.parse(metadata.timestamp) : NaN;
  return Number.isSafeInteger(at) && at >= 0 ? at : undefined;
}

export function loadConfig(env: Env, role: ConfigRole = ALL): LoadedConfig {
  const source = env.WARMPATH_CONFIG;
  const key = role.kind === "region" ? `region:${role.served ?? "*"}` : role.kind;
  let entry = cache.get(key);
  if (!entry || entry.source !== source) cache.set(key, (entry = { source, result: build(env, source, role) }));
  if (entry.result instanceof ConfigError) throw entry.result;
  return entry.result;
}

function build(env: Env, source: unknown, role: ConfigRole): LoadedConfig | ConfigError {
  if (source === undefined || source === null || source === "") {
    return new ConfigError("WARMPATH_CONFIG is not set (see docs/CONFIGURATION.md)");
  }
  let doc = source;
  if (typeof source === "string") {
    try {
      doc = JSON.parse(source);
    } catch (e) {
      return new ConfigError(`WARMPATH_CONFIG is not valid JSON: ${(e as Error).message}`);
    }
  }
  const parsed = configSchema.safeParse(doc);
  if (!parsed.success) return new ConfigError(`WARMPATH_CONFIG is invalid: ${describeIssues(parsed.error)}`);
  const cfg = parsed.data;

  const problems: string[] = [];
  const secret = (name: string, field: string, required: boolean): string | undefined => {
    const value = binding(env, name);
    if (typeof value === "string" && value.length > 0) return value;
    if (required) problems.push(`${field}: secret ${name} is not set`);
    return undefined;
  };

  const prefix: PrefixSettings = {
    blockChars: cfg.prefix.block_chars,
    maxBlocks: cfg.prefix.max_blocks,
    charsPerToken: cfg.prefix.chars_per_token,
  };
  const regions = cfg.regions.map((r, i): LoadedRegion => {
    const tokenSecrets = typeof r.node_token_secret === "string" ? [r.node_token_secret] : r.node_token_secret;
    const nodeTokens = tokenSecrets.map(
      (name, j) => secret(name, `regions.${i}.node_token_secret${tokenSecrets.length > 1 ? `.${j}` : ""}`, role.kind !== "region") ?? "",
    );
    // A typo in a dedicated node's tenant list would make the node unreachable for everyone, silently.
    for (const [node, ids] of Object.entries(r.node_tenants))
      for (const id of ids)
        if (!cfg.tenants.some((t) => t.id === id)) problems.push(`regions.${i}.node_tenants.${node}: unknown tenant '${id}'`);
    const usesOriginToken = role.kind === "all" || (role.kind === "region" && (role.served === undefined || role.served === r.name));
    const originToken = r.origin_token_secret
      ? secret(r.origin_token_secret, `regions.${i}.origin_token_secret`, usesOriginToken)
      : undefined;
    const settings: RegionSettings = {
      ...DEFAULT_REGION_SETTINGS,
      name: r.name,
      policy: r.policy,
      nodeSilenceMs: r.node_silence_ms,
      prefillTokensPerSecond: r.prefill_tokens_per_second,
      maxInflightPerNode: r.max_inflight_per_node,
      maxQueueSeconds: r.max_queue_seconds,
      fairShareWaitSeconds: r.fair_share_wait_seconds,
      failureCooldownMs: r.failure_cooldown_ms,
      // Unset, it follows the request deadline (region-schema.ts): core's own default (600 s) is
      // shorter than the default deadline (900 s).
      requestTimeoutMs: r.request_timeout_ms ?? defaultRequestTimeoutMs(cfg.limits.request_deadline_ms),
      maxIndexEntries: r.max_index_entries,
      maxSessions: r.max_sessions,
      nodeTenants: r.node_tenants,
      shards: r.shards,
      blockTokens: prefix.blockChars / prefix.charsPerToken,
      admission: {
        enabled: r.admission.enabled,
        objectiveMinMs: r.admission.objective_min_ms,
        objectivePrefillFactor: r.admission.objective_prefill_factor,
        dispatchWaitMs: r.admission.dispatch_wait_ms,
        order: r.admission.order,
        // Each shard holds its part of the region's queue.
        maxQueued: Math.ceil(r.admission.max_queued / r.shards),
        maxQueuedBlocks: Math.ceil(r.admission.max_queued_blocks / r.shards),
      },
    };
    const staticNodes = r.nodes.map((n) => ({
      id: n.id,
      url: n.url,
      models: n.models,
      kvCapacityTokens: n.kv_capacity_tokens,
      ...(n.engine === undefined ? {} : { engine: n.engine }),
      ...(n.max_running_requests === undefined ? {} : { maxRunning: n.max_running_requests }),
    }));
    const usage = {
      flushIntervalMs: cfg.usage.flush_interval_ms,
      retentionDays: cfg.usage.retention_days,
      ledgerRegion: budgetLedgerRegion(cfg),
    };
    // Hashed once per configuration: each route call carries it, not the init (region-init.ts).
    const fingerprint = regionInitFingerprint({ settings, staticNodes, usage });
    const generation = versionUploadedAt(env);
    return {
      config: r,
      nodeToken: nodeTokens[0]!,
      nodeTokens,
      origins: originPolicy({
        allowedOrigins: r.allowed_origins,
        staticNodeUrls: r.nodes.map((n) => n.url),
        development: cfg.mode === "development",
      }),
      originToken,
      init: { fingerprint, ...(generation === undefined ? {} : { generation }), settings, staticNodes, usage },
      initRef: { fingerprint },
      locationHint: r.location_hint ?? locationHintFor(r.location.lat, r.location.lon),
    };
  });
  const adminToken = role.kind === "region" ? undefined : secret(cfg.admin_token_secret, "admin_token_secret", false);
  // A typo in a tenant's region list would silently leave it fewer regions than meant.
  for (const [i, t] of cfg.tenants.entries())
    for (const r of t.regions ?? [])
      if (!cfg.regions.some((region) => region.name === r)) problems.push(`tenants.${i}.regions: unknown region '${r}'`);
  if (problems.length > 0) return new ConfigError(`WARMPATH_CONFIG is incomplete: ${problems.join("; ")}`);

  const tenantByKeyHash = new Map<string, TenantConfig>();
  for (const t of cfg.tenants) for (const h of t.api_key_sha256) tenantByKeyHash.set(h, t);
  const models = [...new Set(cfg.regions.flatMap((r) => r.models))].sort();
  return {
    raw: cfg,
    regions,
    regionByName: new Map(regions.map((r) => [r.config.name, r])),
    tenantByKeyHash,
    tenantById: new Map(cfg.tenants.map((t) => [t.id, t])),
    prefix,
    adminToken,
    models,
  };
}

/** The region's Durable Object, created near its GPUs on first use (location-hint.ts). */
/** The region's object, or one of its shards' (src/core/shard.ts; shard 0 is the region's own object). */
export function regionStub(env: Env, region: LoadedRegion, shard = 0) {
  return env.REGION.getByName(shardObjectName(region.config.name, shard), { locationHint: region.locationHint });
}

/**
 * The object that ingests the region's node reports and holds its node identities: the region's
 * own object, or for a sharded region its exchange, which hands every report to the shards in its
 * answers to their exchanges (durable-objects/region.ts): one object request per report, whatever
 * the number of shards.
 */
export function regionIngestStub(env: Env, region: LoadedRegion) {
  const shards = region.init.settings.shards;
  return shards > 1
    ? env.REGION.getByName(loadExchangeName(region.config.name), { locationHint: region.locationHint })
    : regionStub(env, region, 0);
}

/** Every shard object of the region, shard 0 first (one for an unsharded region). */
export function regionShardStubs(env: Env, region: LoadedRegion) {
  return Array.from({ length: region.init.settings.shards }, (_, k) => regionStub(env, region, k));
}
