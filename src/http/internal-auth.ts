/**
 * The internal boundary's I/O shell (the pure part: src/core/internal-auth.ts): which secrets a
 * worker holds, signing a message to a region worker (the edge's, src/edge/region-client.ts; a
 * region object's spend batch, durable-objects/addressing.ts) and verifying one
 * (src/region/authenticate.ts).
 *
 * Secrets (docs/DEPLOY.md, "The internal secret"): `INTERNAL_SECRET` signs and verifies;
 * `INTERNAL_SECRET_PREVIOUS`, while set, is also accepted (a rotation). With neither set, a worker
 * whose configuration says `mode = "development"` uses {@link DEV_INTERNAL_SECRET} (public, as the
 * other development credentials: `npm start` and the test suite set real ones); any other worker
 * signs nothing and accepts nothing (fail closed, logged).
 */
import { DEV_INTERNAL_SECRET } from "../config/dev-credentials.ts";
import {
  INTERNAL_AUTH_HEADER,
  INTERNAL_SECRET_PREVIOUS_VAR,
  INTERNAL_SECRET_VAR,
  MIN_SECRET_LENGTH,
  ReplayGuard,
  signInternal,
  verifyInternal,
  type InternalRole,
  type VerifyResult,
} from "../core/internal-auth.ts";

export { INTERNAL_SECRET_PREVIOUS_VAR, INTERNAL_SECRET_VAR };

interface InternalSecrets {
  /** Signs outgoing messages; undefined: this worker cannot sign (a refusal to send, logged). */
  signing: string | undefined;
  /** Accepted on incoming messages, current first. */
  accepted: string[];
  /** What is wrong with the worker's secrets, for a log line (never a secret). */
  problem: string | undefined;
}

function variable(env: unknown, name: string): string | undefined {
  const v = (env as Record<string, unknown>)[name];
  return typeof v === "string" && v !== "" ? v : undefined;
}

/** Whether the configuration says `mode = "development"` (read without validating the rest: that is loadConfig's job). */
function developmentMode(env: unknown): boolean {
  let doc = (env as Record<string, unknown>).WARMPATH_CONFIG;
  if (typeof doc === "string") {
    try {
      doc = JSON.parse(doc);
    } catch {
      return false;
    }
  }
  return typeof doc === "object" && doc !== null && (doc as { mode?: unknown }).mode === "development";
}

/** The worker's internal secrets (see the module's comment). */
function internalSecrets(env: unknown): InternalSecrets {
  const current = variable(env, INTERNAL_SECRET_VAR);
  const previous = variable(env, INTERNAL_SECRET_PREVIOUS_VAR);
  const problems: string[] = [];
  const usable = (name: string, s: string | undefined) => {
    if (s === undefined) return undefined;
    if (s.length >= MIN_SECRET_LENGTH) return s;
    problems.push(`${name} is shorter than ${MIN_SECRET_LENGTH} characters and is not used`);
    return undefined;
  };
  let signing = usable(INTERNAL_SECRET_VAR, current);
  const old = usable(INTERNAL_SECRET_PREVIOUS_VAR, previous);
  if (current === undefined && previous === undefined && developmentMode(env)) signing = DEV_INTERNAL_SECRET;
  if (signing === undefined && current === undefined) problems.push(`${INTERNAL_SECRET_VAR} is not set`);
  return {
    signing,
    accepted: [signing, old].filter((s): s is string => s !== undefined),
    problem: problems.length ? problems.join("; ") : undefined,
  };
}

/** A nonce: 16 random bytes, base64url (22 characters). */
function nonce(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}

/** Thrown when a worker has no secret to sign with: the message is not sent. */
export class InternalSecretMissing extends Error {}

/** The header signing one message (the URL's path and query, as the receiver will see them). */
export async function internalAuthHeader(
  env: unknown,
  role: InternalRole,
  method: string,
  url: string,
  body: Uint8Array | string | undefined,
) {
  const secrets = internalSecrets(env);
  if (secrets.signing === undefined) throw new InternalSecretMissing(`cannot sign a message to a region worker: ${secrets.problem}`);
  const u = new URL(url);
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : (body ?? new Uint8Array());
  const value = await signInternal(crypto.subtle, secrets.signing, {
    role,
    method,
    pathAndQuery: u.pathname + u.search,
    timestamp: Date.now(),
    nonce: nonce(),
    body: bytes,
  });
  return { [INTERNAL_AUTH_HEADER]: value };
}

/**
 * A service binding whose every request is signed as `role` (a region object's binding to the
 * budget ledger's home: spend batches are region-made). The body is read to be signed: these are
 * small JSON messages.
 */
export function signingFetcher(env: unknown, role: InternalRole, binding: Fetcher): Fetcher {
  return {
    fetch: async (input: RequestInfo | URL, init?: RequestInit) => {
      const request = new Request(input as RequestInfo, init);
      const body = request.body === null ? undefined : new Uint8Array(await request.arrayBuffer());
      const headers = new Headers(request.headers);
      for (const [k, v] of Object.entries(await internalAuthHeader(env, role, request.method, request.url, body))) headers.set(k, v);
      return binding.fetch(request.url, { method: request.method, headers, body: body ?? null });
    },
  } as Fetcher;
}

/** This isolate's nonces (a region worker's: every message it accepted within the skew). */
const guard = new ReplayGuard();

/** Verifies a received message, whose body the caller has read (`body`). */
export function verifyInternalRequest(
  env: unknown,
  request: Request,
  body: Uint8Array,
  expectedRole: InternalRole,
  now: number,
): Promise<VerifyResult & { problem?: string | undefined }> {
  const secrets = internalSecrets(env);
  const u = new URL(request.url);
  return verifyInternal(
    crypto.subtle,
    secrets.accepted,
    request.headers.get(INTERNAL_AUTH_HEADER),
    { method: request.method, pathAndQuery: u.pathname + u.search, body, expectedRole },
    now,
    guard,
  ).then((r) => (r.ok ? r : { ...r, problem: secrets.problem }));
}
