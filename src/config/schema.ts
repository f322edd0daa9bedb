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
import { limitsSchema, prefixSchema } from "./limits-schema.ts";
import { defaultRequestTimeoutMs, REQUEST_TIMEOUT_MARGIN_MS, regionSchema } from "./region-schema.ts";
import { name, secretName } from "./schema-names.ts";
import { tenantSchema } from "./tenant-schema.ts";
import { pricesSchema, usageSchema } from "./usage-schema.ts";

export {
  admissionConfigSchema,
  defaultRequestTimeoutMs,
  locationSchema,
  MAX_INDEX_ENTRIES_LIMIT,
  MAX_REGION_MODELS,
  REQUEST_TIMEOUT_MARGIN_MS,
  placementSchema,
  regionSchema,
  staticNodeSchema,
} from "./region-schema.ts";
export { tenantSchema } from "./tenant-schema.ts";
export { limitsSchema, prefixSchema } from "./limits-schema.ts";

/**
 * Default share of the traces warmpath starts that are sampled. A sampled request writes two spans
 * lines (the edge's ~1 KB, the region worker's ~2 KB) beside its ~1 KB decision line: every
 * request's log volume three times over, which Workers Logs bills (docs/SCALING.md prices the log
 * at 1%), for spans that say little the decision line does not, request after request alike. 1%,
 * OpenTelemetry's usual head sampling for a busy service; a client's sampled `traceparent` is
 * traced whatever this is, and `npm start -- --traces` samples every trace.
 */
export const DEFAULT_TRACE_SAMPLE_RATE = 0.01;

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
    budget_ledger_region: name()
      .optional()
      .describe(
        "The region whose worker holds the budget ledger (docs/USAGE.md), one of `regions`. Default: the first region; `npm run deploy` requires it when a tenant has a budget and there are several regions, since reordering the regions would otherwise move the ledger to a new, empty home.",
      ),
    prefix: prefixSchema.prefault({}),
    admin_token_secret: secretName()
      .default("ADMIN_TOKEN")
      .describe(
        "Secret holding the admin token (state API and dashboard). A secret serves one role: never also a node token or an origin token; nor may any secret name a binding the workers use themselves (`INTERNAL_SECRET`, `WARMPATH_CONFIG`, `REGION_WORKER_*`, ...).",
      ),
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
        "Share of answered requests whose decision is logged (one JSON line each); every error, refusal and failure is logged whatever this says.",
      ),
    trace_sample_rate: z
      .number()
      .min(0)
      .max(1)
      .default(DEFAULT_TRACE_SAMPLE_RATE)
      .describe(
        "Share of the traces warmpath starts (no `traceparent`, or an invalid one) that are sampled: their spans logged, two lines of ~1-2 KB a request. Never more than `decision_log_sample_rate`. A client's valid `traceparent` keeps its own flag; `npm start -- --traces` samples every trace unless this is set.",
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
    secretRoles(cfg, ctx);
    cfg.regions.forEach((r, i) => {
      // The region object releases a request after request_timeout_ms: below the deadline (plus the
      // margin) a stream the deadline allows would lose its ticket and budget hold mid-answer.
      const least = defaultRequestTimeoutMs(cfg.limits.request_deadline_ms);
      if (r.request_timeout_ms !== undefined && r.request_timeout_ms < least)
        ctx.addIssue({
          code: "custom",
          path: ["regions", i, "request_timeout_ms"],
          message: `must be at least limits.request_deadline_ms + ${REQUEST_TIMEOUT_MARGIN_MS} (${least}): a request the deadline allows would be released while its node still answers`,
        });
      // A node dedicated to a tenant barred from the region would serve no one, silently.
      for (const [node, ids] of Object.entries(r.node_tenants))
        for (const id of ids) {
          const allowed = cfg.tenants.find((t) => t.id === id)?.regions;
          if (allowed !== undefined && !allowed.includes(r.name))
            ctx.addIssue({
              code: "custom",
              path: ["regions", i, "node_tenants", node],
              message: `tenant '${id}' may not use region '${r.name}' (its regions: ${allowed.join(", ")})`,
            });
        }
    });
    if (cfg.budget_ledger_region !== undefined && !cfg.regions.some((r) => r.name === cfg.budget_ledger_region))
      ctx.addIssue({
        code: "custom",
        path: ["budget_ledger_region"],
        message: `unknown region '${cfg.budget_ledger_region}' (regions: ${cfg.regions.map((r) => r.name).join(", ")})`,
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

/**
 * A secret serves one role: the admin token opens /admin/*, a node token registers nodes, an origin
 * token is sent as Bearer to a region's nodes. One secret in two roles hands one holder the other's
 * power (a node given the origin token could register nodes with it; a node token would open the
 * admin API). Within a role a secret may be shared: wrangler.toml's development regions share one
 * node token, its deployed regions one origin token. The error names both fields, never the name.
 */
function secretRoles(
  cfg: { admin_token_secret: string; regions: Array<{ node_token_secret: string | string[]; origin_token_secret?: string | undefined }> },
  ctx: z.RefinementCtx,
): void {
  const first = new Map<string, { role: string; path: Array<string | number> }>();
  const claim = (secret: string, role: string, path: Array<string | number>) => {
    const held = first.get(secret);
    if (held === undefined) first.set(secret, { role, path });
    else if (held.role !== role)
      ctx.addIssue({ code: "custom", path, message: `names the same secret as ${held.path.join(".")}: a secret serves one role` });
  };
  claim(cfg.admin_token_secret, "admin", ["admin_token_secret"]);
  cfg.regions.forEach((r, i) => {
    if (typeof r.node_token_secret === "string") claim(r.node_token_secret, "node", ["regions", i, "node_token_secret"]);
    else r.node_token_secret.forEach((s, j) => claim(s, "node", ["regions", i, "node_token_secret", j]));
    if (r.origin_token_secret !== undefined) claim(r.origin_token_secret, "origin", ["regions", i, "origin_token_secret"]);
  });
}

export type WarmpathConfig = z.output<typeof configSchema>;
export type RegionConfig = z.output<typeof regionSchema>;
export type TenantConfig = z.output<typeof tenantSchema>;

/** Formats zod issues as `path.to.field: message; ...`, naming every bad field. */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.map(String).join(".") : "(root)"}: ${i.message}`).join("; ");
}
