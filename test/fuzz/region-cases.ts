/**
 * Hostile messages to the region worker's own routes (src/region/app.ts), from a seed: what a
 * process on the machine (or a misrouted request) could send to a region worker's port.
 *
 * - **Forged** ({@link forgedRegionCases}): every route, method and region, with bodies a forger
 *   would want accepted (a node at the cloud metadata address, the removal of a fuzz node, a spend
 *   batch locking a tenant out, a dispatch billing another tenant) and fuzzed ones, sent unsigned,
 *   with a wrong secret, expired, with a hostile header, signed for another body, or by the wrong
 *   sender: each must be 401/403 in OpenAI's shape, echo nothing, and change nothing.
 * - **Signed** ({@link signedRegionCases}): messages signed with the real secret whose bodies and
 *   queries are malformed (truncated, broken, invalid UTF-8, a field of the wrong kind): never a
 *   5xx of the worker's own (a 503 refusal the edge acts on, `no-node` and the like, is the
 *   contract's answer).
 */
import { encodeDispatch, regionPath } from "../../src/contracts/region-service.ts";
import { CANARY, HOSTILE_STRINGS, Rng, breakJson, nestedText, truncations, withInvalidUtf8 } from "./generator.ts";
import { dispatchMeta } from "../fixtures/dispatch.ts";

/** How a case is signed when it is sent (timestamps and nonces are made at send time). */
export type RegionSigning =
  | { kind: "none" }
  /** A header value as given (hostile strings, a near-miss of the format). */
  | { kind: "header"; value: string }
  /** Signed with a secret the worker does not hold. */
  | { kind: "wrong-secret" }
  /** Signed properly, but this far from now (ms). */
  | { kind: "skewed"; offsetMs: number }
  /** Signed for other bytes than those sent. */
  | { kind: "tampered"; signedBody: string }
  /** Signed properly by the wrong sender (the edge for spend, a region worker for the rest). */
  | { kind: "wrong-role" }
  /** Signed properly, as its route's sender signs. */
  | { kind: "valid" };

export interface RegionFuzzCase {
  name: string;
  method: string;
  /** Path and query under the binding's origin. */
  path: string;
  body?: string | Uint8Array;
  /** Extra headers (the contract version is always sent). */
  headers: Array<[string, string]>;
  signing: RegionSigning;
}

const REGIONS = ["eu", "us", CANARY.toLowerCase()];
const DAY = "2026-01-01";
/** Tenant a forged spend batch or dispatch targets; the suite checks the ledger holds nothing for it. */
export const FORGED_TENANT = "fz-victim";

/** A node report a forger would want registered: the cloud metadata address, as an operator. */
const metadataReport = (region: string) =>
  JSON.stringify({
    report: {
      node_id: `meta-${CANARY.toLowerCase().replace(/_/g, "-")}`,
      region,
      url: "http://169.254.169.254/latest",
      models: ["m-eu"],
      kv_capacity_tokens: 100_000,
      running: 0,
      waiting: 0,
      kv_usage: 0,
    },
    credential: { kind: "admin" },
  });
const removal = JSON.stringify({ nodeId: "fz-eu-1", credential: { kind: "admin" } });
const spend = JSON.stringify({
  source: `forger/0/${CANARY}`,
  seq: 1,
  spends: [{ tenant: FORGED_TENANT, period: DAY, tokens: 9_000_000_000, usd: 1_000_000 }],
  periods: [DAY],
});

/** A dispatch message (length-prefixed meta, then the body) billing {@link FORGED_TENANT}. */
function dispatch(model: string): Uint8Array {
  return encodeDispatch(
    dispatchMeta({ requestId: `fz-${CANARY}`, tenant: { id: FORGED_TENANT, weight: 1 }, model }),
    new TextEncoder().encode(JSON.stringify({ model, messages: [{ role: "user", content: CANARY }] })),
  );
}

/** What of a hostile string a header can carry (a header value is bytes 0x20-0xff, no DEL). */
function headerSafe(text: string): string {
  return [...text].filter((ch) => ch.charCodeAt(0) >= 0x20 && ch.charCodeAt(0) <= 0xff && ch !== "\u007f").join("");
}

/** Header values that are not a signature: empty, near misses, hostile strings, oversized. */
function hostileHeaders(rng: Rng): string[] {
  const sig = "0".repeat(64);
  return [
    "v1",
    `v1;r=edge;t=${Date.now()};n=abcdefghijklmnop;s=${sig}`,
    `v1;r=region;t=${Date.now()};n=abcdefghijklmnop;s=${sig}`,
    `v2;r=edge;t=${Date.now()};n=abcdefghijklmnop;s=${sig}`,
    `v1;r=admin;t=${Date.now()};n=abcdefghijklmnop;s=${sig}`,
    `v1;r=edge;t=-1;n=abcdefghijklmnop;s=${sig}`,
    `v1;r=edge;t=99999999999999999;n=abcdefghijklmnop;s=${sig}`,
    `v1;r=edge;t=${Date.now()};n=${CANARY};s=${sig.toUpperCase()}`,
    `v1;r=edge;t=${Date.now()};n=abcdefghijklmnop;s=${sig};x=1`,
    "Bearer " + CANARY,
    "x".repeat(4096),
    ...Array.from({ length: 6 }, () => headerSafe(rng.pick(HOSTILE_STRINGS)) + CANARY),
  ];
}

