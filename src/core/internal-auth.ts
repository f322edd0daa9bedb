/**
 * The internal boundary's message authentication (docs/SECURITY.md, "The internal boundary"): an
 * HMAC-SHA256 over what a message does (who sent it, its method, path and query, a timestamp, a
 * nonce and its body's SHA-256), with a secret the edge and every region worker hold
 * (`INTERNAL_SECRET`). Pure: WebCrypto, the time and the nonce are passed in; the shells that read
 * the secrets, sign requests and answer refusals are src/http/internal-auth.ts and
 * src/region/authenticate.ts.
 *
 * What the signature proves: the message was made by a holder of the secret (the edge, or a region
 * worker for a spend batch), for this method, path, query and body, within {@link MAX_CLOCK_SKEW_MS}
 * of the receiver's clock, and (with a {@link ReplayGuard}) not seen before by this receiver. What it
 * does not: that the holder is honest (a region worker can forge an edge message: HMAC keys are
 * symmetric), or that a message was not seen before by another isolate of the same receiver.
 */
import { bytesToHex } from "./hex.ts";

/** The header carrying the signature: `v1;r=edge;t=<ms epoch>;n=<nonce>;s=<64 hex>`. */
export const INTERNAL_AUTH_HEADER = "x-warmpath-internal-auth";

/** The variable (a secret, `wrangler secret put`) holding the secret that signs and verifies. */
export const INTERNAL_SECRET_VAR = "INTERNAL_SECRET";
/** During a rotation, the secret before: still accepted, never used to sign. */
export const INTERNAL_SECRET_PREVIOUS_VAR = "INTERNAL_SECRET_PREVIOUS";

/** Marks a region worker's refusal of a message at the internal boundary (its value: the {@link AuthFailure}), for the edge. */
export const AUTH_REFUSAL_HEADER = "x-warmpath-auth-refused";

/** Who made a message: the edge (every region-worker message but one), or a region worker (spend batches). */
export type InternalRole = "edge" | "region";

/**
 * How far a message's timestamp may be from the receiver's clock, either way. Cloudflare's hosts
 * are NTP-synchronised to milliseconds, and a message crosses the edge -> region hop in at most a
 * few hundred ms (bench:wan's 130 ms round trip); 30 s leaves room for a slow body and a local
 * machine's clock, and bounds how long a captured message stays usable.
 */
export const MAX_CLOCK_SKEW_MS = 30_000;

/**
 * Nonces a receiver remembers (per isolate). A nonce is kept while its timestamp is within the skew
 * (at most 2 x {@link MAX_CLOCK_SKEW_MS}); at 1,000 messages a second per isolate that is 60,000,
 * about 6 MB at ~100 bytes an entry. Past it the oldest is forgotten and no message as old is taken
 * again (the guard's floor), so the bound costs refusals of stale messages, never a replay.
 */
const MAX_REMEMBERED_NONCES = 65_536;

/** The shortest secret taken: 32 characters (`openssl rand -hex 32` gives 64). A shorter one is refused, as if unset. */
export const MIN_SECRET_LENGTH = 32;

/** The longest header value parsed (a signed one is ~130 characters). */
const MAX_HEADER_LENGTH = 256;
const VERSION = "v1";
/** Domain separation: this string is never the start of any other message warmpath signs. */
const CONTEXT = "warmpath-internal-v1";

export interface SignedParts {
  role: InternalRole;
  method: string;
  /** The path and query, exactly as sent (`/region/v1/us/usage?tenant=acme&from=...`). */
  pathAndQuery: string;
  timestamp: number;
  nonce: string;
  /** The body's bytes (empty for none). */
  body: Uint8Array;
}

/** Why a message was refused: the first four are 401 (no valid signature), the rest 403. */
export type AuthFailure = "missing" | "malformed" | "bad-signature" | "no-secret" | "expired" | "replayed" | "wrong-role";

export type VerifyResult = { ok: true; secretIndex: number } | { ok: false; failure: AuthFailure };

/**
 * The part of WebCrypto's SubtleCrypto used here (`crypto.subtle` in Workers and in Node fits), so
 * this module needs no DOM or Workers types.
 */
export interface Subtle {
  importKey(
    format: "raw",
    key: Uint8Array,
    algorithm: { name: "HMAC"; hash: "SHA-256" },
    extractable: false,
    usages: Array<"sign" | "verify">,
  ): Promise<unknown>;
  sign(algorithm: "HMAC", key: never, data: Uint8Array<ArrayBuffer>): Promise<ArrayBuffer>;
  verify(algorithm: "HMAC", key: never, signature: Uint8Array<ArrayBuffer>, data: Uint8Array<ArrayBuffer>): Promise<boolean>;
  digest(algorithm: "SHA-256", data: Uint8Array<ArrayBuffer>): Promise<ArrayBuffer>;
}

const encoder = new TextEncoder();

