/**
 * The bench worker: runs warmpath's production code inside workerd for bench/workerd/run.ts, which
 * times it from outside (bench/workerd/timing.ts says why). Each endpoint runs one batch and
 * answers with what it computed, so nothing is optimised away:
 *
 *   GET /noop                           nothing: the HTTP path's own cost, for the throughput tables
 *   GET /hash?chars=N&k=K               K x canonicalise + hash a chat prompt of N characters (the edge's per-request work)
 *   GET /route/setup?nodes=N&entries=E  RouteBench object: a RegionRouter on N nodes, index capped at E entries
 *   GET /route/fill?requests=R          ... route up to R fill requests (stops when the index is full)
 *   GET /route/run?k=K                  ... K timed route + firstByte + complete calls
 *   GET /validate?api=A&items=N&how=fast|zod&k=K
 *                                       K x validate a body of N list items in API A (the edge's fast schema, or zod alone)
 *   GET /pair?i=I                       one route + complete through the real RegionDurableObject (RPC, as dispatch.ts)
 *   GET /load?c=C&n=N[&floor=1]         N such pairs from C concurrent chains inside this worker; with
 *                                       floor=1 the same two calls, same arguments, to an object that does nothing
 *
 * This file is the worker's source (type-checked by bench/workerd/tsconfig.json, with the Workers
 * types); its `.mts` extension keeps it out of bench/tsconfig.json, whose Node types it cannot use.
 */
import { DurableObject } from "cloudflare:workers";
import { RegionDurableObject } from "../../durable-objects/region.ts";
import { loadConfig, regionStub, type LoadedRegion } from "../../src/config/load.ts";
import type { CanonicalPrompt } from "../../src/core/canonical.ts";
import {
  chatPrompt,
  hashBatch,
  routePool,
  RouteScenario,
  ROUTE_MODEL,
  THROUGHPUT_REGION,
  THROUGHPUT_TENANT,
  type PoolPrompt,
  agenticBody,
  validateBatch,
  VALIDATE_APIS,
  type ValidateApi,
} from "./scenarios.ts";

/** The production Durable Object class, bound as `REGION` exactly as wrangler.toml binds it. */
export { RegionDurableObject };

interface BenchEnv {
  REGION: DurableObjectNamespace<RegionDurableObject>;
  ROUTE_BENCH: DurableObjectNamespace<RouteBench>;
  WARMPATH_CONFIG: object;
}

/** Distinct session hints the throughput requests carry (as table 2's requests). */
const SESSION_HINTS = 500;
/** Completion tokens reported in each answer's usage (the region object learns from usage at completion). */
const COMPLETION_TOKENS = 64;

/** Prompts and bodies built once per isolate: building them is not what is timed. */
const prompts = new Map<number, CanonicalPrompt>();
const bodies = new Map<string, Record<string, unknown>>();
let pool: PoolPrompt[] | undefined;
const getPool = (): PoolPrompt[] => (pool ??= routePool());

/**
 * The in-isolate clock's reading of a batch, ms. It is only a cross-check: production workerd
 * freezes it during synchronous work and the local runtime ticks in whole milliseconds.
 */
function isolateMs<T>(work: () => T): { value: T; isolateMs: number } {
  const t0 = performance.now();
  const value = work();
  return { value, isolateMs: performance.now() - t0 };
}

/**
 * Holds one {@link RouteScenario} between calls, so an index filled once is timed by many batches.
 * A Durable Object, like the region object whose work it reproduces: single-threaded, with its
 * state in memory.
 */
export class RouteBench extends DurableObject<BenchEnv> {
  private scenario: RouteScenario | undefined;

  setup(nodes: number, entries: number): { nodes: number; entries: number } {
    // Drop the previous index before building the next: only one is ever in memory.
    this.scenario = undefined;
    this.scenario = new RouteScenario({ nodes, entries }, getPool());
    return this.scenario.shape;
  }

  fill(requests: number): { entries: number; full: boolean; routed: number } {
    return this.current().fill(requests);
  }

  /**
   * Does nothing with what it is sent: called with a pair's arguments (see {@link load}), it is the
   * RPC's own cost (the call, structured-clone of the arguments and the answer), the floor under a pair.
   */
  ping(_a: unknown, _b: unknown): boolean {
    return true;
  }

  run(k: number): { sink: number; isolateMs: number } {
    const scenario = this.current();
    const { value, isolateMs: ms } = isolateMs(() => scenario.run(k));
    return { sink: value, isolateMs: ms };
  }

  entries(): number {
    return this.current().entries();
  }

  private current(): RouteScenario {
    if (!this.scenario) throw new Error("RouteBench: call setup first");
    return this.scenario;
  }
}

let pairSeq = 0;

/** The region under test, as the worker's configuration loader builds it (its RegionInit included). */
function benchRegion(env: BenchEnv): LoadedRegion {
  // The loader reads only WARMPATH_CONFIG and the secrets it names, all bound by run.ts; the rest
  // of the production Env (analytics, rate limiter) is not used on this path.
  const region = loadConfig(env as unknown as Env).regionByName.get(THROUGHPUT_REGION);
  if (!region) throw new Error(`region ${THROUGHPUT_REGION} is not configured`);
  return region;
}

