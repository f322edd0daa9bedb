/**
 * Node hosts, for src/core/origins.ts: IP addresses (strict IPv4, IPv6 with an embedded IPv4),
 * CIDR ranges, DNS names, and the addresses and names that are never a GPU node whatever a
 * region's `allowed_origins` says (the list and why: src/core/origins.ts's module comment). Pure.
 */

/** Longest host name (DNS). */
const MAX_HOST_LENGTH = 253;

// ---------------------------------------------------------------------------------------------
// IP addresses

/** An IP address: its family and its value as an integer (32 or 128 bits). */
interface Ip {
  family: 4 | 6;
  value: bigint;
}

/** Bits in an address of each family. */
export const BITS = { 4: 32, 6: 128 } as const;

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

/** Whether `ip` is in the range `network`/`prefix` of `family` (never across families). */
export function inRange(ip: Ip, family: 4 | 6, network: bigint, prefix: number): boolean {
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
  // Azure's WireServer and Oracle Cloud's metadata service.
  ["168.63.129.16/32", "a cloud metadata address"],
  ["192.0.0.192/32", "a cloud metadata address"],
  ["224.0.0.0/4", "a multicast address"],
  ["240.0.0.0/4", "a reserved or broadcast address"],
  ["::/128", "an unspecified address"],
  ["::1/128", "a loopback address", true],
  ["fd00:ec2::254/128", "a cloud metadata address"],
  ["fe80::/10", "a link-local address"],
  // Local-use NAT64 (RFC 8215): its prefix length, and so where an IPv4 address sits in it, is the
  // network's choice, so it cannot be read out as the well-known prefix's can.
  ["64:ff9b:1::/48", "a local-use NAT64 address"],
  ["ff00::/8", "a multicast address"],
].map(([range, reason, loopback]) => ({
  range: cidr(range as string),
  reason: reason as string,
  ...(loopback ? { loopback: true as const } : {}),
}));

/**
 * IPv4 addresses carried inside an IPv6 address: mapped (::ffff:0:0/96), translated (SIIT,
 * ::ffff:0:0:0/96), compatible, NAT64 (64:ff9b::/96), 6to4 (2002::/16) and Teredo (2001::/32,
 * whose client address is stored inverted).
 */
function embeddedIpv4(ip: Ip): bigint | undefined {
  if (ip.family !== 6) return undefined;
  const low = ip.value & 0xffffffffn;
  const top96 = ip.value >> 32n;
  if (top96 === 0xffffn || top96 === 0xffff0000n || top96 === 0x64ff9b0000000000000000n) return low;
  if (top96 === 0n && low > 1n) return low; // ::a.b.c.d (deprecated); not :: or ::1
  if (ip.value >> 112n === 0x2002n) return (ip.value >> 80n) & 0xffffffffn;
  if (ip.value >> 96n === 0x20010000n) return low ^ 0xffffffffn;
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Names

/** Cloud metadata service names (GCP, AWS); refused whatever `allowed_origins` says. */
const METADATA_NAMES = new Set(["metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"]);

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** A lowercase ASCII DNS name (`gpu-1.example.com`), else an error message. */
export function nameError(name: string): string | undefined {
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
// A URL's host

/** A URL's host: an IP address or a DNS name. */
export type Host = { kind: "ip"; ip: Ip } | { kind: "name"; name: string };

/** The parsed URL's host: an IP (WHATWG has normalised IPv4 to dotted form) or a name without its trailing dot. */
export function hostOf(u: URL): Host | undefined {
  const h = u.hostname;
  if (h.startsWith("[")) {
    const v6 = parseIpv6(h.slice(1, -1));
    return v6 === undefined ? undefined : { kind: "ip", ip: { family: 6, value: v6 } };
  }
  const v4 = parseIpv4(h);
  if (v4 !== undefined) return { kind: "ip", ip: { family: 4, value: v4 } };
  return { kind: "name", name: h.endsWith(".") ? h.slice(0, -1) : h };
}

/** Why this host is never a node (see the module comment), or undefined. */
export function refusal(host: Host, allowLoopback: boolean): string | undefined {
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

/** Whether this host is a loopback one (localhost, 127.0.0.0/8, ::1): allowed in development mode. */
export function isLoopback(host: Host): boolean {
  if (host.kind === "name") return isLoopbackName(host.name);
  return REFUSED_RANGES.some((r) => r.loopback && inRange(host.ip, r.range.family, r.range.network, r.range.prefix));
}
