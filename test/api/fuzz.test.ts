/**
 * Hostile input against every endpoint (test/fuzz/cases.ts): thousands of malformed requests,
 * generated from fixed seeds. For every one: a 4xx (never a 5xx, never a 2xx), the documented error
 * shape `{"error":{"message","type","code","param"}}`, no trace of the canary planted in its body,
 * headers or path anywhere in the answer, and, per family, the regions' state (nodes, index,
 * requests in flight, counters) exactly as before.
 */
import { exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import type { AdminRegionState as RegionSnapshot } from "../../src/contracts/admin.ts";
import { TEST_ADMIN_TOKEN, TEST_CONFIG } from "../fixtures/config.ts";
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
