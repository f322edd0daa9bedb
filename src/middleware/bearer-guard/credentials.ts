/**
 * Bearer credentials: extraction, hashing, the one constant-time comparison, and the
 * development-credential check.
 */
import { isDevCredential, isLoopbackHost } from "../../config/dev-credentials.ts";
import type { LoadedConfig } from "../../config/load.ts";

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

/** A local development server: configuration in development mode, and a loopback host. */
export function isLocalDevelopment(request: Request, config: LoadedConfig): boolean {
  return config.raw.mode === "development" && isLoopbackHost(new URL(request.url).hostname);
}

/** Whether `token` is a development credential that this server must refuse. */
export function refusesDevCredential(token: string, request: Request, config: LoadedConfig): boolean {
  return isDevCredential(token) && !isLocalDevelopment(request, config);
}
