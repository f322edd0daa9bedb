/**
 * Node origins: which URLs a region's nodes may register, and therefore where the router sends
 * customers' prompts and the region's origin token. Pure (no I/O): the node API checks every
 * report's `url` with {@link checkNodeUrl}, the dispatcher asks {@link originTokenAllowed} before
 * attaching the origin token, and the configuration validates `allowed_origins` entries with
 * {@link parseOriginPattern}.
 *
 * What is checked:
 * - the URL's form, after WHATWG URL parsing has normalised what it can (decimal, hex, octal and
 *   shortened IPv4 such as `http://2130706433/` or `http://0x7f.1/` become `127.0.0.1`; IPv6 is
 *   compressed; names are lowercased and IDNs become punycode): http(s) only, no userinfo
 *   (`user:pass@`), no fragment, a host of at most 253 characters, at most 2,048 characters in all;
 * - addresses that are never a GPU node, refused even when an `allowed_origins` CIDR covers them:
 *   unspecified and this-network (0.0.0.0/8, ::), link-local (169.254.0.0/16, fe80::/10), cloud
 *   metadata (169.254.169.254, 100.100.100.200, fd00:ec2::254, metadata.google.internal, ...),
 *   multicast and reserved ranges, loopback (127.0.0.0/8, ::1, localhost) outside development
 *   mode, and the same addresses embedded in IPv6 (::ffff:a.b.c.d, ::a.b.c.d, 64:ff9b::/96 NAT64,
 *   2002::/16 6to4);
 * - the host (and port, and scheme, when the entry names them) against the region's allow-list.
 *
 * What is not: where a DNS name resolves. A Worker cannot resolve names itself, so a name is
 * checked as a name: an allowed name (or `*.suffix`) whose DNS points at a private or metadata
 * address is fetched there. Only names under the operator's control belong in `allowed_origins`.
 */

/** Longest node URL accepted. */
export const MAX_NODE_URL_LENGTH = 2048;
/** Longest host name (DNS). */
export const MAX_HOST_LENGTH = 253;
/** Longest `allowed_origins` entry. */
export const MAX_ORIGIN_PATTERN_LENGTH = 300;

export type Scheme = "http" | "https";

type HostPattern =
  | { kind: "name"; name: string }
  /** `*.example.com`: any name ending in `.example.com` (not `example.com` itself). */
  | { kind: "suffix"; suffix: string }
  | { kind: "cidr"; family: 4 | 6; network: bigint; prefix: number };

/** One `allowed_origins` entry, parsed. */
export interface OriginPattern {
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

export type NodeUrlCheck =
  | { ok: true; url: string; host: string }
  | { ok: false; status: 400 | 403; code: "invalid_node_url" | "origin_not_allowed"; message: string };

// ---------------------------------------------------------------------------------------------
// IP addresses

interface Ip {
  family: 4 | 6;
  value: bigint;
}

const BITS = { 4: 32, 6: 128 } as const;

/** Strict dotted quad (`10.0.0.5`): four decimal octets, no leading zeros. */
export function parseIpv4(text: string): bigint | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (!m) return undefined;
  let value = 0n;
  for (const part of m.slice(1)) {
    if (part.length > 1 && part.startsWith("0")) return undefined;
    const n = Number(part);
    if (n > 255) return undefined;
    value = (value << 8n) | BigInt(n);
  }
  return value;
}