/** Every route of the region worker, with the body a forger would send it. */
function routes(region: string): Array<{ method: string; path: string; body?: string | Uint8Array }> {
  return [
    { method: "POST", path: regionPath.dispatch(region), body: dispatch("m-eu") },
    { method: "POST", path: regionPath.report(region), body: metadataReport(region) },
    { method: "POST", path: regionPath.remove(region), body: removal },
    { method: "GET", path: regionPath.state(region) },
    { method: "GET", path: regionPath.history(region) },
    { method: "GET", path: regionPath.digest(region) },
    { method: "POST", path: regionPath.restart(region), body: "{}" },
    { method: "POST", path: regionPath.spend(region), body: spend },
    { method: "GET", path: `${regionPath.usage(region)}?tenant=${FORGED_TENANT}&from=${DAY}&to=${DAY}` },
    { method: "DELETE", path: `/region/v1/${region}/nodes/fz-eu-1` },
    { method: "POST", path: `/region/v1/${region}/${CANARY}` },
  ];
}

export function forgedRegionCases(seed: number): RegionFuzzCase[] {
  const rng = new Rng(seed);
  const out: RegionFuzzCase[] = [];
  const add = (name: string, c: Omit<RegionFuzzCase, "name">) => out.push({ name: `region forged ${name} #${out.length}`, ...c });
  const headers = hostileHeaders(rng);
  for (const region of REGIONS) {
    for (const r of routes(region)) {
      const base = { method: r.method, path: r.path, ...(r.body !== undefined ? { body: r.body } : {}), headers: [] };
      add(`unsigned ${r.method} ${r.path}`, { ...base, signing: { kind: "none" } });
      add(`wrong secret ${r.path}`, { ...base, signing: { kind: "wrong-secret" } });
      add(`expired ${r.path}`, { ...base, signing: { kind: "skewed", offsetMs: -31_000 } });
      add(`future ${r.path}`, { ...base, signing: { kind: "skewed", offsetMs: 31_000 } });
      add(`days old ${r.path}`, { ...base, signing: { kind: "skewed", offsetMs: -3 * 86_400_000 } });
      add(`wrong sender ${r.path}`, { ...base, signing: { kind: "wrong-role" } });
      add(`tampered ${r.path}`, { ...base, signing: { kind: "tampered", signedBody: `{"tampered":"${CANARY}"}` } });
      for (const value of headers) add(`hostile header ${r.path}`, { ...base, signing: { kind: "header", value } });
      // A "signature" in the query: not where the worker reads one.
      add(`signature in the query ${r.path}`, {
        ...base,
        path: `${r.path}${r.path.includes("?") ? "&" : "?"}sig=${CANARY}`,
        signing: { kind: "none" },
      });
    }
  }
  // Fuzzed bodies on the state-changing routes, unsigned or wrongly signed.
  const forgeries = [metadataReport("eu"), removal, spend];
  const posts = [regionPath.report("eu"), regionPath.remove("eu"), regionPath.spend("eu")];
  for (let i = 0; i < 120; i++) {
    const k = rng.int(forgeries.length);
    const text = forgeries[k]!;
    const body = rng.chance(0.3) ? withInvalidUtf8(rng, text) : (breakJson(rng, text) ?? text);
    const signing: RegionSigning = rng.pick<RegionSigning>([
      { kind: "none" },
      { kind: "wrong-secret" },
      { kind: "tampered", signedBody: text },
    ]);
    add(`fuzzed body ${posts[k]}`, {
      method: rng.pick(["POST", "PUT", "PATCH", "DELETE"]),
      path: posts[k]!,
      body,
      headers: [["content-type", "application/json"]],
      signing,
    });
  }
  return out;
}

/** Replaces the value at a dotted path of a JSON document with `value` (undefined: removes the key). */
function substitute(doc: Record<string, unknown>, path: string, value: unknown): string {
  const copy = structuredClone(doc);
  const keys = path.split(".");
  let at: Record<string, unknown> = copy;
  for (const k of keys.slice(0, -1)) at = at[k] as Record<string, unknown>;
  if (value === undefined) delete at[keys[keys.length - 1]!];
  else at[keys[keys.length - 1]!] = value;
  return JSON.stringify(copy);
}

