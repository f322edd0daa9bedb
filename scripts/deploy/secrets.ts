/**
 * `npm run deploy -- --secrets-file FILE`: the secrets' values, uploaded with each worker's
 * version (`wrangler deploy --secrets-file`), so a worker that does not exist yet is created with
 * its secrets. Without them wrangler refuses to create a worker whose `secrets.required` are not
 * set ("This Worker does not exist yet, so secrets cannot be set in advance"), and the
 * documented order before this (deploy, then `wrangler secret put`) failed at the first worker of
 * a fresh account.
 *
 * The file is JSON (`{"NAME": "value"}`) or dotenv (`NAME=value`), as wrangler reads it. Each
 * worker gets a file of its own holding only the names it needs (mode 0600, in a temporary
 * directory removed after the deploy), so no worker receives another's token. A name the file
 * lacks is inherited from the worker's previous version (an update need not carry any); a name no
 * worker needs is refused (a typo would otherwise leave the real secret unset), and so is one value
 * under two names (a real deploy refuses it, a dry run warns).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseEnv } from "node:util";
import { INTERNAL_SECRET_VAR, MIN_SECRET_LENGTH } from "../../src/core/internal-auth.ts";
import type { Findings } from "./checks.ts";
import type { GeneratedWorker } from "./generate.ts";
import { atJsonError, positionAt } from "./json-position.ts";
// A secret's name, as the configuration's schema takes it. A name that is not one is never printed:
// it is usually a line read the wrong way (a JSON line read as dotenv makes `"INTERNAL_SECRET":
// "k2J9...` a name), and so holds a value.
import { SECRET_NAME } from "../../src/config/schema-names.ts";

export class SecretsFileError extends Error {}

/** The 1-based line where `name` is given: a JSON key, or a dotenv line's name (undefined if not found as written). */
function lineOf(text: string, name: string, json: boolean): number | undefined {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const at = json ? text.indexOf(JSON.stringify(name)) : text.search(new RegExp(`^[ \\t]*(?:export[ \\t]+)?${escaped}[ \\t]*=`, "m"));
  return at < 0 ? undefined : positionAt(text, at).line;
}

/**
 * Reads a secrets file: JSON of strings if it starts with `{`, else dotenv. Never echoes a value, nor
 * any part of the file that may hold one: a JSON error says where (line and column), an entry whose
 * name is not a secret's name is counted by line, not shown.
 */
export function readSecretsFile(path: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(path, "utf8").replace(/^\uFEFF/, "");
  } catch (e) {
    throw new SecretsFileError(`--secrets-file ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  let values: Record<string, unknown>;
  const json = text.trimStart().startsWith("{");
  // A file that starts with `{` is JSON, and a JSON error is the file's error: read as dotenv
  // instead (as it was), a pretty-printed line `"NAME": "value=",` is a "name" holding the value.
  if (json) {
    try {
      values = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // JSON.parse's message quotes the text around an unexpected token: only the position is said.
      throw new SecretsFileError(
        `--secrets-file ${path}: not valid JSON${atJsonError(text)} (a trailing comma, or a missing comma or quote, is the usual cause; the content is not shown)`,
      );
    }
    if (values === null || typeof values !== "object" || Array.isArray(values))
      throw new SecretsFileError(`--secrets-file ${path}: a JSON object of strings`);
  } else values = parseEnv(text);
  const malformed = Object.keys(values).filter((k) => !SECRET_NAME.test(k));
  if (malformed.length) {
    const lines = [...new Set(malformed.map((k) => lineOf(text, k, json)).filter((l) => l !== undefined))].sort((a, b) => a - b);
    throw new SecretsFileError(
      `--secrets-file ${path}: ${malformed.length} ${malformed.length === 1 ? "entry's name is" : "entries' names are"} not a secret's name (UPPER_SNAKE_CASE: A-Z, 0-9, _)${lines.length ? ` at ${lines.length === 1 ? "line" : "lines"} ${lines.join(", ")}` : ""}; not shown, as a malformed line may hold a value (JSON {"NAME":"value"} or NAME=value lines)`,
    );
  }
  const bad = Object.entries(values).filter(([, v]) => typeof v !== "string" || v === "");
  if (bad.length)
    throw new SecretsFileError(`--secrets-file ${path}: ${bad.map(([k]) => k).join(", ")}: each value must be a non-empty string`);
  if (Object.keys(values).length === 0)
    throw new SecretsFileError(`--secrets-file ${path}: no secrets in it (JSON {"NAME":"value"} or NAME=value lines)`);
  return values as Record<string, string>;
}

