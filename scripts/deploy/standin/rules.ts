/**
 * The rules of the Cloudflare API that `npm run deploy` relies on, as the stand-in
 * (scripts/deploy/standin/server.ts) enforces them on a worker upload. Each cites the documentation
 * it comes from; a rule not documented is not here (docs/DEPLOY.md, "What the stand-in does not prove").
 *
 * Pure: an upload and the account's state in, an {@link ApiError} (Cloudflare's error shape, the
 * codes wrangler recognises) or the worker's next state out.
 */

/** A Cloudflare API error: HTTP status, the API's numeric code, and its message. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: number;
  constructor(status: number, code: number, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Codes wrangler acts on (node_modules/wrangler: WORKER_NOT_FOUND_ERR_CODE, INVALID_INHERIT_BINDING_CODE). */
export const CODE = {
  workerNotFound: 10007,
  invalidInheritBinding: 10057,
  /** Any other refused upload (the stand-in's own; wrangler prints the message). */
  invalidUpload: 10021,
  migrationTagPrecondition: 10079,
  unknownDoClass: 10061,
  serviceNotFound: 10143,
} as const;

/**
 * Environment variable size, 5 KB on every plan, and 128 variables per Worker (Workers Paid):
 * https://developers.cloudflare.com/workers/platform/limits/ ("Environment variable size").
 */
export const MAX_VAR_BYTES = 5 * 1024;
export const MAX_VARS = 128;
/** CPU time per invocation, at most 5 minutes (Workers Paid): same page, "CPU time". */
export const MAX_CPU_MS = 300_000;
/** A rate limiting binding's period: 10 or 60 seconds (https://developers.cloudflare.com/workers/runtime-apis/bindings/rate-limit/). */
const RATE_LIMIT_PERIODS = [10, 60];

export interface Binding {
  name: string;
  type: string;
  [key: string]: unknown;
}

export interface Migrations {
  old_tag?: string;
  new_tag?: string;
  steps?: Array<{
    new_classes?: string[];
    new_sqlite_classes?: string[];
    deleted_classes?: string[];
    renamed_classes?: Array<{ from: string; to: string }>;
  }>;
}

/** The part of an upload's `metadata` the rules read (createWorkerUploadForm in wrangler). */
export interface UploadMetadata {
  main_module?: string;
  bindings?: Binding[];
  compatibility_date?: string;
  migrations?: Migrations;
  keep_bindings?: string[];
  placement?: Record<string, unknown>;
  limits?: { cpu_ms?: number; subrequests?: number };
  observability?: Record<string, unknown>;
  assets?: { jwt?: string; config?: Record<string, unknown> };
}

/** What a worker's script is, as far as the rules need: its bindings, secrets and Durable Object classes. */
export interface ScriptState {
  bindings: Binding[];
  /** Secret names set on the worker (values are kept by the account, never here). */
  secretNames: Set<string>;
  migrationTag: string | undefined;
  /** Durable Object classes the worker's migrations created, and their storage. */
  classes: Map<string, "sqlite" | "kv">;
}

/** Whether a class is exported by the uploaded modules (`export { A, B }` or `export class A`). */
export function exportsClass(code: string, name: string): boolean {
  const list = /export\s*\{([^}]*)\}/g;
  for (let m = list.exec(code); m; m = list.exec(code))
    if (
      m[1]!.split(",").some(
        (part) =>
          part
            .trim()
            .split(/\s+as\s+/)
            .pop()!
            .trim() === name,
      )
    )
      return true;
  return new RegExp(`export\\s+(?:default\\s+)?class\\s+${name}\\b`).test(code);
}

/**
 * Applies an upload's migrations to the worker's classes.
 * https://developers.cloudflare.com/durable-objects/reference/durable-objects-migrations/: a
 * migration's tag is unique and tells which migrations have run, so an upload's `old_tag` must be
 * the script's current tag (wrangler sends it from the tag it read); a new class is declared once
 * (`new_sqlite_classes` creates it SQLite-backed; "an already-deployed class cannot be converted to
 * SQLite"); a renamed or deleted class must exist, and a rename's destination "must be exported by
 * the deployed Worker".
 */
