/**
 * What the deploy generator (./generate.ts) checks of an environment beyond the worker's own
 * schema: that the configuration fits the platform, that each region's worker and object are
 * placed in the same area, that the budget ledger's home is named, that it is not in development
 * mode, that no secret is a plain var, and that no placeholder key is deployed to production. Each
 * returns problems (refused) and warnings (printed); none writes.
 */
import { createHash } from "node:crypto";
import { DEV_API_KEY, DEV_API_KEY_2, DEV_API_KEY_3 } from "../../src/config/dev-credentials.ts";
import { hasBudgets } from "../../src/config/ledger-home.ts";
import { locationHintFor } from "../../src/config/location-hint.ts";
import type { RegionConfig, WarmpathConfig } from "../../src/config/schema.ts";
import { INTERNAL_SECRET_PREVIOUS_VAR, INTERNAL_SECRET_VAR } from "../../src/core/internal-auth.ts";
import { CLOUD_REGION_COORDINATES } from "./cloud-regions.ts";

export interface Findings {
  problems: string[];
  warnings: string[];
}

/**
 * Cloudflare's limit on one environment variable, 5 KB on every plan
 * (https://developers.cloudflare.com/workers/platform/limits/, "Environment variable size"); the
 * whole warmpath configuration is one (WARMPATH_CONFIG, sent as a JSON binding). The example
 * environments are ~1.2 KB; a fleet with hundreds of tenants' key hashes (~70 bytes each) is not.
 */
export const MAX_VAR_BYTES = 5 * 1024;

/** The bytes a var takes as uploaded: a table is sent as its JSON, a string as itself. */
export function varBytes(value: unknown): number {
  return Buffer.byteLength(typeof value === "string" ? value : JSON.stringify(value));
}

export function checkConfigSize(value: unknown, where: string): Findings {
  const size = varBytes(value);
  return {
    problems:
      size > MAX_VAR_BYTES
        ? [
            `${where}: vars.WARMPATH_CONFIG is ${size.toLocaleString("en")} bytes as uploaded, over Cloudflare's ${MAX_VAR_BYTES.toLocaleString("en")}-byte (5 KB) limit on one environment variable: shorten it (fewer static nodes, tenants' key hashes) or split the deployment`,
          ]
        : [],
    warnings: [],
  };
}

/** The Durable Object location hint of the region's object: its `location_hint`, else derived from its `location`. */
export function objectHint(r: RegionConfig): string {
  return r.location_hint ?? locationHintFor(r.location.lat, r.location.lon);
}

/**
 * A region's worker runs where `placement` says and its object where its location hint says; every
 * routing decision is a round trip between the two, so they must name the same area. Checked for
 * the cloud regions of ./cloud-regions.ts; a `host`/`hostname` placement (probed by Cloudflare) or
 * an unlisted region cannot be, and is a warning.
 */
export function checkPlacementHints(config: WarmpathConfig): Findings {
  const out: Findings = { problems: [], warnings: [] };
  config.regions.forEach((r, i) => {
    if (!r.placement) return;
    const hint = objectHint(r);
    const source = r.location_hint ? `location_hint "${hint}"` : `location_hint "${hint}" (derived from its location)`;
    if (!("region" in r.placement)) {
      out.warnings.push(
        `regions.${i}.placement: region '${r.name}' is placed by a probed ${"host" in r.placement ? "host" : "hostname"}; check yourself that it is in the ${source} area of its Durable Object`,
      );
      return;
    }
    const at = CLOUD_REGION_COORDINATES[r.placement.region];
    if (!at) {
      out.warnings.push(
        `regions.${i}.placement: '${r.placement.region}' is not in scripts/deploy/cloud-regions.ts, so region '${r.name}''s placement was not checked against its Durable Object's ${source}`,
      );
      return;
    }
    const placed = locationHintFor(at[0], at[1]);
    if (placed !== hint)
      out.problems.push(
        `regions.${i}.placement: region '${r.name}''s worker is placed in ${r.placement.region} (area "${placed}") but its Durable Object's ${source}: they must name the same place, or every routing decision crosses between them; fix placement or location_hint`,
      );
  });
  return out;
}

/**
 * The budget ledger's home must be named when budgets are configured over several regions: by
 * default it is the first region, so reordering `regions` would move it and start an empty ledger
 * (every tenant's spend so far forgotten) without a word.
 */