/** An IPv6 address without brackets (`fd00::1`, `::ffff:10.0.0.5`); no zone id. */
export function parseIpv6(text: string): bigint | undefined {
  if (!/^[0-9a-f:.]+$/i.test(text)) return undefined;
  let s = text.toLowerCase();
  const lastColon = s.lastIndexOf(":");
  if (lastColon < 0) return undefined;
  const tail = s.slice(lastColon + 1);
  if (tail.includes(".")) {
    const v4 = parseIpv4(tail);
    if (v4 === undefined) return undefined;
    s = `${s.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const groups = (h: string) => (h === "" ? [] : h.split(":"));
  const left = groups(halves[0]!);
  const right = halves.length === 2 ? groups(halves[1]!) : [];
  const given = left.length + right.length;
  if (halves.length === 1 ? given !== 8 : given > 7) return undefined;
  const all = [...left, ...Array<string>(8 - given).fill("0"), ...right];
  let value = 0n;
  for (const g of all) {
    if (!/^[0-9a-f]{1,4}$/.test(g)) return undefined;
    value = (value << 16n) | BigInt(parseInt(g, 16));
  }
  return value;
}

function inRange(ip: Ip, family: 4 | 6, network: bigint, prefix: number): boolean {
  if (ip.family !== family) return false;
  const shift = BigInt(BITS[family] - prefix);
  return ip.value >> shift === network >> shift;
}

function cidr(text: string): { family: 4 | 6; network: bigint; prefix: number } {
  const [addr, bits] = text.split("/") as [string, string];
  const v4 = parseIpv4(addr);
  return v4 !== undefined
    ? { family: 4, network: v4, prefix: Number(bits) }
    : { family: 6, network: parseIpv6(addr)!, prefix: Number(bits) };
}

/**
 * Addresses that are never a GPU node, refused whatever `allowed_origins` says, first match wins
 * (so the metadata address is named as such before its link-local range).
 */
const REFUSED_RANGES: Array<{ range: ReturnType<typeof cidr>; reason: string; loopback?: true }> = [
  ["0.0.0.0/8", "an unspecified (this-network) address"],
  ["127.0.0.0/8", "a loopback address", true],
  ["169.254.169.254/32", "a cloud metadata address"],
  ["169.254.0.0/16", "a link-local address"],
  ["100.100.100.200/32", "a cloud metadata address"],
  ["224.0.0.0/4", "a multicast address"],
  ["240.0.0.0/4", "a reserved or broadcast address"],
  ["::/128", "an unspecified address"],
  ["::1/128", "a loopback address", true],
  ["fd00:ec2::254/128", "a cloud metadata address"],
  ["fe80::/10", "a link-local address"],
  ["ff00::/8", "a multicast address"],
].map(([range, reason, loopback]) => ({
  range: cidr(range as string),
  reason: reason as string,
  ...(loopback ? { loopback: true as const } : {}),
}));

/** IPv4 addresses carried inside an IPv6 address: mapped, compatible, NAT64 (64:ff9b::/96) and 6to4 (2002::/16). */
function embeddedIpv4(ip: Ip): bigint | undefined {
  if (ip.family !== 6) return undefined;
  const low = ip.value & 0xffffffffn;
  const top96 = ip.value >> 32n;
  if (top96 === 0xffffn || top96 === 0x64ff9b0000000000000000n) return low;
  if (top96 === 0n && low > 1n) return low; // ::a.b.c.d (deprecated); not :: or ::1
  if (ip.value >> 112n === 0x2002n) return (ip.value >> 80n) & 0xffffffffn;
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Names

/** Cloud metadata service names (GCP, AWS); refused whatever `allowed_origins` says. */
const METADATA_NAMES = new Set(["metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"]);

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** A lowercase ASCII DNS name (`gpu-1.example.com`), else an error message. */
function nameError(name: string): string | undefined {
  if (name.length === 0) return "an empty host";
  if (name.length > MAX_HOST_LENGTH) return `a host longer than ${MAX_HOST_LENGTH} characters`;
  if (/[^\x21-\x7e]/.test(name)) return "a host with characters outside ASCII (write international names in punycode, xn--...)";
  const labels = name.split(".");
  if (!labels.every((l) => LABEL.test(l))) return "a host that is not a DNS name (letters, digits, dashes; labels of 1-63)";
  if (/^\d+$/.test(labels[labels.length - 1]!)) return "a numeric host (write IPv4 addresses as four decimal numbers, a.b.c.d)";
  return undefined;
}

function isLoopbackName(name: string): boolean {
  return name === "localhost" || name.endsWith(".localhost");
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

// ---------------------------------------------------------------------------------------------
// Checking a node URL

type Host = { kind: "ip"; ip: Ip } | { kind: "name"; name: string };

/** The parsed URL's host: an IP (WHATWG has normalised IPv4 to dotted form) or a name without its trailing dot. */
function hostOf(u: URL): Host | undefined {
  const h = u.hostname;
  if (h.startsWith("[")) {
    const v6 = parseIpv6(h.slice(1, -1));
    return v6 === undefined ? undefined : { kind: "ip", ip: { family: 6, value: v6 } };
  }
  const v4 = parseIpv4(h);
  if (v4 !== undefined) return { kind: "ip", ip: { family: 4, value: v4 } };
  return { kind: "name", name: h.endsWith(".") ? h.slice(0, -1) : h };
}

function effectivePort(u: URL): number {
  return u.port ? Number(u.port) : u.protocol === "https:" ? 443 : 80;
}

function hostText(host: Host, u: URL): string {
  return host.kind === "name" ? host.name : u.hostname;
}

/** Why this host is never a node (see the module comment), or undefined. */
function refusal(host: Host, allowLoopback: boolean): string | undefined {
  if (host.kind === "name") {
    if (METADATA_NAMES.has(host.name)) return "a cloud metadata name";
    if (isLoopbackName(host.name) && !allowLoopback) return "a loopback name";
    return undefined;
  }
  const check = (ip: Ip): string | undefined => {
    const hit = REFUSED_RANGES.find((r) => inRange(ip, r.range.family, r.range.network, r.range.prefix));
    return hit && !(hit.loopback && allowLoopback) ? hit.reason : undefined;
  };
  const direct = check(host.ip);
  if (direct) return direct;
  const v4 = embeddedIpv4(host.ip);
  const inner = v4 === undefined ? undefined : check({ family: 4, value: v4 });
  return inner ? `${inner} (embedded in IPv6)` : undefined;
}

function isLoopback(host: Host): boolean {
  if (host.kind === "name") return isLoopbackName(host.name);
  return REFUSED_RANGES.some((r) => r.loopback && inRange(host.ip, r.range.family, r.range.network, r.range.prefix));
}

function matches(p: OriginPattern, scheme: Scheme, host: Host, port: number): boolean {
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

/** The URL as the router will call it: WHATWG's serialisation, without a trailing `/` the URL did not have. */
function normalised(raw: string, u: URL): string {
  const href = u.href;
  const hadPath = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*[/?]/i.test(raw);
  return !hadPath && u.pathname === "/" && href.endsWith("/") ? href.slice(0, -1) : href;
}

/**
 * Checks a node URL (a report's `url`) against a region's allow-list. On success, `url` is the
 * normalised form (store and call that, not the raw text: it is what was checked). Refusals never
 * quote the URL's userinfo; they name the host, which is not a secret.
 */
export function checkNodeUrl(raw: string, policy: OriginPolicy, field = "url"): NodeUrlCheck {
  const invalid = (why: string): NodeUrlCheck => ({
    ok: false,
    status: 400,
    code: "invalid_node_url",
    message: `Invalid report: ${field}: ${why}`,
  });
  const refused = (why: string): NodeUrlCheck => ({
    ok: false,
    status: 403,
    code: "origin_not_allowed",
    message: `Refused report: ${field}: ${why}`,
  });
  if (raw.length > MAX_NODE_URL_LENGTH) return invalid(`longer than ${MAX_NODE_URL_LENGTH} characters`);
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return invalid("not a URL");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return invalid("must be an http(s) URL");
  if (u.username !== "" || u.password !== "" || /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(raw)) {
    return invalid("must not contain credentials (user:password@); the router authenticates to nodes with the region's origin token");
  }
  if (raw.includes("#")) return invalid("must not have a fragment (#...)");
  const host = hostOf(u);
  if (!host) return invalid("not a valid host");
  if (host.kind === "name") {
    const err = nameError(host.name);
    if (err) return invalid(err);
  }
  const shown = hostText(host, u);
  const why = refusal(host, policy.allowLoopback);
  // Refusals name the rule, not the host: an error never repeats what the caller sent.
  if (why) return refused(`its host is ${why}, never a node`);
  const scheme: Scheme = u.protocol === "https:" ? "https" : "http";
  const port = effectivePort(u);
  const allowed = (policy.allowLoopback && isLoopback(host)) || policy.patterns.some((p) => matches(p, scheme, host, port));
  if (!allowed) {
    return refused(`its origin (scheme, host and port) is not in the region's allowed_origins`);
  }
  return { ok: true, url: normalised(raw, u), host: shown };
}

/**
 * Whether the region's origin token may be sent to this node URL: only inside its allowed origins
 * (a node registered before the allow-list was narrowed keeps receiving requests until it expires,
 * but not the token). The dispatcher calls this before attaching `Authorization: Bearer <origin token>`.
 */
export function originTokenAllowed(url: string, region: { origins: OriginPolicy }): boolean {
  let memo = tokenMemo.get(region.origins);
  if (!memo) tokenMemo.set(region.origins, (memo = new Map()));
  let allowed = memo.get(url);
  if (allowed === undefined) {
    allowed = checkNodeUrl(url, region.origins).ok;
    if (memo.size >= TOKEN_MEMO_SIZE) memo.clear();
    memo.set(url, allowed);
  }
  return allowed;
}

/** Per request, the same few node URLs: their verdicts are remembered per allow-list (a new configuration is a new list). */
const tokenMemo = new WeakMap<OriginPolicy, Map<string, boolean>>();
const TOKEN_MEMO_SIZE = 4096;
