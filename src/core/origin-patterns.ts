/**
 * A region's allow-list of node origins, for src/core/origins.ts: its `allowed_origins` entries
 * parsed ({@link parseOriginPattern}, which the configuration also validates them with), the exact
 * origins of its static nodes, and whether a URL's scheme, host and port match one. Pure.
 */
import { BITS, inRange, hostOf, nameError, parseIpv4, parseIpv6, type Host } from "./origin-hosts.ts";

/** Longest `allowed_origins` entry. */
export const MAX_ORIGIN_PATTERN_LENGTH = 300;

export type Scheme = "http" | "https";

type HostPattern =
  | { kind: "name"; name: string }
  /** `*.example.com`: any name ending in `.example.com` (not `example.com` itself). */
  | { kind: "suffix"; suffix: string }
  | { kind: "cidr"; family: 4 | 6; network: bigint; prefix: number };

/** One `allowed_origins` entry, parsed. */
interface OriginPattern {
  /** As written, for messages. */
  source: string;
  /** Only this scheme, when the entry names one (`https://...`). */
  scheme: Scheme | undefined;
  /** Only this port (the URL's effective port: 80/443 when it names none), when the entry names one. */
  port: number | undefined;
  host: HostPattern;
}

/** A region's compiled allow-list. */
export interface OriginPolicy {
  patterns: OriginPattern[];
  /** Development mode: loopback hosts are allowed (and not refused as loopback). */
  allowLoopback: boolean;
}

// ---------------------------------------------------------------------------------------------
// allowed_origins entries

/**
 * Parses one `allowed_origins` entry: `[http(s)://]HOST[:PORT]`, where HOST is a name
 * (`gpu-1.example.com`), a suffix wildcard (`*.gpus.example.com`), an IPv4 address or CIDR range
 * (`10.0.0.0/8`), or an IPv6 address or range (`fd00::/8`, in brackets to add a port:
 * `[fd00::/8]:8000`). Returns the pattern or an error message.
 */