/**
 * One request's bookkeeping with the region object, as src/region/dispatch.ts does it: `route`
 * (with the region's init, validated and applied by the object), then `complete` on the session it
 * returned, with the answer's usage. The prompt is pool prompt `i`; the answer reports the predicted cached tokens as cached.
 */
async function pair(env: BenchEnv, region: LoadedRegion, i: number): Promise<boolean> {
  const stub = regionStub(env as unknown as Env, region);
  const p = getPool()[i % getPool().length]!;
  const routed = await stub.route(region.init, {
    requestId: `bench-${pairSeq++}`,
    tenant: THROUGHPUT_TENANT,
    tenantWeight: 1,
    model: ROUTE_MODEL,
    hashes: p.hashes,
    promptTokens: p.promptTokens,
    sessionKey: `${THROUGHPUT_TENANT}:u${i % SESSION_HINTS}`,
  });
  if (!routed.ok) return false;
  const usage = {
    promptTokens: p.promptTokens,
    cachedTokens: Math.floor(routed.predictedCachedTokens),
    completionTokens: COMPLETION_TOKENS,
  };
  // First byte and completion are calls of the session `route` opened (one billed request).
  return await routed.session.complete({ status: "ok", usage });
}

/**
 * The RPC floor under {@link pair}: the same two calls with the same arguments (the region's init
 * and the route request, then a ticket and the outcome) to an object that does nothing with them.
 */
async function floorPair(env: BenchEnv, region: LoadedRegion, i: number): Promise<boolean> {
  const stub = env.ROUTE_BENCH.getByName("rpc-floor");
  const p = getPool()[i % getPool().length]!;
  const request = {
    requestId: `bench-${pairSeq++}`,
    tenant: THROUGHPUT_TENANT,
    tenantWeight: 1,
    model: ROUTE_MODEL,
    hashes: p.hashes,
    promptTokens: p.promptTokens,
    sessionKey: `${THROUGHPUT_TENANT}:u${i % SESSION_HINTS}`,
  };
  await stub.ping(region.init, request);
  const usage = { promptTokens: p.promptTokens, cachedTokens: 0, completionTokens: COMPLETION_TOKENS };
  return await stub.ping("0.1", { status: "ok", usage });
}

/** `n` pairs (or floor pairs) from `c` chains, each awaiting its pair before starting the next (a closed loop). */
async function load(env: BenchEnv, c: number, n: number, floor: boolean): Promise<number> {
  const region = benchRegion(env);
  const one = floor ? floorPair : pair;
  let next = 0;
  let ok = 0;
  const chain = async (): Promise<void> => {
    while (next < n) if (await one(env, region, next++)) ok++;
  };
  await Promise.all(Array.from({ length: c }, chain));
  return ok;
}

function intParam(url: URL, name: string): number {
  const v = Number(url.searchParams.get(name));
  if (!Number.isSafeInteger(v) || v < 0) throw new Error(`query parameter ${name} must be a non-negative integer`);
  return v;
}

export default {
  async fetch(request: Request, env: BenchEnv): Promise<Response> {
    const url = new URL(request.url);
    const bench = () => env.ROUTE_BENCH.getByName("route-bench");
    switch (url.pathname) {
      case "/noop":
        return new Response("ok");
      case "/hash": {
        const chars = intParam(url, "chars");
        let prompt = prompts.get(chars);
        if (!prompt) prompts.set(chars, (prompt = chatPrompt(chars)));
        const p = prompt;
        const { value, isolateMs: ms } = isolateMs(() => hashBatch(p, intParam(url, "k")));
        return Response.json({ ...value, isolateMs: ms });
      }
      case "/validate": {
        const api = url.searchParams.get("api") as ValidateApi;
        if (!VALIDATE_APIS.includes(api)) throw new Error(`api must be one of ${VALIDATE_APIS.join(", ")}`);
        const items = intParam(url, "items");
        const how = url.searchParams.get("how") === "zod" ? "zod" : "fast";
        let body = bodies.get(`${api}:${items}`);
        // Parsed from its JSON text, as the edge's body is: plain objects only.
        if (!body) bodies.set(`${api}:${items}`, (body = JSON.parse(JSON.stringify(agenticBody(api, items))) as Record<string, unknown>));
        const b = body;
        const { value, isolateMs: ms } = isolateMs(() => validateBatch(api, b, how, intParam(url, "k")));
        return Response.json({ ...value, isolateMs: ms });
      }
      case "/route/setup":
        return Response.json(await bench().setup(intParam(url, "nodes"), intParam(url, "entries")));
      case "/route/fill":
        return Response.json(await bench().fill(intParam(url, "requests")));
      case "/route/run":
        return Response.json(await bench().run(intParam(url, "k")));
      case "/pair": {
        const t0 = performance.now();
        const ok = await pair(env, benchRegion(env), intParam(url, "i"));
        return Response.json({ ok, isolateMs: performance.now() - t0 });
      }
      case "/load": {
        const t0 = performance.now();
        const ok = await load(env, Math.max(1, intParam(url, "c")), intParam(url, "n"), url.searchParams.get("floor") === "1");
        return Response.json({ ok, isolateMs: performance.now() - t0 });
      }
      default:
        return new Response("not found", { status: 404 });
    }
  },
} satisfies ExportedHandler<BenchEnv>;
