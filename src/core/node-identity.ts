/**
 * Node identity: which credential may act as which node.
 *
 * The region's node token (shared by every node of the region) only registers NEW node ids. The
 * registration answer carries the node's own secret (32 random bytes, base64url), returned once
 * and stored nowhere but in the node's agent: the region object keeps its SHA-256 only. Every later
 * report for that id, and its deregistration, must carry that secret. So a holder of the region
 * token can add nodes (at URLs the region's `allowed_origins` admit, src/core/origins.ts) but
 * cannot report as, move or remove a node someone else registered.
 *
 * Lifecycle:
 * - a node that lost its secret (its agent restarted without a state file) registers its id again
 *   once the old entry has expired (`node_silence_ms` without a report) or an operator removed it
 *   (`DELETE` with the admin token, which also revokes the secret);
 * - static nodes (declared in the configuration) have no secret: they keep reporting with the
 *   region token, as before, but their URL is the configuration's and no report changes it;
 * - nodes registered before node secrets existed have no secret either: nothing proves who owns
 *   them, so their reports are refused until they expire, and their agents register them again.
 *
 * The decisions are pure ({@link authorizeReport}, {@link authorizeRemoval}); the region Durable
 * Object applies them to its node table, the node API (src/edge/api/nodes.ts) turns refusals into
 * answers.
 */
import { z } from "zod";
import { sha256Hex } from "./hex.ts";

/** Bytes of randomness in a node secret. */
const NODE_SECRET_BYTES = 32;
/** A node secret as sent: 32 bytes in unpadded base64url, 43 characters. */
export const NODE_SECRET_PATTERN = /^[A-Za-z0-9_-]{43}$/;

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** A fresh node secret: 32 random bytes, base64url without padding. */
export function newNodeSecret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(NODE_SECRET_BYTES));
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** SHA-256 of a secret, lowercase hex: the only form in which the router keeps it. */
export async function secretSha256(secret: string): Promise<string> {
  return sha256Hex(secret);
}

/**
 * What the worker established about a request's bearer token, sent to the region object (which
 * never sees a secret, only hashes):
 * - `region`: the region's node token; `registerSha256` is the hash of the secret the worker will
 *   hand out if this report registers the node (none on a removal: the region token registers only);
 * - `node`: not a region or admin token, so a candidate node secret, by its hash;
 * - `admin`: the admin token (removal only).
 */
export const nodeCredentialSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("region"), registerSha256: z.string().regex(SHA256_HEX).optional() }),
  z.strictObject({ kind: z.literal("node"), secretSha256: z.string().regex(SHA256_HEX) }),
  z.strictObject({ kind: z.literal("admin") }),
]);

export type NodeCredential = z.infer<typeof nodeCredentialSchema>;

/** Why a credential may not act as a node. */
export type IdentityRefusal =
  /** The id is registered (or static) and the credential is not its own. */
  | "node_identity_mismatch"
  /** A node credential for an id the region does not know (expired, removed, or never registered). */
  | "unknown_node_secret"
  /** A static node's report names another URL than the configuration's. */
  | "static_node_url"
  /** No such node (removal with the region or admin token). */
  | "unknown_node";

/** What the decisions need to know of an existing entry. */
export interface IdentityEntry {
  static: boolean;
  url: string;
  lastSeen: number;
  /** SHA-256 of its secret; undefined for static nodes and nodes registered before secrets. */
  secretSha256: string | undefined;
}

type ReportDecision =
  | { ok: true; register: boolean }
  | {
      ok: false;
      reason: IdentityRefusal;
      /** When the entry expires by silence, if nothing reports for it (a lost secret's way back). */
      retryAfterMs?: number;
    };

/** Constant-time comparison of two hex digests. */
function sameDigest(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

function sameUrl(a: string, b: string): boolean {
  try {
    return new URL(a).href === new URL(b).href;
  } catch {
    return a === b;
  }
}

function ownSecret(entry: IdentityEntry, credential: NodeCredential): boolean {
  return credential.kind === "node" && entry.secretSha256 !== undefined && sameDigest(entry.secretSha256, credential.secretSha256);
}

/**
 * May this credential report for this id (`entry`: the id's current entry, if any), at `url`?
 * `register` says the report creates the node (the caller stores `registerSha256` for it and
 * drops any expired entry of the same id first).
 */
export function authorizeReport(
  entry: IdentityEntry | undefined,
  credential: NodeCredential,
  url: string,
  now: number,
  silenceMs: number,
): ReportDecision {
  if (credential.kind === "admin") return { ok: false, reason: "node_identity_mismatch" };
  if (entry?.static) {
    if (!sameUrl(entry.url, url)) return { ok: false, reason: "static_node_url" };
    if (credential.kind === "region" || ownSecret(entry, credential)) return { ok: true, register: false };
    return { ok: false, reason: "node_identity_mismatch" };
  }
  const alive = entry !== undefined && entry.lastSeen + silenceMs > now;
  if (credential.kind === "node") {
    if (entry && ownSecret(entry, credential)) return { ok: true, register: false };
    return { ok: false, reason: alive ? "node_identity_mismatch" : "unknown_node_secret" };
  }
  // The region token: registers an id nobody holds (new, or its entry expired by silence).
  if (!alive)
    return credential.registerSha256 !== undefined ? { ok: true, register: true } : { ok: false, reason: "node_identity_mismatch" };
  return { ok: false, reason: "node_identity_mismatch", retryAfterMs: entry.lastSeen + silenceMs - now };
}

/** May this credential remove the node (`DELETE /v1/nodes/{region}/{id}`)? The admin token, or the node's own secret. */
export function authorizeRemoval(
  entry: IdentityEntry | undefined,
  credential: NodeCredential,
): { ok: true } | { ok: false; reason: IdentityRefusal } {
  if (!entry) return { ok: false, reason: credential.kind === "node" ? "unknown_node_secret" : "unknown_node" };
  if (credential.kind === "admin" || ownSecret(entry, credential)) return { ok: true };
  return { ok: false, reason: "node_identity_mismatch" };
}