function fromHex(text: string): Uint8Array | undefined {
  if (!/^[0-9a-f]{64}$/.test(text)) return undefined;
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Imported keys by secret: importing costs ~20 us, a message would pay it twice otherwise. At most a few secrets exist. */
const keyCache = new Map<string, unknown>();
const MAX_CACHED_KEYS = 8;

async function hmacKey(subtle: Subtle, secret: string): Promise<unknown> {
  let key = keyCache.get(secret);
  if (!key) {
    key = await subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
    if (keyCache.size >= MAX_CACHED_KEYS) keyCache.clear();
    keyCache.set(secret, key);
  }
  return key;
}

/** The bytes signed: every field on its own line, the body as its SHA-256 (so a large body is hashed once, streamed or not). */
async function signedBytes(subtle: Subtle, p: SignedParts): Promise<Uint8Array> {
  const bodyHash = bytesToHex(await subtle.digest("SHA-256", p.body as Uint8Array<ArrayBuffer>));
  return encoder.encode([CONTEXT, p.role, p.method.toUpperCase(), p.pathAndQuery, String(p.timestamp), p.nonce, bodyHash].join("\n"));
}

/** The header value signing `parts` with `secret`. */
export async function signInternal(subtle: Subtle, secret: string, parts: SignedParts): Promise<string> {
  const mac = await subtle.sign(
    "HMAC",
    (await hmacKey(subtle, secret)) as never,
    (await signedBytes(subtle, parts)) as Uint8Array<ArrayBuffer>,
  );
  return `${VERSION};r=${parts.role};t=${parts.timestamp};n=${parts.nonce};s=${bytesToHex(mac)}`;
}

interface ParsedAuth {
  role: InternalRole;
  timestamp: number;
  nonce: string;
  signature: Uint8Array;
}

/** The header's fields, or undefined for anything not exactly a v1 signature. */
export function parseInternalAuth(value: string | null | undefined): ParsedAuth | undefined {
  if (!value || value.length > MAX_HEADER_LENGTH) return undefined;
  const m = /^v1;r=(edge|region);t=(\d{1,16});n=([A-Za-z0-9_-]{16,64});s=([0-9a-f]{64})$/.exec(value);
  if (!m) return undefined;
  const signature = fromHex(m[4]!);
  const timestamp = Number(m[2]);
  if (!signature || !Number.isSafeInteger(timestamp)) return undefined;
  return { role: m[1] as InternalRole, timestamp, nonce: m[3]!, signature };
}

/**
 * Remembers the nonces of accepted messages while their timestamps are within the skew, so a
 * message is taken once. Bounded ({@link MAX_REMEMBERED_NONCES}): when full, the oldest entry is
 * forgotten and its timestamp becomes the floor (a message that old or older is refused as
 * replayed, since this guard can no longer tell).
 */
export class ReplayGuard {
  private readonly seen = new Map<string, number>();
  private floor = -Infinity;
  private readonly capacity: number;
  private readonly windowMs: number;

  constructor(capacity = MAX_REMEMBERED_NONCES, windowMs = MAX_CLOCK_SKEW_MS) {
    this.capacity = capacity;
    this.windowMs = windowMs;
  }

  /** True (and remembered) the first time a nonce is offered; false for a replay. */
  admit(nonce: string, timestamp: number, now: number): boolean {
    this.prune(now);
    if (timestamp <= this.floor || this.seen.has(nonce)) return false;
    if (this.seen.size >= this.capacity) {
      // Insertion order is near timestamp order (messages arrive within the skew); the floor makes it exact enough to be safe.
      const [oldest, at] = this.seen.entries().next().value as [string, number];
      this.seen.delete(oldest);
      this.floor = Math.max(this.floor, at);
      if (timestamp <= this.floor) return false;
    }
    this.seen.set(nonce, timestamp);
    return true;
  }

  get size(): number {
    return this.seen.size;
  }

  private prune(now: number): void {
    // A nonce whose timestamp has left the skew window can never be accepted again: forget it.
    for (const [nonce, at] of this.seen) {
      if (now - at <= this.windowMs) break;
      this.seen.delete(nonce);
    }
  }
}

/**
 * Verifies a message against the secrets (the current first, then the previous during a rotation).
 * Order matters: the signature is checked before the replay guard, so forged messages cannot fill it.
 */
export async function verifyInternal(
  subtle: Subtle,
  secrets: readonly string[],
  header: string | null | undefined,
  message: { method: string; pathAndQuery: string; body: Uint8Array; expectedRole: InternalRole },
  now: number,
  guard: ReplayGuard,
): Promise<VerifyResult> {
  if (header === null || header === undefined || header === "") return { ok: false, failure: "missing" };
  const auth = parseInternalAuth(header);
  if (!auth) return { ok: false, failure: "malformed" };
  if (secrets.length === 0) return { ok: false, failure: "no-secret" };
  const data = await signedBytes(subtle, {
    role: auth.role,
    method: message.method,
    pathAndQuery: message.pathAndQuery,
    timestamp: auth.timestamp,
    nonce: auth.nonce,
    body: message.body,
  });
  let secretIndex = -1;
  for (let i = 0; i < secrets.length && secretIndex < 0; i++) {
    // subtle.verify compares in constant time.
    const key = await hmacKey(subtle, secrets[i]!);
    if (await subtle.verify("HMAC", key as never, auth.signature as Uint8Array<ArrayBuffer>, data as Uint8Array<ArrayBuffer>))
      secretIndex = i;
  }
  if (secretIndex < 0) return { ok: false, failure: "bad-signature" };
  if (auth.role !== message.expectedRole) return { ok: false, failure: "wrong-role" };
  if (Math.abs(now - auth.timestamp) > MAX_CLOCK_SKEW_MS) return { ok: false, failure: "expired" };
  if (!guard.admit(auth.nonce, auth.timestamp, now)) return { ok: false, failure: "replayed" };
  return { ok: true, secretIndex };
}

/** 401 when no valid signature came with the message; 403 when one did and the message is still not acceptable. */
export function failureStatus(failure: AuthFailure): 401 | 403 {
  return failure === "expired" || failure === "replayed" || failure === "wrong-role" ? 403 : 401;
}
