/**
 * The region object's node table in SQLite (durable-objects/node-store.ts), on a real object's
 * storage: what is written comes back field for field, a stored value this version no longer
 * accepts is read as not said, secrets' hashes survive a reload, and forgetting a node removes
 * both its rows.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { NodeStore } from "../../durable-objects/node-store.ts";
import type { NodeSpec } from "../../src/core/region/index.ts";

const spec = (id: string, over: Partial<NodeSpec> = {}): NodeSpec => ({
  id,
  url: `http://${id}.test`,
  models: ["m-a", "m-b"],
  kvCapacityTokens: 123_456,
  static: false,
  lastSeen: 1_000,
  ...over,
});

/** A fresh store on the storage of an object of its own (`name`), its tables created. */
async function withStore<T>(name: string, body: (store: NodeStore, sql: SqlStorage) => T): Promise<T> {
  return runInDurableObject(env.REGION.getByName(name), (_instance, state) => {
    const store = new NodeStore(state.storage.sql);
    store.migrate();
    return body(store, state.storage.sql);
  });
}

describe("NodeStore", () => {
  it("gives back what it stored, field for field, and the last write's last_seen", async () => {
    const out = await withStore("node-store-roundtrip", (store) => {
      store.persist(spec("a", { static: true, bootId: "boot-1", engine: "vllm", maxRunning: 64 }));
      store.persist(spec("b"));
      store.persist(spec("a", { static: true, bootId: "boot-2", engine: "sglang", maxRunning: 32, lastSeen: 2_000 }));
      return { specs: store.load(), at: store.persistedAt("a"), never: store.persistedAt("zzz") };
    });
    const byId = new Map(out.specs.map((s) => [s.id, s]));
    expect(byId.get("a")).toEqual(spec("a", { static: true, bootId: "boot-2", engine: "sglang", maxRunning: 32, lastSeen: 2_000 }));
    expect(byId.get("b")).toEqual(spec("b"));
    expect(out.at).toBe(2_000);
    expect(out.never).toBe(0);
  });

  it("reads a stored engine it does not know as `other`, and places out of bounds as not said", async () => {
    const read = await withStore("node-store-unknown", (store, sql) => {
      store.persist(spec("a"));
      sql.exec(`UPDATE nodes SET engine = 'tgi', max_running = 1000000 WHERE id = 'a'`);
      return store.load()[0]!;
    });
    expect(read.engine).toBe("other");
    expect(read.maxRunning).toBeUndefined();
  });

  it("keeps secrets' hashes across a reload; forgetting a node drops its row and its secret", async () => {
    const out = await withStore("node-store-secrets", (store, sql) => {
      store.persist(spec("a"));
      store.persist(spec("b"));
      store.setSecret("a", "aa".repeat(32));
      store.setSecret("b", "bb".repeat(32));
      const reloaded = new NodeStore(sql);
      reloaded.migrate(); // idempotent on tables that exist
      const ids = reloaded
        .load()
        .map((s) => s.id)
        .sort();
      const seenAt = reloaded.persistedAt("a");
      const before = reloaded.secretOf("a");
      reloaded.forget("a");
      const rows = sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM node_secrets WHERE id = 'a'`).one().n;
      const after = reloaded.secretOf("a");
      const other = reloaded.secretOf("b");
      const left = reloaded.load().map((s) => s.id);
      // A reload takes the secrets from the table as it is now: one deleted there is gone.
      sql.exec(`DELETE FROM node_secrets WHERE id = 'b'`);
      reloaded.load();
      return { ids, seenAt, before, after, other, left, rows, otherAfterDelete: reloaded.secretOf("b") };
    });
    expect(out.ids).toEqual(["a", "b"]);
    expect(out.before).toBe("aa".repeat(32));
    expect(out.after).toBeUndefined();
    expect(out.seenAt).toBe(1_000);
    expect(out.other).toBe("bb".repeat(32));
    expect(out.otherAfterDelete).toBeUndefined();
    expect(out.left).toEqual(["b"]);
    expect(out.rows).toBe(0);
  });
});
