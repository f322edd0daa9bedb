/**
 * The configuration's shared field shapes: names, secret names, key hashes, durations
 * (src/config/schema.ts).
 */
import { z } from "zod";
import { ALL_REGIONS_BINDING, BUDGET_LEDGER_BINDING, LOCAL_ASSETS_BINDING, REGION_VAR, regionBindingName } from "../contracts/topology.ts";
import { INTERNAL_SECRET_PREVIOUS_VAR, INTERNAL_SECRET_VAR } from "../core/internal-auth.ts";

const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const SECRET_NAME = /^[A-Z_][A-Z0-9_]{0,127}$/;
export const SHA256_HEX = /^[0-9a-f]{64}$/;
/** A region, tenant or namespace name: lowercase letters, digits and dashes, at most 63 characters. */
export const name = () => z.string().regex(NAME, "must be lowercase letters, digits and dashes");

/**
 * Names the workers read or bind themselves, which no configured secret may name. The internal
 * boundary's secrets above all: an admin token named INTERNAL_SECRET would make the key every
 * worker signs with open /admin/*, an origin token so named would send it as Bearer to every node.
 * The rest (the configuration and region variables, wrangler.toml's bindings, the service bindings
 * src/contracts/topology.ts names and scripts/deploy/generate.ts declares) would be shadowed by the
 * secret or shadow it, and a deploy would fail or the worker read the wrong thing.
 */
export const RESERVED_BINDING_NAMES: ReadonlySet<string> = new Set([
  INTERNAL_SECRET_VAR,
  INTERNAL_SECRET_PREVIOUS_VAR,
  "WARMPATH_CONFIG",
  REGION_VAR,
  // wrangler.toml's bindings: the region Durable Object, the decision dataset, the edge ceiling.
  "REGION",
  "ANALYTICS",
  "RATE_LIMITER",
  ALL_REGIONS_BINDING,
  BUDGET_LEDGER_BINDING,
  LOCAL_ASSETS_BINDING,
]);

/**
 * The edge's binding to each region's worker is `REGION_WORKER_<REGION>`: the whole prefix is
 * reserved, not only the configured regions' bindings, so adding a region never turns an existing
 * secret into its binding.
 */
const REGION_BINDING_PREFIX = regionBindingName("");

export function isReservedBindingName(secret: string): boolean {
  return RESERVED_BINDING_NAMES.has(secret) || secret.startsWith(REGION_BINDING_PREFIX);
}

/** The name of a Worker secret (a binding name), never one the workers use themselves. */
export const secretName = () =>
  z
    .string()
    .regex(SECRET_NAME, "must be an UPPER_SNAKE_CASE binding name")
    .refine(
      (s) => !isReservedBindingName(s),
      `must not name a binding the workers use themselves (${[...RESERVED_BINDING_NAMES].join(", ")}, ${REGION_BINDING_PREFIX}*)`,
    );

/**
 * The longest duration a field may configure, unless its own meaning needs longer: a day. Far past
 * any request or wait warmpath serves, and inside what a timer can hold (setTimeout fires at once
 * past 2^31-1 ms, ~24.8 days).
 */
export const MAX_DURATION_MS = 24 * 60 * 60 * 1000;