export function signedRegionCases(seed: number): RegionFuzzCase[] {
  const rng = new Rng(seed);
  const out: RegionFuzzCase[] = [];
  const add = (name: string, c: Omit<RegionFuzzCase, "name">) => out.push({ name: `region signed ${name} #${out.length}`, ...c });
  const post = (path: string, body: string | Uint8Array) =>
    add(`POST ${path}`, { method: "POST", path, body, headers: [["content-type", "application/json"]], signing: { kind: "valid" } });
  const report = JSON.parse(metadataReport("eu")) as Record<string, unknown>;
  (report.report as Record<string, unknown>).url = "http://fz-new.ok.node.test";
  const spendDoc = JSON.parse(spend) as Record<string, unknown>;
  const bads: unknown[] = [null, -1, 1.5, 1e309, "x", CANARY, [], {}, [CANARY], { [CANARY]: 1 }, true, "9".repeat(400), undefined];
  const fields: Array<[string, Record<string, unknown>, string]> = [
    ...[
      "report.node_id",
      "report.region",
      "report.url",
      "report.models",
      "report.kv_capacity_tokens",
      "report.running",
      "report.kv_usage",
      "credential",
      "credential.kind",
    ].map((f): [string, Record<string, unknown>, string] => [f, report, regionPath.report("eu")]),
    ...["nodeId", "credential"].map((f): [string, Record<string, unknown>, string] => [f, JSON.parse(removal), regionPath.remove("eu")]),
    ...["source", "seq", "spends", "periods"].map((f): [string, Record<string, unknown>, string] => [f, spendDoc, regionPath.spend("eu")]),
  ];
  for (const [field, doc, path] of fields) for (const bad of bads) post(path, substitute(doc, field, bad === 1e309 ? "1e309" : bad));
  for (const [doc, path] of [
    [report, regionPath.report("eu")],
    [JSON.parse(removal) as Record<string, unknown>, regionPath.remove("eu")],
    [spendDoc, regionPath.spend("eu")],
  ] as const) {
    const text = JSON.stringify(doc);
    for (const t of truncations(rng, text, 15)) post(path, t);
    for (let i = 0; i < 25; i++) {
      const broken = breakJson(rng, text);
      if (broken !== undefined) post(path, broken);
    }
    for (let i = 0; i < 8; i++) post(path, withInvalidUtf8(rng, text));
    post(path, nestedText(rng.between(64, 2_000), "null", "mixed"));
  }
  // Dispatch messages: length prefixes out of bounds, meta that is not JSON or not a dispatch, bodies of any bytes.
  const good = dispatch("m-eu");
  const metaLength = new DataView(good.buffer).getUint32(0);
  const meta = new TextDecoder().decode(good.subarray(4, 4 + metaLength));
  const withMeta = (text: string) => {
    const m = new TextEncoder().encode(text);
    const out = new Uint8Array(4 + m.length + 2);
    new DataView(out.buffer).setUint32(0, m.length);
    out.set(m, 4);
    out.set([123, 125], 4 + m.length);
    return out;
  };
  for (const prefix of [[], [0], [0, 0, 0], [0xff, 0xff, 0xff, 0xff], [0, 0, 0, 0], [0x7f, 0, 0, 0]])
    post(regionPath.dispatch("eu"), new Uint8Array(prefix));
  for (const t of truncations(rng, meta, 15)) post(regionPath.dispatch("eu"), withMeta(t));
  for (let i = 0; i < 40; i++) {
    const broken = breakJson(rng, meta);
    if (broken !== undefined) post(regionPath.dispatch("eu"), withMeta(broken));
  }
  const metaDoc = JSON.parse(meta) as Record<string, unknown>;
  for (const field of [
    "requestId",
    "startedAt",
    "tenant",
    "tenant.id",
    "tenant.weight",
    "model",
    "path",
    "api",
    "hashes",
    "promptTokens",
    "attempts",
    "headers",
  ])
    for (const bad of bads) post(regionPath.dispatch("eu"), withMeta(substitute(metaDoc, field, bad === 1e309 ? "1e309" : bad)));
  // Usage queries: every parameter missing, malformed or hostile.
  const q = (query: string) =>
    add(`usage ?${query}`, { method: "GET", path: `${regionPath.usage("eu")}?${query}`, headers: [], signing: { kind: "valid" } });
  for (const tenant of ["", "t".repeat(65), encodeURIComponent(CANARY + "\u0000"), "%ff", "acme&tenant=globex"])
    q(`tenant=${tenant}&from=${DAY}&to=${DAY}`);
  for (const day of ["", "2026-13-01", "2026-1-1", "x", CANARY, "2026-01-01T00:00:00Z", "99999-01-01"]) {
    q(`from=${encodeURIComponent(day)}&to=${DAY}`);
    q(`from=${DAY}&to=${encodeURIComponent(day)}`);
  }
  q("");
  // Wrong methods and unknown paths, signed.
  for (const region of ["eu", "us"]) {
    for (const [method, path] of [
      ["GET", regionPath.dispatch(region)],
      ["PUT", regionPath.report(region)],
      ["DELETE", regionPath.remove(region)],
      ["POST", regionPath.state(region)],
      ["GET", regionPath.spend(region)],
      ["GET", `/region/v1/${region}/${CANARY}`],
      ["GET", `/region/v1/${region}`],
    ] as const)
      add(`${method} ${path}`, { method, path, headers: [], signing: { kind: "valid" } });
  }
  return out;
}
