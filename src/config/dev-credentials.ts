/**
 * Development credentials: documented, public, and so never to be trusted outside a developer's
 * machine. The worker accepts them only when the configuration says `mode = "development"` AND the
 * request came over loopback to a loopback host (`wrangler dev`; what that can and cannot prove
 * inside the worker: `isLocalDevelopment` in src/edge/middleware/bearer-guard/credentials.ts), so a
 * configuration copied into production, or a development build deployed by mistake, still refuses them.
 */

/** API key of the development tenant `dev`. */
export const DEV_API_KEY = "wp-dev-key-local-only";
/** API key of a second development tenant, `dev-2`, to see cache namespaces at work. */
export const DEV_API_KEY_2 = "wp-dev-key-2-local-only";
/** API key of a third development tenant, `dev-3` (the fault suite's flood has two light tenants). */
export const DEV_API_KEY_3 = "wp-dev-key-3-local-only";
/** Node token of every development region. */
export const DEV_NODE_TOKEN = "wp-dev-node-token-local-only";
/** Admin token for the state API and dashboard in development. */
export const DEV_ADMIN_TOKEN = "wp-dev-admin-token-local-only";

/**
 * The internal boundary's secret (docs/SECURITY.md) for a worker in `mode = "development"` with no
 * `INTERNAL_SECRET` set: `wrangler dev` of the single-process composition, whose region service is
 * an entrypoint no socket reaches. Public, so never the only thing between a port and the region
 * worker: `npm start` (scripts/system.ts) gives every run a random secret instead, and a worker
 * outside development mode never falls back to it (src/http/internal-auth.ts).
 */
export const DEV_INTERNAL_SECRET = "wp-dev-internal-secret-local-only-0123456789";

const DEV_SECRETS = new Set([DEV_API_KEY, DEV_API_KEY_2, DEV_API_KEY_3, DEV_NODE_TOKEN, DEV_ADMIN_TOKEN]);

export function isDevCredential(secret: string): boolean {
  return DEV_SECRETS.has(secret);
}

/** True for a URL hostname on the loopback interface: localhost, 127.0.0.0/8, [::1] (see {@link isLoopbackAddress}). */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === "localhost" || isLoopbackAddress(hostname);
}

/**
 * True for an IP address on the loopback interface: 127.0.0.0/8, ::1, or an IPv4-mapped
 * ::ffff:127.x.y.z; as a header or URL writes it (`[::1]`, `[::1]:8787`, `127.0.0.1:8787`,
 * `"[::1]"` in `Forwarded`). Anything else, including names and `unknown`, is not.
 */
export function isLoopbackAddress(written: string): boolean {
  let address = written.trim();
  if (address.length >= 2 && address.startsWith('"') && address.endsWith('"')) address = address.slice(1, -1);
  if (address.startsWith("[")) {
    const close = address.indexOf("]");
    if (close === -1 || !/^(:\d{1,5})?$/.test(address.slice(close + 1))) return false;
    address = address.slice(1, close);
  } else if (/^[\d.]+:\d{1,5}$/.test(address)) address = address.slice(0, address.indexOf(":"));
  if (isLoopbackIpv4(address)) return true;
  const groups = ipv6Groups(address.toLowerCase());
  if (!groups) return false;
  if (groups.slice(0, 7).every((g) => g === 0) && groups[7] === 1) return true;
  // IPv4-mapped: ::ffff:127.0.0.1 (or ::ffff:7f00:1).
  return groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff && groups[6]! >> 8 === 127;
}

function isLoopbackIpv4(address: string): boolean {
  const m = /^127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(address);
  return m !== null && m.slice(1).every((o) => Number(o) <= 255);
}

/** The eight 16-bit groups of an IPv6 address (a trailing dotted IPv4 allowed), or undefined. */
function ipv6Groups(address: string): number[] | undefined {
  const halves = address.split("::");
  if (halves.length > 2) return undefined;
  const parse = (part: string): number[] | undefined => {
    if (part === "") return [];
    const out: number[] = [];
    const pieces = part.split(":");
    for (let i = 0; i < pieces.length; i++) {
      const piece = pieces[i]!;
      if (i === pieces.length - 1 && piece.includes(".")) {
        const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(piece);
        if (!v4 || v4.slice(1).some((o) => Number(o) > 255)) return undefined;
        const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
        out.push((a << 8) | b, (c << 8) | d);
      } else if (/^[0-9a-f]{1,4}$/.test(piece)) out.push(parseInt(piece, 16));
      else return undefined;
    }
    return out;
  };
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  if (!head || !tail) return undefined;
  if (halves.length === 1) return head.length === 8 ? head : undefined;
  const missing = 8 - head.length - tail.length;
  return missing >= 1 ? [...head, ...new Array<number>(missing).fill(0), ...tail] : undefined;
}
