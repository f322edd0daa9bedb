/**
 * Hostile input against every endpoint (test/fuzz/cases.ts): thousands of malformed requests,
 * generated from fixed seeds. For every one: a 4xx (never a 5xx, never a 2xx), the documented error
 * shape `{"error":{"message","type","code","param"}}`, no trace of the canary planted in its body,
 * headers or path anywhere in the answer, and, per family, the regions' state (nodes, index,
 * requests in flight, counters) exactly as before.
 *
 * The region worker's own routes too (test/fuzz/region-cases.ts), over its real service binding:
 * forged messages (unsigned, wrong secret, expired, tampered, wrong sender, hostile signature
 * headers) are each 401/403 in OpenAI's shape with nothing echoed and nothing changed (the regions'
 * state, usage ledger and budget ledger); signed malformed ones are never a 5xx of the worker's own.
 */
import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { CONTRACT_HEADER, REFUSAL_HEADER, REGION_CONTRACT_VERSION, regionPath } from "../../src/contracts/region-service.ts";
import { ALL_REGIONS_BINDING } from "../../src/contracts/topology.ts";
import { AUTH_REFUSAL_HEADER, INTERNAL_AUTH_HEADER, signInternal, type InternalRole } from "../../src/core/internal-auth.ts";
import { expectedRole } from "../../src/region/authenticate.ts";
import { TEST_ADMIN_TOKEN, TEST_CONFIG, TEST_INTERNAL_SECRET, TEST_INTERNAL_SECRET_WRONG } from "../fixtures/config.ts";
import { FORGED_TENANT, forgedRegionCases, signedRegionCases, type RegionFuzzCase } from "../fuzz/region-cases.ts";
import { chat, registerAll } from "../helpers.ts";
import { CANARY } from "../fuzz/generator.ts";
import {
  adminCases,
  CANARY_ID,
  FUZZ_NODES,
  type FuzzCase,
  INFERENCE,
  inferenceBodyCases,
  inferenceHeadCases,
  LOCAL,
  modelsCases,
  nodeCases,
} from "../fuzz/cases.ts";

const MAX_BODY_BYTES = TEST_CONFIG.limits.max_body_bytes;
/** Requests in flight at once: enough to finish in seconds, few enough for 2 cores. */
const BATCH = 48;

const FAMILIES: Array<[string, FuzzCase[]]> = [
  // One family per endpoint: each runs well inside the 15 s after which an unreported node expires.
  ...INFERENCE.map((spec, i): [string, FuzzCase[]] => [
    `${spec.path} bodies`,
    inferenceBodyCases(0x5eed_0100 + i, MAX_BODY_BYTES, spec.path),
  ]),
  ["inference heads: credentials, media types, header bounds, methods, paths", inferenceHeadCases(0x5eed_0002)],
  ["models", modelsCases(0x5eed_0003)],
  ["node reports and removals", nodeCases(0x5eed_0004)],
  ["admin API", adminCases(0x5eed_0005)],
];
const TOTAL = FAMILIES.reduce((n, [, cases]) => n + cases.length, 0);

interface Failure {
  name: string;
  problem: string;
  status: number;
  body: string;
}

/** Everything about a region that a request could change, minus what time changes by itself. */
function stateOf(s: RegionSnapshot) {
  return {
    nodes: s.nodes.map((n) => ({
      id: n.id,
      url: n.url,
      models: n.models,
      kvCapacityTokens: n.kvCapacityTokens,
      inflight: n.load.inflight,
      prefilling: n.load.prefilling,
      indexBlocks: n.indexBlocks,
      consecutiveFailures: n.consecutiveFailures,
    })),
    index: { entries: s.index.entries, distinctBlocks: s.index.distinctBlocks },
    inflight: s.inflight,
    sessions: s.sessions,
    rejected: s.rejected,
    retries: s.retries,
    failovers: s.failovers,
    tenants: s.tenants,
  };
}

async function regionStates() {
  const out: Record<string, unknown> = {};
  for (const region of TEST_CONFIG.regions.map((r) => r.name)) {
    const res = await exports.default.fetch(
      new Request(`${LOCAL}/admin/state/${region}`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } }),
    );
    expect(res.status).toBe(200);
    out[region] = stateOf(await res.json<RegionSnapshot>());
  }
  return out;
}

function toRequest(c: FuzzCase): Request {
  const headers = new Headers();
  for (const [name, value] of c.headers) headers.append(name, value);
  return new Request(c.url, { method: c.method, headers, body: c.body ?? null });
}

const containsCanary = (text: string) => text.includes(CANARY) || text.includes(CANARY_ID);