export function applyMigrations(
  before: ScriptState | undefined,
  migrations: Migrations | undefined,
): { tag: string | undefined; classes: Map<string, "sqlite" | "kv"> } {
  const classes = new Map(before?.classes ?? []);
  const tag = before?.migrationTag;
  if (!migrations) return { tag, classes };
  if ((migrations.old_tag ?? undefined) !== tag)
    throw new ApiError(
      400,
      CODE.migrationTagPrecondition,
      `migration tag precondition failed: the script's current migration tag is ${tag ?? "(none)"}, the upload's old_tag is ${migrations.old_tag ?? "(none)"}`,
    );
  if (!migrations.new_tag) throw new ApiError(400, CODE.invalidUpload, "migrations.new_tag is required");
  if (tag !== undefined && migrations.new_tag === tag)
    throw new ApiError(400, CODE.migrationTagPrecondition, `migration tag ${tag} is already applied: a new migration needs a new tag`);
  for (const step of migrations.steps ?? []) {
    for (const [list, storage] of [
      [step.new_sqlite_classes, "sqlite"],
      [step.new_classes, "kv"],
    ] as const)
      for (const name of list ?? []) {
        if (classes.has(name))
          throw new ApiError(
            400,
            CODE.invalidUpload,
            `Durable Object class ${name} already exists: it cannot be created again (or converted to SQLite)`,
          );
        classes.set(name, storage);
      }
    for (const { from, to } of step.renamed_classes ?? []) {
      const storage = classes.get(from);
      if (!storage) throw new ApiError(400, CODE.invalidUpload, `cannot rename Durable Object class ${from}: it does not exist`);
      classes.delete(from);
      classes.set(to, storage);
    }
    for (const name of step.deleted_classes ?? []) {
      if (!classes.delete(name))
        throw new ApiError(400, CODE.invalidUpload, `cannot delete Durable Object class ${name}: it does not exist`);
    }
  }
  return { tag: migrations.new_tag, classes };
}

/**
 * Placement: `mode = "smart"`, or one target of `region` (`provider:region`), `host` (`host:port`,
 * probed at layer 4) or `hostname` (probed at layer 7), mutually exclusive:
 * https://developers.cloudflare.com/workers/configuration/placement/ and the changelog "New
 * Placement Hints for Workers" (2026-01-22): AWS, GCP and Azure region identifiers.
 */
export function checkPlacement(p: Record<string, unknown> | undefined): void {
  if (!p) return;
  const targets = ["region", "host", "hostname"].filter((k) => p[k] !== undefined);
  const bad = (why: string) => new ApiError(400, CODE.invalidUpload, `placement is invalid: ${why} (${JSON.stringify(p)})`);
  if (p.mode === "smart") {
    if (targets.length) throw bad("smart placement takes no region, host or hostname");
    return;
  }
  if (p.mode !== undefined && p.mode !== "targeted") throw bad(`unknown mode ${String(p.mode)}`);
  if (targets.length !== 1) throw bad("exactly one of region, host or hostname");
  const value = String(p[targets[0]!]);
  if (targets[0] === "region" && !/^(aws|gcp|azure):[a-z0-9-]+$/.test(value))
    throw bad("region must be aws:, gcp: or azure: and a region id");
  if (targets[0] === "host" && !/^[A-Za-z0-9.[\]:-]+:\d{1,5}$/.test(value)) throw bad("host must be host:port");
  if (targets[0] === "hostname" && !/^[A-Za-z0-9.-]{1,253}$/.test(value)) throw bad("hostname must be a host name, without scheme or port");
}

/** Vars: at most {@link MAX_VARS}, each at most {@link MAX_VAR_BYTES} (limits page, above). */
function checkVars(bindings: Binding[]): void {
  const vars = bindings.filter((b) => b.type === "plain_text" || b.type === "json");
  if (vars.length > MAX_VARS) throw new ApiError(400, CODE.invalidUpload, `${vars.length} environment variables: at most ${MAX_VARS}`);
  for (const v of vars) {
    const size = Buffer.byteLength(v.type === "json" ? JSON.stringify(v.json) : String(v.text ?? ""));
    if (size > MAX_VAR_BYTES)
      throw new ApiError(400, CODE.invalidUpload, `environment variable ${v.name} is ${size} bytes: at most ${MAX_VAR_BYTES} (5 KB)`);
  }
}

export interface UploadContext {
  scriptName: string;
  /** The worker before this upload (undefined: it does not exist yet). */
  before: ScriptState | undefined;
  metadata: UploadMetadata;
  /** The uploaded modules' text, by part name. */
  modules: Map<string, string>;
  /** Whether a worker of that name exists in the account (service binding targets). */
  workerExists: (name: string) => boolean;
  /** A Durable Object class of another worker (`script_name` bindings). */
  classOf: (script: string, className: string) => boolean;
  /** Whether an assets completion token was issued for this worker. */
  assetsTokenValid: (jwt: string) => boolean;
}