/**
 * One value under two secret names: refused for a real deploy, a warning for a dry run (as a
 * placeholder key, ./checks.ts). Each name opens something of its own (the admin API, a region's
 * node registration, a region's nodes, the workers' internal messages), so one leaked value would
 * open both: a node token that is also the admin token hands every GPU host the admin API. One
 * secret meant for several regions of one role is one name (the configuration's schema allows
 * that), not two. Only the file's values are compared: a name it lacks keeps a value this deploy
 * never sees. The message says the names, never the value.
 */
export function checkSecretReuse(values: Record<string, string>, refuse: boolean): Findings {
  const namesOf = new Map<string, string[]>();
  for (const [name, value] of Object.entries(values)) namesOf.set(value, [...(namesOf.get(value) ?? []), name]);
  const found = [...namesOf.values()]
    .filter((names) => names.length > 1)
    .map((names) => {
      const sorted = [...names].sort();
      return `--secrets-file: ${sorted.slice(0, -1).join(", ")} and ${sorted[sorted.length - 1]} hold the same value, so one leaked credential would open what each does: give each its own (openssl rand -hex 32)`;
    });
  // Warned only: the warning says what a real deploy would do.
  return refuse
    ? { problems: found, warnings: [] }
    : { problems: [], warnings: found.map((w) => `${w} (a real deploy refuses a value under two names)`) };
}

/**
 * Refuses names no worker needs, an internal secret too short to sign with (src/core/internal-auth.ts),
 * and, when `refuse` (a real deploy), one value under two names ({@link checkSecretReuse}); returns
 * the warnings (a dry run's reuse). The names it prints are secret names (readSecretsFile refused
 * any other), never values.
 */
export function checkSecrets(values: Record<string, string>, workers: GeneratedWorker[], refuse = true): string[] {
  const needed = new Set(workers.flatMap((w) => w.secrets));
  const unknown = Object.keys(values).filter((k) => !needed.has(k));
  if (unknown.length)
    throw new SecretsFileError(
      `--secrets-file names ${unknown.join(", ")}, which no worker of this environment needs (they need: ${[...needed].sort().join(", ")})`,
    );
  const internal = values[INTERNAL_SECRET_VAR];
  if (internal !== undefined && internal.length < MIN_SECRET_LENGTH)
    throw new SecretsFileError(
      `--secrets-file: ${INTERNAL_SECRET_VAR} is ${internal.length} characters, at least ${MIN_SECRET_LENGTH} (openssl rand -hex 32)`,
    );
  const reuse = checkSecretReuse(values, refuse);
  if (reuse.problems.length) throw new SecretsFileError(reuse.problems.join("; "));
  return reuse.warnings;
}

/** The names a worker needs that the file does not give (inherited: they must already be set on it). */
export function missingFor(worker: GeneratedWorker, values: Record<string, string>): string[] {
  return worker.secrets.filter((s) => !(s in values));
}

/** Per-worker secrets files in a private temporary directory; `remove()` deletes them. */
export function writeWorkerSecrets(
  values: Record<string, string>,
  workers: GeneratedWorker[],
): { files: Map<string, string>; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), "warmpath-secrets-"));
  const files = new Map<string, string>();
  for (const w of workers) {
    const own = Object.fromEntries(w.secrets.filter((s) => s in values).map((s) => [s, values[s]!]));
    if (!Object.keys(own).length) continue;
    const file = join(dir, `${w.name}.json`);
    writeFileSync(file, JSON.stringify(own), { mode: 0o600 });
    files.set(w.name, file);
  }
  return { files, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