/** Sends one case and returns what is wrong with its answer (nothing: undefined). */
async function check(c: FuzzCase): Promise<Failure | undefined> {
  let request: Request;
  try {
    request = toRequest(c);
  } catch (e) {
    return { name: c.name, problem: `the generator built a request the runtime refuses: ${String(e)}`, status: 0, body: "" };
  }
  const res = await exports.default.fetch(request);
  const body = await res.text();
  const fail = (problem: string): Failure => ({ name: c.name, problem, status: res.status, body: body.slice(0, 300) });
  if (res.status < 400 || res.status >= 500) return fail("not a 4xx");
  if (c.expect && !c.expect.includes(res.status)) return fail(`expected ${c.expect.join(" or ")}`);
  if (!res.headers.get("content-type")?.includes("application/json")) return fail("not JSON");
  if (!res.headers.get("x-request-id")) return fail("no x-request-id");
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return fail("body is not JSON");
  }
  const error = (parsed as { error?: Record<string, unknown> }).error;
  if (Object.keys(parsed as object).join() !== "error" || !error) return fail("not {error}");
  if (Object.keys(error).sort().join() !== "code,message,param,type") return fail("error keys are not code, message, param, type");
  if (typeof error.message !== "string" || typeof error.type !== "string" || typeof error.code !== "string")
    return fail("error fields of the wrong type");
  if (error.param !== null && typeof error.param !== "string") return fail("param neither string nor null");
  const headerText = [...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n");
  if (containsCanary(body) || containsCanary(headerText)) return fail("the answer repeats the canary");
  return undefined;
}

async function run(cases: FuzzCase[]): Promise<Failure[]> {
  const failures: Failure[] = [];
  for (let i = 0; i < cases.length; i += BATCH) {
    const results = await Promise.all(cases.slice(i, i + BATCH).map((c) => check(c)));
    for (const r of results) if (r) failures.push(r);
  }
  return failures;
}

describe("hostile input", () => {
  let ran = 0;

  beforeAll(async () => {
    await registerAll(FUZZ_NODES);
    // One request routed and measured, so the index and the tenant counters hold something to lose.
    const res = await chat({ model: "m-eu", messages: [{ role: "user", content: "warm the index" }] });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });

  for (const [family, cases] of FAMILIES) {
    it(`${family}: ${cases.length} malformed requests, each a 4xx in OpenAI's shape, no echo, state unchanged`, async () => {
      // Nodes go silent after 15 s: reports refreshed (which changes nothing compared here) so none expires mid-family.
      await registerAll(FUZZ_NODES);
      const before = await regionStates();
      const failures = await run(cases);
      ran += cases.length;
      expect(failures.slice(0, 20), `${failures.length} of ${cases.length} cases failed`).toEqual([]);
      expect(await regionStates()).toEqual(before);
    }, 60_000);
  }

  it(`ran ${TOTAL} hostile requests in total`, () => {
    expect(ran).toBe(TOTAL);
    expect(TOTAL).toBeGreaterThan(2_000);
  });
});

const REGION_ORIGIN = "https://region.warmpath.internal";

const bytesOf = (b: string | Uint8Array | undefined) => (typeof b === "string" ? new TextEncoder().encode(b) : (b ?? new Uint8Array()));

/** Signs `body` for `path` as `role`, at `timestamp`, with `secret`. */
function sign(
  secret: string,
  role: InternalRole,
  method: string,
  path: string,
  body: string | Uint8Array | undefined,
  timestamp = Date.now(),
) {
  return signInternal(crypto.subtle, secret, {
    role,
    method,
    pathAndQuery: new URL(REGION_ORIGIN + path).pathname + new URL(REGION_ORIGIN + path).search,
    timestamp,
    nonce: crypto.randomUUID().replace(/-/g, ""),
    body: bytesOf(body),
  });
}

/** Sends a region case over the region worker's binding, signed (or not) as the case says, at send time. */
async function sendRegion(c: RegionFuzzCase): Promise<Response> {
  const headers = new Headers([[CONTRACT_HEADER, String(REGION_CONTRACT_VERSION)]]);
  for (const [name, value] of c.headers) headers.append(name, value);
  const role = expectedRole(new URL(REGION_ORIGIN + c.path).pathname);
  const s = c.signing;
  const value =
    s.kind === "none"
      ? undefined
      : s.kind === "header"
        ? s.value
        : s.kind === "wrong-secret"
          ? await sign(TEST_INTERNAL_SECRET_WRONG, role, c.method, c.path, c.body)
          : s.kind === "skewed"
            ? await sign(TEST_INTERNAL_SECRET, role, c.method, c.path, c.body, Date.now() + s.offsetMs)
            : s.kind === "tampered"
              ? await sign(TEST_INTERNAL_SECRET, role, c.method, c.path, s.signedBody)
              : s.kind === "wrong-role"
                ? await sign(TEST_INTERNAL_SECRET, role === "edge" ? "region" : "edge", c.method, c.path, c.body)
                : await sign(TEST_INTERNAL_SECRET, role, c.method, c.path, c.body);
  if (value !== undefined) headers.set(INTERNAL_AUTH_HEADER, value);
  const worker = (env as unknown as Record<string, Fetcher>)[ALL_REGIONS_BINDING]!;
  return worker.fetch(REGION_ORIGIN + c.path, { method: c.method, headers, body: c.body ?? null });
}

