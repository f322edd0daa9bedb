/**
 * Bearer credentials: extraction, hashing, the one constant-time comparison, and the
 * development-credential check.
 */
import { isDevCredential, isLoopbackAddress, isLoopbackHost } from "../../../config/dev-credentials.ts";
import type { LoadedConfig } from "../../../config/load.ts";

/** The token from `Authorization: Bearer <token>`, or undefined. */
export function bearerToken(request: Request): string | undefined {
  const header = request.headers.get("authorization");
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/** Constant-time string comparison (length leaks, content does not). */
export function timingSafeEqual(a: string, b: string): boolean {
  const ea = new TextEncoder().encode(a);
  const eb = new TextEncoder().encode(b);
  if (ea.byteLength !== eb.byteLength) return false;
  return crypto.subtle.timingSafeEqual(ea, eb);
}

/**
 * Headers in which Cloudflare's edge or a proxy names the client it received the request from.
 * `Forwarded` is RFC 7239's (`for=`); the others hold an address, or a list of them.
 */
const CLIENT_ADDRESS_HEADERS = ["cf-connecting-ip", "true-client-ip", "x-real-ip", "x-forwarded-for", "forwarded"] as const;

/** Every client address the request's headers name (none when it came straight from a local client). */
function clientAddresses(headers: Headers): string[] {
  const out: string[] = [];
  for (const name of CLIENT_ADDRESS_HEADERS) {
    const value = headers.get(name);
    if (value === null) continue;
    if (name !== "forwarded") {
      out.push(...value.split(","));
      continue;
    }
    // `Forwarded: for=192.0.2.60;proto=http, for="[::1]:8787"`: every `for=`; an element without one counts as unknown.
    for (const element of value.split(",")) {
      const fors = element
        .split(";")
        .map((pair) => pair.trim())
        .filter((pair) => pair.toLowerCase().startsWith("for="));
      out.push(...(fors.length > 0 ? fors.map((pair) => pair.slice(4)) : ["unknown"]));
    }
  }
  return out;
}

/**
 * A local development server: the configuration says `mode = "development"`, AND the request's
 * URL host is a loopback host, AND every client address a header names (`CF-Connecting-IP`,
 * `X-Forwarded-For`, `Forwarded`, ...) is a loopback address, AND it is not a browser request on
 * behalf of another site (`Sec-Fetch-Site` other than `same-origin` or `none`).
 *
 * Why these, and what they prove. The worker never sees the socket; it sees the URL (whose host is
 * the request's `Host` header) and headers.
 * - Deployed on Cloudflare, this is airtight: the URL's host is the hostname the request was routed
 *   by (a route or workers.dev, never localhost), and the edge sets `CF-Connecting-IP` to the real
 *   peer, overwriting any the client sent (never loopback). Either alone refuses; so does `mode`.
 * - Under `wrangler dev` it is not, and cannot be made so inside the worker: workerd's entry worker
 *   (miniflare) sets `CF-Connecting-IP` from the socket's peer only when the request has none, and
 *   `request.cf` is a placeholder. Measured with wrangler 4.164 on `--ip 0.0.0.0`: a LAN client
 *   sending `Host: localhost` reached the worker as `http://localhost/` with `CF-Connecting-IP` set
 *   to its own address (refused here); one that also sends `CF-Connecting-IP: 127.0.0.1` is
 *   indistinguishable from a local client. So locally, the boundary is the listening socket:
 *   `wrangler dev` listens on localhost unless told otherwise, and scripts/system.ts passes
 *   `--ip 127.0.0.1`. A development-mode server started on another interface (`--ip 0.0.0.0`, a
 *   published container port) accepts the public development credentials and the token-free admin
 *   API from anyone who reaches it and forges both headers.
 * - What the checks do stop there: DNS rebinding (the `Host` is the attacker's name); a tunnel or
 *   reverse proxy in front of `wrangler dev` (cloudflared passes the edge's `CF-Connecting-IP`, ngrok
 *   and most proxies add `X-Forwarded-For`), even one that rewrites `Host` to localhost; a LAN
 *   client forging `Host` alone; and a page in the developer's browser calling the server
 *   (`Sec-Fetch-Site: cross-site`), e.g. a form posting to the token-free admin API.
 */
export function isLocalDevelopment(request: Request, config: LoadedConfig): boolean {
  if (config.raw.mode !== "development") return false;
  if (!isLoopbackHost(new URL(request.url).hostname)) return false;
  if (!clientAddresses(request.headers).every(isLoopbackAddress)) return false;
  const site = request.headers.get("sec-fetch-site");
  return site === null || site === "same-origin" || site === "none";
}

/** Whether `token` is a development credential that this server must refuse. */
export function refusesDevCredential(token: string, request: Request, config: LoadedConfig): boolean {
  return isDevCredential(token) && !isLocalDevelopment(request, config);
}