/** Checks an upload against the rules; returns the worker's migration tag and classes after it. */
export function checkUpload(ctx: UploadContext): { tag: string | undefined; classes: Map<string, "sqlite" | "kv"> } {
  const { metadata, before } = ctx;
  const main = metadata.main_module;
  if (!main || !ctx.modules.has(main))
    throw new ApiError(400, CODE.invalidUpload, `main_module ${main ?? "(none)"} is not among the uploaded parts`);
  const code = [...ctx.modules.values()].join("\n");
  const bindings = metadata.bindings ?? [];
  const names = new Set<string>();
  for (const b of bindings) {
    if (names.has(b.name)) throw new ApiError(400, CODE.invalidUpload, `binding ${b.name} is declared twice`);
    names.add(b.name);
  }
  checkVars(bindings);
  checkPlacement(metadata.placement);
  const cpu = metadata.limits?.cpu_ms;
  if (cpu !== undefined && (!Number.isInteger(cpu) || cpu < 1 || cpu > MAX_CPU_MS))
    throw new ApiError(400, CODE.invalidUpload, `limits.cpu_ms ${cpu}: an integer from 1 to ${MAX_CPU_MS}`);

  // Secrets: https://developers.cloudflare.com/workers/configuration/secrets/ and the changelog
  // "Declare required secrets in your Wrangler configuration" (2026-03-24): a deploy fails unless
  // every required secret is configured on the Worker. Wrangler sends each required secret not in
  // the upload as an `inherit` binding, which the API resolves from the worker's previous version:
  // none on a worker that does not exist yet, so its secrets come with its first upload
  // (`--secrets-file`) or were set before it (`wrangler secret put` creates the worker).
  const inherited = bindings.filter((b) => b.type === "inherit");
  const invalid = inherited.filter((b) => !before?.secretNames.has(b.name) && !before?.bindings.some((p) => p.name === b.name));
  if (invalid.length)
    throw new ApiError(
      400,
      CODE.invalidInheritBinding,
      invalid
        .map(
          (b) =>
            `inherit binding '${b.name}' is invalid: ${before ? "the previous version has no such binding" : "the worker does not exist yet"}`,
        )
        .join("; "),
    );

  // Service bindings name a Worker of the account, which must exist:
  // https://developers.cloudflare.com/workers/runtime-apis/bindings/service-bindings/ (the target
  // Worker is deployed first; a binding to a missing one is refused).
  for (const b of bindings.filter((x) => x.type === "service")) {
    const target = String(b.service);
    if (target !== ctx.scriptName && !ctx.workerExists(target))
      throw new ApiError(400, CODE.serviceNotFound, `service binding ${b.name}: target worker '${target}' not found; deploy it first`);
  }

  const after = applyMigrations(before, metadata.migrations);
  // Durable Object bindings: a class of this worker must have been created by a migration
  // (durable-objects-migrations page above: "You must initiate a migration process when you create
  // a new Durable Object class") and be exported; one of another worker must exist there.
  for (const b of bindings.filter((x) => x.type === "durable_object_namespace")) {
    const cls = String(b.class_name);
    if (b.script_name !== undefined && b.script_name !== ctx.scriptName) {
      if (!ctx.classOf(String(b.script_name), cls))
        throw new ApiError(
          400,
          CODE.unknownDoClass,
          `binding ${b.name}: worker '${String(b.script_name)}' has no Durable Object class ${cls}`,
        );
      continue;
    }
    if (!after.classes.has(cls))
      throw new ApiError(
        400,
        CODE.unknownDoClass,
        `Cannot create binding for class '${cls}' because it is not currently configured to implement Durable Objects. Did you forget to apply a migration?`,
      );
  }
  // Every class the worker has stays exported unless a migration deletes or renames it (same page).
  for (const cls of after.classes.keys())
    if (!exportsClass(code, cls))
      throw new ApiError(
        400,
        CODE.invalidUpload,
        `Durable Object class ${cls} exists but the upload does not export it: delete it with a migration first`,
      );

  for (const b of bindings.filter((x) => x.type === "ratelimit")) {
    const simple = b.simple as { limit?: number; period?: number } | undefined;
    if (!simple || !RATE_LIMIT_PERIODS.includes(simple.period ?? -1) || !Number.isInteger(simple.limit) || simple.limit! < 1)
      throw new ApiError(
        400,
        CODE.invalidUpload,
        `rate limit binding ${b.name}: simple = { limit > 0, period = 10 or 60 } (${JSON.stringify(simple)})`,
      );
  }
  if (metadata.assets?.jwt !== undefined && !ctx.assetsTokenValid(metadata.assets.jwt))
    throw new ApiError(400, CODE.invalidUpload, "assets.jwt was not issued by an assets upload session of this worker");
  return after;
}