/** What is wrong with the answer to a forged message (nothing: undefined). */
async function checkForged(c: RegionFuzzCase): Promise<Failure | undefined> {
  const res = await sendRegion(c);
  const body = await res.text();
  const fail = (problem: string): Failure => ({ name: c.name, problem, status: res.status, body: body.slice(0, 300) });
  if (res.status !== 401 && res.status !== 403) return fail("not 401 or 403");
  if (!res.headers.get(AUTH_REFUSAL_HEADER)) return fail("not marked as the boundary's refusal");
  if (!res.headers.get("content-type")?.includes("application/json")) return fail("not JSON");
  let parsed: { error?: Record<string, unknown> };
  try {
    parsed = JSON.parse(body) as typeof parsed;
  } catch {
    return fail("body is not JSON");
  }
  if (Object.keys(parsed).join() !== "error" || !parsed.error) return fail("not {error}");
  if (Object.keys(parsed.error).sort().join() !== "code,message,param,type") return fail("error keys are not code, message, param, type");
  const headerText = [...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n");
  if (containsCanary(body) || containsCanary(headerText)) return fail("the answer repeats the canary");
  if (body.includes(TEST_INTERNAL_SECRET) || body.includes(TEST_INTERNAL_SECRET_WRONG)) return fail("the answer holds a secret");
  return undefined;
}

/** What is wrong with the answer to a signed malformed message: a 5xx that is not a refusal the edge acts on. */
async function checkSigned(c: RegionFuzzCase): Promise<Failure | undefined> {
  const res = await sendRegion(c);
  const body = await res.text();
  const fail = (problem: string): Failure => ({ name: c.name, problem, status: res.status, body: body.slice(0, 300) });
  if (res.headers.get(AUTH_REFUSAL_HEADER)) return fail("a signed message refused at the boundary");
  if (res.status >= 500) {
    const reason = res.headers.get(REFUSAL_HEADER);
    if (reason === null || reason === "failed") return fail("a 5xx of the region worker's own");
  }
  if (res.status >= 400 && !res.headers.get("content-type")?.includes("application/json")) return fail("an error that is not JSON");
  return undefined;
}

async function runWith(cases: RegionFuzzCase[], check: (c: RegionFuzzCase) => Promise<Failure | undefined>): Promise<Failure[]> {
  const failures: Failure[] = [];
  for (let i = 0; i < cases.length; i += BATCH) {
    const results = await Promise.all(
      cases.slice(i, i + BATCH).map((c) => check(c).catch((e: unknown) => ({ name: c.name, problem: String(e), status: 0, body: "" }))),
    );
    for (const r of results) if (r) failures.push(r);
  }
  return failures;
}

/** The forged tenant's usage in every region and its budget ledger totals, read as the edge and a region worker read them. */
async function forgedTenantLedgers() {
  const day = "2026-01-01";
  const usage: unknown[] = [];
  for (const region of TEST_CONFIG.regions.map((r) => r.name)) {
    const res = await sendRegion({
      name: "read usage",
      method: "GET",
      path: `${regionPath.usage(region)}?tenant=${FORGED_TENANT}&from=${day}&to=${day}`,
      headers: [],
      signing: { kind: "valid" },
    });
    expect(res.status).toBe(200);
    usage.push(...(await res.json<{ data: unknown[] }>()).data);
  }
  const res = await sendRegion({
    name: "read totals",
    method: "POST",
    path: regionPath.spend(TEST_CONFIG.regions[0]!.name),
    body: JSON.stringify({ source: `fuzz-reader/0/${crypto.randomUUID().slice(0, 8)}`, seq: 1, spends: [], periods: [day] }),
    headers: [["content-type", "application/json"]],
    signing: { kind: "valid" },
  });
  expect(res.status).toBe(200);
  const totals = (await res.json<{ totals: Array<{ tenant: string }> }>()).totals.filter((t) => t.tenant === FORGED_TENANT);
  return { usage, totals };
}

describe("hostile messages to the region worker", () => {
  const forged = forgedRegionCases(0x5eed_0006);
  const signed = signedRegionCases(0x5eed_0007);

  it(`${forged.length} forged messages to every route: each 401/403 in OpenAI's shape, no echo, nothing changed`, async () => {
    await registerAll(FUZZ_NODES);
    const before = await regionStates();
    const failures = await runWith(forged, checkForged);
    expect(failures.slice(0, 20), `${failures.length} of ${forged.length} cases failed`).toEqual([]);
    expect(await regionStates()).toEqual(before);
    expect(await forgedTenantLedgers()).toEqual({ usage: [], totals: [] });
    expect(forged.length).toBeGreaterThan(400);
  }, 60_000);

  it(`${signed.length} signed malformed messages: never a 5xx of the worker's own`, async () => {
    await registerAll(FUZZ_NODES);
    const failures = await runWith(signed, checkSigned);
    expect(failures.slice(0, 20), `${failures.length} of ${signed.length} cases failed`).toEqual([]);
    expect(signed.length).toBeGreaterThan(300);
  }, 60_000);
});
