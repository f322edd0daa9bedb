/**
 * One Cloudflare account as the stand-in API keeps it (scripts/deploy/standin/server.ts): its
 * workers, each with its versions, secrets, Durable Object classes and migration tag, its
 * workers.dev and custom domain settings, and its assets. Uploads go through the rules of
 * ./rules.ts; a refused upload changes nothing.
 */
import { createHash, randomUUID } from "node:crypto";
import { ApiError, CODE, checkUpload, type Binding, type UploadMetadata } from "./rules.ts";

export interface Version {
  id: string;
  number: number;
  /** The version's bindings, a secret's value left out. */
  bindings: Binding[];
  compatibility_date?: string;
  placement?: Record<string, unknown>;
  limits?: Record<string, unknown>;
  observability?: Record<string, unknown>;
  assets: boolean;
  mainModule: string;
}

export interface Worker {
  name: string;
  tag: string;
  versions: Version[];
  /** The deployed version (a deploy makes the uploaded version the one serving). */
  deployed: string | undefined;
  /** Secret values by name (the account's; {@link Account.snapshot} gives names only). */
  secrets: Map<string, string>;
  migrationTag: string | undefined;
  classes: Map<string, "sqlite" | "kv">;
  workersDev: { enabled: boolean; previews_enabled: boolean };
  domains: Array<{ id: string; hostname: string; zone_name: string }>;
  settings: Record<string, unknown>;
  /** Created by `wrangler secret put` on a missing worker (a placeholder script) rather than a deploy. */
  draft: boolean;
}

/** What a test reads back: no secret value, ever. */
export interface WorkerSnapshot {
  versions: number;
  secrets: string[];
  bindings: Record<string, Record<string, unknown>>;
  migrationTag: string | undefined;
  classes: Record<string, string>;
  placement?: Record<string, unknown>;
  limits?: Record<string, unknown>;
  observability?: Record<string, unknown>;
  workersDev: boolean;
  domains: string[];
  assets: boolean;
  /** sha256 of each secret's value, to compare values across workers without holding them. */
  secretDigests: Record<string, string>;
}

export class Account {
  readonly workers = new Map<string, Worker>();
  private readonly assetTokens = new Map<string, string>();

  /** @param zones Zones of the account (a custom domain must be in one: custom-domains page, "an active Cloudflare zone"). */
  readonly id: string;
  readonly zones: string[];
  constructor(id: string, zones: string[] = ["example.com"]) {
    this.id = id;
    this.zones = zones;
  }

  get(name: string): Worker {
    const w = this.workers.get(name);
    if (!w) throw new ApiError(404, CODE.workerNotFound, `workers.api.error.script_not_found: no worker named '${name}'`);
    return w;
  }

  private blank(name: string): Worker {
    return {
      name,
      tag: randomUUID().replaceAll("-", ""),
      versions: [],
      deployed: undefined,
      secrets: new Map(),
      migrationTag: undefined,
      classes: new Map(),
      workersDev: { enabled: false, previews_enabled: false },
      domains: [],
      settings: {},
      draft: false,
    };
  }

  /**
   * A script upload (PUT .../scripts/:name, or POST .../versions with `deploy`): checked by the
   * rules, then the new version, its secrets and classes stored and, for a deploy, served.
   */
  upload(name: string, metadata: UploadMetadata, modules: Map<string, string>, deploy: boolean): Version {
    const existing = this.workers.get(name);
    const previous = existing?.versions.find((v) => v.id === existing.deployed);
    const after = checkUpload({
      scriptName: name,
      before: existing && {
        bindings: previous?.bindings ?? [],
        secretNames: new Set(existing.secrets.keys()),
        migrationTag: existing.migrationTag,
        classes: existing.classes,
      },
      metadata,
      modules,
      workerExists: (target) => this.workers.has(target),
      classOf: (script, cls) => this.workers.get(script)?.classes.has(cls) ?? false,
      assetsTokenValid: (jwt) => this.assetTokens.get(jwt) === name,
    });
    const worker = existing ?? this.blank(name);
    const bindings = metadata.bindings ?? [];
    for (const b of bindings) if (b.type === "secret_text") worker.secrets.set(b.name, String(b.text));
    // keep_bindings: secret_text keeps the previous version's secrets the upload does not name;
    // without it they are dropped with the version (wrangler always sends it: "never delete secrets").
    const keepSecrets = metadata.keep_bindings?.includes("secret_text") ?? false;
    const secretNames = new Set([
      ...bindings.filter((b) => b.type === "secret_text" || b.type === "inherit").map((b) => b.name),
      ...(keepSecrets ? worker.secrets.keys() : []),
    ]);
    if (!keepSecrets) for (const n of [...worker.secrets.keys()]) if (!secretNames.has(n)) worker.secrets.delete(n);
    const version: Version = {
      id: randomUUID(),
      number: worker.versions.length + 1,
      bindings: [
        ...bindings.filter((b) => b.type !== "secret_text" && b.type !== "inherit"),
        ...[...secretNames].map((n) => ({ name: n, type: "secret_text" })),
      ],
      ...(metadata.compatibility_date ? { compatibility_date: metadata.compatibility_date } : {}),
      ...(metadata.placement ? { placement: metadata.placement } : {}),
      ...(metadata.limits ? { limits: metadata.limits } : {}),
      ...(metadata.observability ? { observability: metadata.observability } : {}),
      assets: metadata.assets?.jwt !== undefined,
      mainModule: metadata.main_module!,
    };
    worker.versions.push(version);
    worker.migrationTag = after.tag;
    worker.classes = after.classes;
    worker.draft = false;
    if (deploy || !existing) worker.deployed = version.id;
    this.workers.set(name, worker);
    return version;
  }

