/**
 * The region object's node table in SQLite: what a restart needs to know of each node (the index
 * and the load are soft state, relearned from traffic), and the hash of each registered node's
 * secret.
 *
 *     nodes(id TEXT PRIMARY KEY, url TEXT, models TEXT (JSON array), kv_capacity_tokens INTEGER,
 *           static INTEGER (0/1), last_seen INTEGER (ms epoch), boot_id TEXT NULL,
 *           engine TEXT NULL, max_running INTEGER NULL (each added by ALTER TABLE to objects
 *           created before it))
 *     node_secrets(id TEXT PRIMARY KEY, sha256 TEXT): the SHA-256 of each registered node's secret
 *           (src/core/node-identity.ts), never the secret; a table of its own so that objects
 *           created before node secrets need no migration (their nodes simply have none)
 *
 * Written only when a node joins, changes or leaves, and its `last_seen` now and then (the region
 * object decides when: region.ts LAST_SEEN_WRITE_FRACTION); never per request.
 */
import { nodeEngineSchema, nodeMaxRunningSchema } from "../src/contracts/node.ts";
import type { NodeSpec } from "../src/core/region/index.ts";

interface NodeRow extends Record<string, SqlStorageValue> {
  id: string;
  url: string;
  models: string;
  kv_capacity_tokens: number;
  static: number;
  last_seen: number;
  boot_id: string | null;
  engine: string | null;
  max_running: number | null;
}

export class NodeStore {
  private readonly sql: SqlStorage;
  /** When each node's row was last written (its `last_seen` then). */
  private readonly persistedSeen = new Map<string, number>();
  /** Node id -> SHA-256 of its secret (mirrors `node_secrets`). */
  private readonly secrets = new Map<string, string>();

  constructor(sql: SqlStorage) {
    this.sql = sql;
  }

  /** Creates the tables, or adds the columns an object created before them lacks (NULL: not said). */
  migrate(): void {
    this.sql.exec(`CREATE TABLE IF NOT EXISTS nodes (
      id TEXT PRIMARY KEY, url TEXT NOT NULL, models TEXT NOT NULL, kv_capacity_tokens INTEGER NOT NULL,
      static INTEGER NOT NULL, last_seen INTEGER NOT NULL, boot_id TEXT, engine TEXT, max_running INTEGER)`);
    const columns = this.sql.exec<{ name: string }>(`PRAGMA table_info(nodes)`).toArray();
    if (!columns.some((c) => c.name === "engine")) this.sql.exec(`ALTER TABLE nodes ADD COLUMN engine TEXT`);
    if (!columns.some((c) => c.name === "max_running")) this.sql.exec(`ALTER TABLE nodes ADD COLUMN max_running INTEGER`);
    this.sql.exec(`CREATE TABLE IF NOT EXISTS node_secrets (id TEXT PRIMARY KEY, sha256 TEXT NOT NULL)`);
  }

  /** Every stored node (and, into memory, every secret's hash): what a router is rebuilt from. */
  load(): NodeSpec[] {
    const specs: NodeSpec[] = [];
    for (const r of this.sql.exec<NodeRow>(`SELECT * FROM nodes`)) {
      specs.push(specOf(r));
      this.persistedSeen.set(r.id, r.last_seen);
    }
    this.secrets.clear();
    for (const r of this.sql.exec<{ id: string; sha256: string }>(`SELECT id, sha256 FROM node_secrets`)) this.secrets.set(r.id, r.sha256);
    return specs;
  }

  persist(spec: NodeSpec): void {
    this.sql.exec(
      `INSERT INTO nodes (id, url, models, kv_capacity_tokens, static, last_seen, boot_id, engine, max_running) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(id) DO UPDATE SET url = excluded.url, models = excluded.models,
         kv_capacity_tokens = excluded.kv_capacity_tokens, static = excluded.static,
         last_seen = excluded.last_seen, boot_id = excluded.boot_id, engine = excluded.engine, max_running = excluded.max_running`,
      spec.id,
      spec.url,
      JSON.stringify(spec.models),
      spec.kvCapacityTokens,
      spec.static ? 1 : 0,
      spec.lastSeen,
      spec.bootId ?? null,
      spec.engine ?? null,
      spec.maxRunning ?? null,
    );
    this.persistedSeen.set(spec.id, spec.lastSeen);
  }

  /** The `last_seen` its row was last written with (0: never written by this instance or the table). */
  persistedAt(id: string): number {
    return this.persistedSeen.get(id) ?? 0;
  }

  /** Stores the hash of a newly registered node's secret. */
  setSecret(id: string, sha256: string): void {
    this.sql.exec(`INSERT OR REPLACE INTO node_secrets (id, sha256) VALUES (?, ?)`, id, sha256);
    this.secrets.set(id, sha256);
  }

  secretOf(id: string): string | undefined {
    return this.secrets.get(id);
  }

  /** Drops a node's durable rows and its secret (removal, expiry, or gone from the configuration). */
  forget(id: string): void {
    this.sql.exec(`DELETE FROM nodes WHERE id = ?`, id);
    this.sql.exec(`DELETE FROM node_secrets WHERE id = ?`, id);
    this.persistedSeen.delete(id);
    this.secrets.delete(id);
  }
}

function specOf(r: NodeRow): NodeSpec {
  return {
    id: r.id,
    url: r.url,
    models: JSON.parse(r.models) as string[],
    kvCapacityTokens: r.kv_capacity_tokens,
    static: r.static === 1,
    lastSeen: r.last_seen,
    bootId: r.boot_id ?? undefined,
    engine: r.engine === null ? undefined : nodeEngineSchema.catch("other").parse(r.engine),
    maxRunning: r.max_running === null ? undefined : (nodeMaxRunningSchema.safeParse(r.max_running).data ?? undefined),
  };
}
