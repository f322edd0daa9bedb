/**
 * The work bench/workerd times, shared by the bench worker (inside workerd) and the Node driver
 * (the same code under Node, for comparison): chat prompts to canonicalise and hash, a region
 * router filled to a given index size, the configuration of the region whose Durable Object the
 * throughput test calls, and request bodies the edge validates. Pure TypeScript over src/core,
 * src/edge/api/schemas.ts and bench/text.ts, so it runs unchanged in both runtimes and every
 * figure is a figure of the production code.
 */
import { DEFAULT_PREFIX_SETTINGS, hashCanonicalText, prefixKey } from "../../src/core/prefix.ts";
import type { CanonicalPrompt } from "../../src/core/canonical.ts";
import { DEFAULT_REGION_SETTINGS, RegionRouter } from "../../src/core/region/index.ts";
import { chatPrompt, entityText, KIND, mix32 } from "../text.ts";
import { chatCompletionSchema, fastSchemas, messagesSchema, responsesSchema } from "../../src/edge/api/schemas.ts";

export { chatPrompt };

// ---------------------------------------------------------------------------------------------
// 1. Prefix hashing

/** Prompt sizes hashed, in characters (ASCII, so also bytes): 1 KB, 10 KB, 100 KB, 1 MB. */
export const HASH_SIZES = [1_000, 10_000, 100_000, 1_000_000] as const;

/** The cache namespace the worker derives for a tenant's request (src/edge/api/inference.ts: `tenant:<id>`). */
export const HASH_NAMESPACE = { model: "bench-model", namespace: "tenant:bench" };

/**
 * Canonicalises and hashes `prompt` `k` times, exactly as the worker does once per request
 * (`prefixKey` with the default prefix settings). Returns the blocks of the last call plus a sum
 * the caller keeps, so no call can be optimised away.
 */
export function hashBatch(prompt: CanonicalPrompt, k: number): { blocks: number; sink: number } {
  let sink = 0;
  let blocks = 0;
  for (let i = 0; i < k; i++) {
    const key = prefixKey(prompt, HASH_NAMESPACE, DEFAULT_PREFIX_SETTINGS);
    blocks = key.hashes.length;
    sink += key.promptTokens + blocks;
  }
  return { blocks, sink };
}

// ---------------------------------------------------------------------------------------------
// 2. Routing decisions on a filled index

/** Characters of each routed prompt: ~2,500 tokens, 20 blocks (bench/route-cost.ts's shorter size). */
export const ROUTE_PROMPT_CHARS = 10_000;
/** Distinct prompts the timed requests cycle through (as bench/route-cost.ts). */
export const ROUTE_POOL_SIZE = 2_000;
/** System prompts the pool's prompts share (each is half a prompt): realistic partial matches. */
export const SYSTEM_PROMPTS = 20;
/** Requests kept in flight: each gets its first byte and completes when this many newer ones have arrived. */
export const IN_FLIGHT = 64;
/** Simulated time between requests, ms: 500 requests/s, a busy region (as bench/route-cost.ts). */
export const STEP_MS = 2;
/** Session keys cycled through (a hint the policy may use among equal choices). */
const SESSIONS = 500;
/**
 * Each node's KV capacity is set to this multiple of its share of the index cap, so that the
 * global cap (`maxIndexEntries`), not a node's own capacity, is what bounds the filled index.
 */
const CAPACITY_HEADROOM = 2;
/** Filling stops once the index holds this share of its cap (the last percent fills slowly, as LRUs evict). */
export const FILL_TARGET = 0.97;
/** Model every node serves. */
export const ROUTE_MODEL = "bench-model";

const blockTokens = DEFAULT_PREFIX_SETTINGS.blockChars / DEFAULT_PREFIX_SETTINGS.charsPerToken;

/** A routable prompt: its chained block hashes and estimated tokens. */
export interface PoolPrompt {
  hashes: string[];
  promptTokens: number;
}

/**
 * The timed prompts: each is one of {@link SYSTEM_PROMPTS} system prompts (half its length) and
 * its own tail, hashed by the production hasher (as bench/route-cost.ts builds them).
 */
export function routePool(size: number = ROUTE_POOL_SIZE, chars: number = ROUTE_PROMPT_CHARS): PoolPrompt[] {
  const out: PoolPrompt[] = [];
  for (let i = 0; i < size; i++) {
    const half = Math.floor(chars / 2);
    const text = entityText(KIND.system, i % SYSTEM_PROMPTS, half) + entityText(KIND.userTurn, i, chars - half);
    const key = hashCanonicalText(text, "bench", DEFAULT_PREFIX_SETTINGS);
    out.push({ hashes: key.hashes, promptTokens: key.promptTokens });
  }
  return out;
}

