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
 *
 * In three files by concern: hosts (addresses, names, what is refused: origin-hosts.ts), the
 * allow-list (entries parsed and matched: origin-patterns.ts, re-exported here as the module's
 * public API), and this one, which checks a URL against both.
 */
import { hostOf, isLoopback, nameError, refusal, type Host } from "./origin-hosts.ts";
import { effectivePort, matches, type OriginPolicy, type Scheme } from "./origin-patterns.ts";

export { MAX_ORIGIN_PATTERN_LENGTH, originPolicy, parseOriginPattern, type OriginPolicy } from "./origin-patterns.ts";

/** Longest node URL accepted. */
const MAX_NODE_URL_LENGTH = 2048;

type NodeUrlCheck =
  | { ok: true; url: string; host: string }
  | { ok: false; status: 400 | 403; code: "invalid_node_url" | "origin_not_allowed"; message: string };

function hostText(host: Host, u: URL): string {
  return host.kind === "name" ? host.name : u.hostname;
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
