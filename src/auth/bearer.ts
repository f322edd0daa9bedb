/**
 * Bearer credentials: extraction, hashing and the development-credential guard.
 */
import { isDevCredential, isLoopbackHost } from "../config/dev-credentials.ts";
import { ApiError } from "../http/errors.ts";
import type { LoadedConfig } from "../config/load.ts";

/** The token from `Authorization: Bearer <token>`, or undefined. */
export function bearerToken(request: Request): string | undefined {
  const header = request.headers.get("authorization");
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** SHA-256 of a string, lowercase hex. */
export async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Constant-time string comparison (length leaks, content does not). */
export function timingSafeEqual(a: string, b: string): boolean {
  const ea = new TextEncoder().encode(a);
  const eb = new TextEncoder().encode(b);
  if (ea.byteLength !== eb.byteLength) return false;
  return crypto.subtle.timingSafeEqual(ea, eb);
}

/**
 * Refuses a development credential unless this is a local development server: configuration in
 * development mode and a loopback host. Called before any credential is compared.
 */
export function guardDevCredential(token: string, request: Request, config: LoadedConfig): void {
  if (!isDevCredential(token)) return;
  const local = config.raw.mode === "development" && isLoopbackHost(new URL(request.url).hostname);
  if (!local) {
    throw new ApiError(
      401,
      'Development credentials are accepted only by a local development server (mode = "development" on localhost)',
      "authentication_error",
      "development_credential_refused",
    );
  }
}
