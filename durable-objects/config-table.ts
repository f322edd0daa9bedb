/**
 * A region object's `config` table: a few named values it keeps across restarts (the init in force,
 * its shard number, the most shards its region has had), each a string under its key.
 */

/** Creates the table (the object's constructor, before anything reads it). */
export function createConfigTable(sql: SqlStorage): void {
  sql.exec(`CREATE TABLE IF NOT EXISTS config (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
}

/** The value kept under `key`, if any. */
export function readConfig(sql: SqlStorage, key: string): string | undefined {
  return sql.exec<{ value: string }>(`SELECT value FROM config WHERE key = ?`, key).toArray()[0]?.value;
}

/** Keeps `value` under `key`, replacing what was there. */
export function writeConfig(sql: SqlStorage, key: string, value: string): void {
  sql.exec(`INSERT INTO config (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value);
}