export function parseOriginPattern(text: string): OriginPattern | { error: string } {
  const source = text;
  if (text.length > MAX_ORIGIN_PATTERN_LENGTH) return { error: `longer than ${MAX_ORIGIN_PATTERN_LENGTH} characters` };
  let rest = text.trim().toLowerCase();
  let scheme: Scheme | undefined;
  const schemeMatch = /^([a-z][a-z0-9+.-]*):\/\//.exec(rest);
  if (schemeMatch) {
    if (schemeMatch[1] !== "http" && schemeMatch[1] !== "https") return { error: "the scheme must be http or https" };
    scheme = schemeMatch[1];
    rest = rest.slice(schemeMatch[0].length);
  }
  if (/[?#@\s]/.test(rest)) return { error: "an origin is [http(s)://]host[:port]: no user, path, query or fragment" };

  let host: string;
  let portText: string | undefined;
  let bracketed = false;
  if (rest.startsWith("[")) {
    const close = rest.indexOf("]");
    if (close < 0) return { error: "an unclosed [ in an IPv6 address" };
    host = rest.slice(1, close);
    bracketed = true;
    const after = rest.slice(close + 1);
    if (after !== "") {
      if (!after.startsWith(":")) return { error: "after ] only :port may follow" };
      portText = after.slice(1);
    }
  } else if ((rest.match(/:/g) ?? []).length >= 2) {
    host = rest; // bare IPv6 (no port)
  } else {
    const colon = rest.indexOf(":");
    host = colon < 0 ? rest : rest.slice(0, colon);
    portText = colon < 0 ? undefined : rest.slice(colon + 1);
  }

  let port: number | undefined;
  if (portText !== undefined) {
    if (!/^\d{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) return { error: "the port must be 1-65535" };
    port = Number(portText);
  }

  const slash = host.indexOf("/");
  const addr = slash < 0 ? host : host.slice(0, slash);
  const v4 = bracketed ? undefined : parseIpv4(addr);
  const v6 = addr.includes(":") ? parseIpv6(addr) : undefined;
  if (v4 !== undefined || v6 !== undefined) {
    const family: 4 | 6 = v4 !== undefined ? 4 : 6;
    const network = (v4 ?? v6)!;
    let prefix: number = BITS[family];
    if (slash >= 0) {
      const bits = host.slice(slash + 1);
      if (!/^\d{1,3}$/.test(bits) || Number(bits) > BITS[family]) return { error: `the prefix length must be 0-${BITS[family]}` };
      prefix = Number(bits);
      const hostBits = BigInt(BITS[family] - prefix);
      if ((network >> hostBits) << hostBits !== network)
        return { error: "the range has host bits set (e.g. write 10.0.0.0/8, not 10.0.0.5/8)" };
    }
    return { source, scheme, port, host: { kind: "cidr", family, network, prefix } };
  }
  if (bracketed || addr.includes(":")) return { error: "not an IPv6 address" };
  if (slash >= 0) return { error: "a /prefix needs an IP address (10.0.0.0/8, fd00::/8)" };
  if (host === "*" || host === "*.") return { error: "a bare * would allow any host: name the hosts, a *.suffix or CIDR ranges" };
  if (host.startsWith("*.")) {
    const suffix = host.slice(2);
    if (suffix.includes("*")) return { error: "only a leading *. wildcard is allowed" };
    const err = nameError(suffix);
    if (err) return { error: err };
    if (!suffix.includes(".")) return { error: "a wildcard needs at least two labels after *. (e.g. *.gpus.example.com)" };
    return { source, scheme, port, host: { kind: "suffix", suffix: "." + suffix } };
  }
  if (host.includes("*")) return { error: "only a leading *. wildcard is allowed" };
  if (/^[\d.]+$/.test(host)) return { error: "not an IPv4 address (write four decimal numbers, a.b.c.d)" };
  const name = host.endsWith(".") ? host.slice(0, -1) : host;
  const err = nameError(name);
  if (err) return { error: err };
  return { source, scheme, port, host: { kind: "name", name } };
}

/** The exact origin of a configured node URL (a static node): its scheme, host and effective port. */
function exactOrigin(url: string): OriginPattern | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const host = hostOf(u);
  if (!host) return undefined;
  const scheme = u.protocol === "https:" ? "https" : "http";
  const port = effectivePort(u);
  const pattern: HostPattern =
    host.kind === "name"
      ? { kind: "name", name: host.name }
      : { kind: "cidr", family: host.ip.family, network: host.ip.value, prefix: BITS[host.ip.family] };
  return { source: url, scheme, port, host: pattern };
}

/**
 * A region's allow-list: its `allowed_origins` entries (none when not given), the exact origins of
 * its static nodes (the configuration names them), and in development mode loopback.
 */
export function originPolicy(options: {
  allowedOrigins: readonly string[] | undefined;
  staticNodeUrls: readonly string[];
  development: boolean;
}): OriginPolicy {
  const patterns: OriginPattern[] = [];
  for (const entry of options.allowedOrigins ?? []) {
    const p = parseOriginPattern(entry);
    if ("error" in p) throw new Error(`allowed_origins: '${entry.slice(0, 80)}': ${p.error}`);
    patterns.push(p);
  }
  for (const url of options.staticNodeUrls) {
    const p = exactOrigin(url);
    if (p) patterns.push(p);
  }
  return { patterns, allowLoopback: options.development };
}

/** The URL's port, or its scheme's default (80, 443) when it names none: what an entry's port is matched against. */
export function effectivePort(u: URL): number {
  return u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
}

/** Whether an allow-list entry admits this scheme, host and (effective) port. */
export function matches(p: OriginPattern, scheme: Scheme, host: Host, port: number): boolean {
  if (p.scheme !== undefined && p.scheme !== scheme) return false;
  if (p.port !== undefined && p.port !== port) return false;
  switch (p.host.kind) {
    case "name":
      return host.kind === "name" && host.name === p.host.name;
    case "suffix":
      return host.kind === "name" && host.name.length > p.host.suffix.length && host.name.endsWith(p.host.suffix);
    case "cidr":
      return host.kind === "ip" && inRange(host.ip, p.host.family, p.host.network, p.host.prefix);
  }
}