export function checkLedgerHome(config: WarmpathConfig): Findings {
  const problems =
    hasBudgets(config) && config.regions.length > 1 && config.budget_ledger_region === undefined
      ? [
          `budget_ledger_region: required to deploy when a tenant has a budget and there are ${config.regions.length} regions: name the region whose worker holds the budget ledger (e.g. budget_ledger_region = "${config.regions[0]!.name}", today's home). Without it the home is the first region listed, and reordering the regions would silently start an empty ledger`,
        ]
      : [];
  return { problems, warnings: [] };
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

/**
 * Keys that must never open a deployed tenant: wrangler.toml's placeholder (`replace-me`, whose
 * hash is in the repository), the public development keys (README), and the usual stand-ins.
 */
export const PLACEHOLDER_KEYS = [
  "replace-me",
  "changeme",
  "change-me",
  "example",
  "test",
  "secret",
  "",
  DEV_API_KEY,
  DEV_API_KEY_2,
  DEV_API_KEY_3,
];
const PLACEHOLDER_HASHES = new Map(PLACEHOLDER_KEYS.map((k) => [sha256(k), k]));

/** Tenants whose key hashes are a placeholder's: refused for production, a warning otherwise (a dry run, staging). */
export function checkPlaceholderKeys(config: WarmpathConfig, refuse: boolean): Findings {
  const found: string[] = [];
  config.tenants.forEach((t, i) =>
    t.api_key_sha256.forEach((h, j) => {
      const key = PLACEHOLDER_HASHES.get(h);
      if (key !== undefined)
        found.push(
          `tenants.${i}.api_key_sha256.${j}: tenant '${t.id}' has the hash of the placeholder key ${JSON.stringify(key)}, which anyone can read in this repository: replace it with printf %s "$KEY" | sha256sum`,
        );
    }),
  );
  // Warned only: the warning says what a real deploy would do (said here, not of every warning).
  return refuse
    ? { problems: found, warnings: [] }
    : { problems: [], warnings: found.map((w) => `${w} (a real deploy refuses a placeholder key)`) };
}

/**
 * A deployed environment is never in development mode: it accepts the public development
 * credentials (on a loopback host only) and allows loopback as a node origin (src/core/origins.ts),
 * neither of which a deployment has any use for. Refused by a dry run too: unlike a placeholder key
 * (which the example environments carry, so `npm test`'s dry runs warn), nothing deployable has it.
 */
export function checkDevelopmentMode(config: WarmpathConfig): Findings {
  return {
    problems:
      config.mode === "development"
        ? [
            `mode: "development" cannot be deployed (it accepts the public development credentials and allows loopback node origins): remove it, or set mode = "production"`,
          ]
        : [],
    warnings: [],
  };
}

/** Every secret name the configuration uses, with the field naming it, and the internal boundary's two. */
export function secretNames(config: WarmpathConfig): Map<string, string> {
  const names = new Map<string, string>([
    [config.admin_token_secret, "admin_token_secret"],
    [INTERNAL_SECRET_VAR, "the internal secret"],
    [INTERNAL_SECRET_PREVIOUS_VAR, "the previous internal secret"],
  ]);
  config.regions.forEach((r, i) => {
    const tokens = typeof r.node_token_secret === "string" ? [r.node_token_secret] : r.node_token_secret;
    for (const name of tokens) if (!names.has(name)) names.set(name, `regions.${i}.node_token_secret`);
    if (r.origin_token_secret && !names.has(r.origin_token_secret)) names.set(r.origin_token_secret, `regions.${i}.origin_token_secret`);
  });
  return names;
}

/**
 * A deployed environment's var named as one of its secrets: refused (by a dry run too). Its value
 * would be written in plaintext to the generated configurations (and printed by wrangler), go to
 * workers that must not hold it (an origin token to the edge), and stand in for the secret, which
 * then is not declared where it belongs. Only the name is said, never the value.
 */
export function checkSecretVars(vars: Record<string, unknown> | undefined, config: WarmpathConfig): Findings {
  const names = secretNames(config);
  const problems = Object.keys(vars ?? {})
    .filter((k) => names.has(k))
    .map(
      (k) =>
        `vars.${k}: named as a secret (${names.get(k)}), so it must not be a var (its value would be written in plaintext to the generated configurations): remove it, and give its value in --secrets-file (docs/DEPLOY.md, "Secrets, per worker")`,
    );
  return { problems, warnings: [] };
}