/** A 16-hex-digit block hash unique to `n` (mix32 is a bijection on 32-bit integers), shaped like a real one. */
function syntheticHash(n: number): string {
  return (mix32(n) >>> 0).toString(16).padStart(8, "0") + (mix32(n ^ 0x5bd1e995) >>> 0).toString(16).padStart(8, "0");
}

/** The shape of an index to time routing against. */
export interface RouteShape {
  nodes: number;
  /** Node-block entries the index is filled to (and capped at). */
  entries: number;
}

/**
 * A region router on `nodes` nodes whose prefix index is capped at, and filled to, `entries`
 * node-block entries; then timed on the pool's prompts. The router is the production
 * `RegionRouter` with bench/route-cost.ts's settings (warmpath policy; no in-flight or queue
 * ceiling, so the synthetic load never refuses a request).
 */
export class RouteScenario {
  readonly shape: RouteShape;
  private readonly router: RegionRouter;
  private readonly pool: readonly PoolPrompt[];
  private readonly inflight: string[] = [];
  private now = 0;
  private seq = 0;
  private fillSeq = 0;
  private cursor = 0;

  constructor(shape: RouteShape, pool: readonly PoolPrompt[]) {
    this.shape = shape;
    this.pool = pool;
    this.router = new RegionRouter({
      ...DEFAULT_REGION_SETTINGS,
      name: "bench",
      blockTokens,
      maxIndexEntries: shape.entries,
      maxInflightPerNode: Infinity,
      maxQueueSeconds: Infinity,
    });
    const perNodeBlocks = Math.ceil((shape.entries / shape.nodes) * CAPACITY_HEADROOM);
    for (let n = 0; n < shape.nodes; n++) {
      this.router.configureNode(
        {
          id: `node-${n}`,
          url: `http://n${n}`,
          models: [ROUTE_MODEL],
          kvCapacityTokens: perNodeBlocks * blockTokens,
          static: true,
          lastSeen: 0,
        },
        0,
      );
    }
  }

  /** Node-block entries the index holds now. */
  entries(): number {
    return this.router.snapshot(this.now).index.entries;
  }

  /**
   * Routes up to `requests` fill requests, stopping early once the index holds
   * {@link FILL_TARGET} of its cap. Each is a prompt of the pool's size whose every block is new:
   * a cold prompt, which the policy spreads over all the nodes (prompts sharing a system prompt
   * would go to that prompt's holders, and on 256 nodes leave most nodes empty). Returns the
   * entries held, whether the target was reached and how many requests were routed.
   */
  fill(requests: number): { entries: number; full: boolean; routed: number } {
    const target = Math.floor(this.shape.entries * FILL_TARGET);
    const CHECK_EVERY = 1_000;
    const { hashes: like, promptTokens } = this.pool[0]!;
    let routed = 0;
    for (let i = 0; i < requests; i++, routed++) {
      const hashes = like.map((_, b) => syntheticHash(this.fillSeq * like.length + b));
      this.fillSeq++;
      this.step(hashes, promptTokens);
      if (i % CHECK_EVERY === CHECK_EVERY - 1 && this.entries() >= target) {
        routed++;
        break;
      }
    }
    const entries = this.entries();
    return { entries, full: entries >= target, routed };
  }

  /**
   * `k` timed requests: each routes the next pool prompt, then releases the request
   * {@link IN_FLIGHT} requests older (first byte, then completion), as bench/route-cost.ts does.
   * Returns a sum the caller keeps, so the work cannot be optimised away.
   */
  run(k: number): number {
    let sink = 0;
    for (let i = 0; i < k; i++) {
      const p = this.pool[this.cursor++ % this.pool.length]!;
      sink += this.step(p.hashes, p.promptTokens);
    }
    return sink;
  }

