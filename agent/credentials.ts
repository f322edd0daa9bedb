/**
 * A node's credentials with the router (src/api/nodes.ts):
 *
 * - the region's node token, shared by the region's nodes: it only registers a node id the region
 *   does not hold;
 * - the node's own secret, returned once by the router in the answer to the registering report:
 *   every later report and the deregistering DELETE carry it (`Authorization: Bearer <secret>`).
 *
 * The secret lives in memory for the agent's life, and optionally in a state file (`--state-file`)
 * so that a restarted agent keeps its node's identity. Without one, a restarted agent finds its id
 * held by its previous run (403 `node_identity_mismatch`, with `Retry-After`) and registers again
 * once that entry expires (the region's `node_silence_ms`, 15 s by default).
 *
 * The secret is never logged and never passed on a command line; the state file is written with
 * mode 0600, atomically (a temporary file, created exclusively, renamed over it).
 */
import { closeSync, fchmodSync, openSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";

/** What a node secret looks like (32 random bytes, base64url): anything else in an answer is ignored. */
export const NODE_SECRET_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** Which node the state file belongs to: a file for another router, region or id is not used. */
export interface StateIdentity {
  routerUrl: string;
  region: string;
  nodeId: string;
}

interface StateFile {
  router: string;
  region: string;
  node_id: string;
  node_secret: string;
}

export class NodeCredentials {
  readonly regionToken: string;
  private secretValue: string | undefined;
  private readonly stateFile: string | undefined;
  private readonly identity: StateIdentity | undefined;

  /**
   * @param stateFile where the secret is kept across restarts (read now if it is this node's),
   *   with `identity` naming the node; neither: memory only.
   */
  constructor(
    regionToken: string,
    options: { secret?: string | undefined; stateFile?: string | undefined; identity?: StateIdentity } = {},
  ) {
    this.regionToken = regionToken;
    this.stateFile = options.stateFile;
    this.identity = options.identity;
    this.secretValue = options.secret ?? this.load();
  }

  /** The node's secret, once registered (or restored from the state file). */
  get secret(): string | undefined {
    return this.secretValue;
  }

  /** The bearer for the next request: the node's secret once it has one, else the region token (registration). */
  bearer(): string {
    return this.secretValue ?? this.regionToken;
  }

  /** Keeps the secret from a registration answer. */
  remember(secret: string): void {
    if (secret === this.secretValue) return;
    this.secretValue = secret;
    this.save();
  }

  /** Drops the secret: the router no longer knows it (the node expired or was removed) or it was deregistered. */
  forget(): void {
    if (this.secretValue === undefined) return;
    this.secretValue = undefined;
    this.save();
  }

  private load(): string | undefined {
    if (!this.stateFile || !this.identity) return undefined;
    let text: string;
    try {
      text = readFileSync(this.stateFile, "utf8");
    } catch {
      return undefined; // no state yet
    }
    try {
      const s = JSON.parse(text) as Partial<StateFile>;
      const id = this.identity;
      if (s.router !== id.routerUrl || s.region !== id.region || s.node_id !== id.nodeId) return undefined;
      return typeof s.node_secret === "string" && NODE_SECRET_PATTERN.test(s.node_secret) ? s.node_secret : undefined;
    } catch {
      return undefined; // unreadable: start without, the router answers what to do
    }
  }

  private save(): void {
    if (!this.stateFile || !this.identity) return;
    if (this.secretValue === undefined) {
      try {
        unlinkSync(this.stateFile);
      } catch {
        // already gone
      }
      return;
    }
    const state: StateFile = {
      router: this.identity.routerUrl,
      region: this.identity.region,
      node_id: this.identity.nodeId,
      node_secret: this.secretValue,
    };
    const tmp = `${this.stateFile}.${process.pid}.tmp`;
    // The name is predictable: whatever is there (a leftover, or a symlink planted to make the
    // secret land elsewhere) is removed, and the file is created anew, exclusively ("wx": O_EXCL
    // never follows a symlink). Should something appear in between, the write fails rather than
    // follow it.
    try {
      unlinkSync(tmp);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    const fd = openSync(tmp, "wx", 0o600);
    try {
      fchmodSync(fd, 0o600); // whatever the umask made of it
      writeFileSync(fd, JSON.stringify(state) + "\n");
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.stateFile);
  }
}