  /** `wrangler secret put` on a worker that does not exist: wrangler first uploads a placeholder script. */
  markDraft(name: string): void {
    const w = this.workers.get(name);
    if (w && w.versions.length === 1) w.draft = true;
  }

  /** A secret set on its own (PUT .../secrets): a new version of the deployed one, with the secret. */
  putSecret(name: string, secret: string, value: string): void {
    const w = this.get(name);
    w.secrets.set(secret, value);
    const current = w.versions.find((v) => v.id === w.deployed);
    if (current) {
      const next: Version = {
        ...current,
        id: randomUUID(),
        number: w.versions.length + 1,
        bindings: [...current.bindings.filter((b) => b.name !== secret), { name: secret, type: "secret_text" }],
      };
      w.versions.push(next);
      w.deployed = next.id;
    }
  }

  deleteSecret(name: string, secret: string): void {
    const w = this.get(name);
    if (!w.secrets.delete(secret)) throw new ApiError(404, 10056, `secret ${secret} not found`);
  }

  /** An assets upload session's completion token, good for one upload of this worker. */
  assetsToken(name: string): string {
    const jwt = `standin-assets-${randomUUID()}`;
    this.assetTokens.set(jwt, name);
    return jwt;
  }

  /**
   * Custom domains: a hostname (no wildcard, no path) inside a zone of the account
   * (https://developers.cloudflare.com/workers/configuration/routing/custom-domains/: "an active
   * Cloudflare zone"), attached to one worker at a time.
   */
  setDomains(name: string, hostnames: string[]): void {
    const w = this.get(name);
    for (const h of hostnames) {
      if (h.includes("*") || h.includes("/")) throw new ApiError(400, 100117, `custom domain ${h}: a host name, without wildcard or path`);
      if (!this.zones.some((z) => h === z || h.endsWith(`.${z}`)))
        throw new ApiError(400, 100116, `custom domain ${h} is not in a zone of this account (${this.zones.join(", ")})`);
    }
    for (const other of this.workers.values())
      if (other !== w) other.domains = other.domains.filter((d) => !hostnames.includes(d.hostname));
    w.domains = hostnames.map((hostname) => ({
      id: randomUUID(),
      hostname,
      zone_name: this.zones.find((z) => hostname === z || hostname.endsWith(`.${z}`))!,
    }));
  }

  snapshot(): Record<string, WorkerSnapshot> {
    const out: Record<string, WorkerSnapshot> = {};
    for (const [name, w] of this.workers) {
      const v = w.versions.find((x) => x.id === w.deployed);
      out[name] = {
        versions: w.versions.length,
        secrets: [...w.secrets.keys()].sort(),
        secretDigests: Object.fromEntries([...w.secrets].map(([k, val]) => [k, createHash("sha256").update(val).digest("hex")])),
        bindings: Object.fromEntries((v?.bindings ?? []).map(({ name: n, ...rest }) => [n, rest])),
        migrationTag: w.migrationTag,
        classes: Object.fromEntries(w.classes),
        ...(v?.placement ? { placement: v.placement } : {}),
        ...(v?.limits ? { limits: v.limits } : {}),
        ...(v?.observability ? { observability: v.observability } : {}),
        workersDev: w.workersDev.enabled,
        domains: w.domains.map((d) => d.hostname).sort(),
        assets: v?.assets ?? false,
      };
    }
    return out;
  }
}