  private step(hashes: string[], promptTokens: number): number {
    const i = this.seq++;
    this.now += STEP_MS;
    const r = this.router.route(
      { requestId: String(i), model: ROUTE_MODEL, hashes, promptTokens, sessionKey: `u${i % SESSIONS}` },
      this.now,
    );
    if (r.ok) this.inflight.push(r.ticket);
    if (this.inflight.length > IN_FLIGHT) {
      const done = this.inflight.shift()!;
      this.router.firstByte(done, this.now);
      this.router.complete(done, { status: "ok" }, this.now);
    }
    return r.ok ? r.matchBlocks : -1;
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Throughput of the real region Durable Object

/** The region the throughput test routes in, and its static nodes. */
export const THROUGHPUT_REGION = "bench";
export const THROUGHPUT_NODES = 8;
/** The secret binding the configuration names for the region's node token (required by the loader). */
export const NODE_TOKEN_BINDING = "NODE_TOKEN_BENCH";
/** The tenant the throughput requests are made as. */
export const THROUGHPUT_TENANT = "bench";

/**
 * The deployment configuration (`WARMPATH_CONFIG`) of the throughput test: one region of
 * {@link THROUGHPUT_NODES} static nodes with every other setting at its default (the default
 * index cap, 262,144 entries, and the warmpath policy). The bench worker loads it with the
 * production loader (src/config/load.ts), so the region object receives exactly the `RegionInit`
 * a deployment would send it.
 */
export const THROUGHPUT_CONFIG = {
  mode: "development",
  regions: [
    {
      name: THROUGHPUT_REGION,
      location: { lat: 50.11, lon: 8.68, continent: "EU" },
      models: [ROUTE_MODEL],
      node_token_secret: NODE_TOKEN_BINDING,
      nodes: Array.from({ length: THROUGHPUT_NODES }, (_, n) => ({
        id: `node-${n}`,
        url: `http://node-${n}.bench.invalid`,
        models: [ROUTE_MODEL],
        kv_capacity_tokens: 500_000,
      })),
    },
  ],
  // No request authenticates (the bench worker calls the object directly), but the loader needs
  // a tenant: its key hash is an arbitrary 64-hex-digit value that no key matches in practice.
  tenants: [{ id: THROUGHPUT_TENANT, api_key_sha256: ["0".repeat(64)] }],
};

// ---------------------------------------------------------------------------------------------
// 4. Validating a request body at the edge

/** The APIs whose bodies carry long lists: chat's messages, Anthropic's messages, the Responses API's input items. */
export const VALIDATE_APIS = ["chat", "messages", "responses"] as const;
export type ValidateApi = (typeof VALIDATE_APIS)[number];
/** Items in a body: a short exchange (a chat turn: a system prompt and a question), and an agentic session of 400 (tool calls and their results). */
export const VALIDATE_ITEMS = [2, 400] as const;

const FAST = { chat: fastSchemas.chat, messages: fastSchemas.messages, responses: fastSchemas.responses };
const ZOD = { chat: chatCompletionSchema, messages: messagesSchema, responses: responsesSchema };

/**
 * A body of `items` list items in `api`'s shape: the first the user's task, then an agent's
 * alternating tool calls and their results (each result ~400 characters), as a coding agent
 * sends them turn after turn; a plain turn for 2 items.
 */
export function agenticBody(api: ValidateApi, items: number): Record<string, unknown> {
  const result = (i: number) => `line ${i}: ${"const x = compute(y);\n".repeat(20)}`;
  const list: unknown[] = [];
  for (let i = 0; i < items; i++) {
    const first = i === 0;
    const call = i % 2 === 1;
    if (api === "chat") {
      list.push(
        first
          ? { role: "system", content: "You are a careful coding agent." }
          : call
            ? {
                role: "assistant",
                content: null,
                tool_calls: [{ id: `c${i}`, type: "function", function: { name: "read", arguments: `{"path":"src/f${i}.ts"}` } }],
              }
            : { role: "tool", tool_call_id: `c${i - 1}`, content: result(i) },
      );
    } else if (api === "messages") {
      list.push(
        first
          ? { role: "user", content: "Fix the failing test." }
          : call
            ? { role: "assistant", content: [{ type: "tool_use", id: `t${i}`, name: "read", input: { path: `src/f${i}.ts` } }] }
            : { role: "user", content: [{ type: "tool_result", tool_use_id: `t${i - 1}`, content: result(i) }] },
      );
    } else {
      list.push(
        first
          ? { role: "user", content: [{ type: "input_text", text: "Fix the failing test." }] }
          : call
            ? { type: "function_call", call_id: `c${i}`, name: "read", arguments: `{"path":"src/f${i}.ts"}` }
            : { type: "function_call_output", call_id: `c${i - 1}`, output: result(i) },
      );
    }
  }
  if (api === "chat" && items === 2) list[1] = { role: "user", content: "Summarise the report in three sentences." };
  const tools = [
    { type: "function", function: { name: "read", parameters: { type: "object", properties: { path: { type: "string" } } } } },
  ];
  if (api === "chat") return { model: "bench-model", stream: true, messages: list, tools };
  if (api === "messages")
    return { model: "bench-model", max_tokens: 1024, stream: true, messages: list, tools: [{ name: "read", input_schema: {} }] };
  return { model: "bench-model", stream: true, input: list, tools: [{ type: "function", name: "read", parameters: {} }] };
}

/**
 * Validates `body` `k` times as the edge does (src/edge/api/inference.ts: `fast`, its fast schema,
 * whose lists are checked by one loop each) or with its zod schema alone (`zod`, what the edge did
 * before). Throws if a body is refused: a refused body would time the wrong path.
 */
export function validateBatch(api: ValidateApi, body: unknown, how: "fast" | "zod", k: number): { sink: number } {
  const schema: { safeParse(v: unknown): { success: boolean } } = how === "fast" ? FAST[api] : ZOD[api];
  let sink = 0;
  for (let i = 0; i < k; i++) {
    if (!schema.safeParse(body).success) throw new Error(`${api} body refused by the ${how} schema`);
    sink++;
  }
  return { sink };
}
