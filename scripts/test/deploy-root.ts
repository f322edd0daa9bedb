/**
 * Roots of their own for the deploy tests (scripts/test/deploy*.test.ts): a copy of the project's
 * wrangler.toml, edited.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "smol-toml";
import { ROOT } from "../deploy.ts";

// Parsed TOML, read as the generator reads it.
type Json = Record<string, any>;

/** sha256("replace-me"): wrangler.toml's placeholder tenant key, which a real deploy refuses. */
const PLACEHOLDER_HASH = "1df4b07d05b9b3b1115b4b6b22af319a2f99564a2fa2573a34896063c7513c10";

/**
 * A copy of the project's wrangler.toml with `edit` applied to [env.production]'s WARMPATH_CONFIG
 * (`editToml`: to the whole file), in a root of its own; every environment's placeholder tenant key
 * replaced by another hash unless `keepPlaceholders`.
 */
export function rootWith(
  edit: (config: Json) => void,
  options: { keepPlaceholders?: boolean; editToml?: (toml: Json) => void } = {},
): string {
  const root = mkdtempSync(join(tmpdir(), "warmpath-deploy-root-"));
  const toml = parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as Json;
  if (!options.keepPlaceholders)
    for (const env of Object.values(toml.env as Record<string, Json>))
      for (const t of env.vars.WARMPATH_CONFIG.tenants as Json[])
        t.api_key_sha256 = t.api_key_sha256.map((h: string) =>
          h === PLACEHOLDER_HASH ? createHash("sha256").update(`key of ${t.id}`).digest("hex") : h,
        );
  edit(toml.env.production.vars.WARMPATH_CONFIG);
  options.editToml?.(toml);
  writeFileSync(join(root, "wrangler.toml"), stringify(toml));
  return root;
}
