/** Helpers shared by the workerd tests: calling the worker, registering fake nodes, reading streams. */
import { exports } from "cloudflare:workers";
import { ALL_REGIONS_BINDING } from "../src/contracts/topology.ts";
import { createRegionApp } from "../src/region/app.ts";
import { ACME_KEY, TEST_NODE_TOKEN } from "./fixtures/config.ts";

export const BASE = "http://localhost";

/** A `cf` object as Cloudflare's edge would attach it (offline it is a placeholder). */
export const CF_FRANKFURT = { latitude: "50.11", longitude: "8.68", continent: "EU", country: "DE" };
export const CF_VIRGINIA = { latitude: "38.9", longitude: "-77.0", continent: "NA", country: "US" };

export function call(path: string, init: RequestInit & { cf?: Record<string, unknown> } = {}): Promise<Response> {
  return exports.default.fetch(new Request(BASE + path, init as RequestInit));
}

export function chat(body: unknown, options: { key?: string; headers?: Record<string, string>; cf?: Record<string, unknown> } = {}) {
  return call("/v1/chat/completions", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${options.key ?? ACME_KEY}`,
      ...options.headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
    cf: options.cf ?? CF_FRANKFURT,
  });
}

export interface FakeNode {
  id: string;
  region: string;
  mode?: string;
  models: string[];
  kvCapacityTokens?: number;
  running?: number;
  waiting?: number;
  kvUsage?: number;
  bootId?: string;
  /** The engine it reports (default: none, which the router takes for `other`). */
  engine?: string;
}

export function nodeUrl(n: { id: string; mode?: string }): string {
  return `http://${n.id}.${n.mode ?? "ok"}.node.test`;
}

/** Node secrets handed out at registration, by `region/id` (as a node's agent keeps its own). */
const nodeSecrets = new Map<string, string>();

/** The secret the router gave this node when it registered (through {@link report}), if any. */
export function nodeSecret(region: string, id: string): string | undefined {
  return nodeSecrets.get(`${region}/${id}`);
}

function postReport(n: FakeNode, token: string): Promise<Response> {
  return call("/v1/nodes/report", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({
      node_id: n.id,
      region: n.region,
      url: nodeUrl(n),
      models: n.models,
      kv_capacity_tokens: n.kvCapacityTokens ?? 200_000,
      running: n.running ?? 0,
      waiting: n.waiting ?? 0,
      kv_usage: n.kvUsage ?? 0,
      ...(n.bootId ? { boot_id: n.bootId } : {}),
      ...(n.engine ? { engine: n.engine } : {}),
    }),
  });
}

/**
 * Posts a report for `n`, as its agent would: with the node's secret once it has one (kept from
 * the registration answer), else with the region token (`token`), registering it. A secret the
 * router no longer knows (the node expired or was removed) is dropped and the node registered again.
 * An explicit `token` is sent as given.
 */
export async function report(n: FakeNode, token?: string): Promise<Response> {
  const key = `${n.region}/${n.id}`;
  const secret = token === undefined ? nodeSecrets.get(key) : undefined;
  let res = await postReport(n, token ?? secret ?? TEST_NODE_TOKEN);
  if (secret !== undefined && res.status === 401) {
    nodeSecrets.delete(key);
    await res.arrayBuffer();
    res = await postReport(n, TEST_NODE_TOKEN);
  }
  if (res.status === 200) {
    const body = await res.clone().json<{ node_secret?: string }>();
    if (body.node_secret) nodeSecrets.set(key, body.node_secret);
  }
  return res;
}

export async function registerAll(nodes: FakeNode[]): Promise<void> {
  for (const n of nodes) {
    const r = await report(n);
    if (r.status !== 200) throw new Error(`report failed: ${r.status} ${await r.text()}`);
  }
}

/** Removes a node as its agent would (`DELETE` with its node secret); returns the answer. */
export async function deregister(region: string, id: string): Promise<Response> {
  const secret = nodeSecrets.get(`${region}/${id}`);
  const res = await call(`/v1/nodes/${region}/${id}`, { method: "DELETE", headers: { authorization: `Bearer ${secret ?? "no-secret"}` } });
  if (res.status === 200) nodeSecrets.delete(`${region}/${id}`);
  return res;
}

/** A long system prompt (~6,000 characters, ~12 blocks). */
export function longSystemPrompt(seed: string): string {
  let out = `You are the assistant of ${seed}. `;
  for (let i = 0; out.length < 6000; i++) out += `Rule ${i} of ${seed}: answer precisely, cite sources, keep a friendly tone. `;
  return out;
}

/** Reads a body to the end, returning each chunk's text and arrival time. */
export async function readChunks(response: Response): Promise<{ text: string; at: number }[]> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const out: { text: string; at: number }[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return out;
    out.push({ text: decoder.decode(value, { stream: true }), at: Date.now() });
  }
}

/**
 * `environment` with the region service bound to an in-process region app that sees the same
 * bindings: for tests that run the edge with another configuration, secrets or dataset (the local
 * composition's real binding reaches the region service with the test worker's own env). The
 * region's background work (completions, decision lines) goes to `ctx`, as one request's would.
 */
export function withRegionService(environment: Env, ctx: ExecutionContext): Env {
  const app = createRegionApp();
  const bound = { ...environment } as unknown as Record<string, unknown>;
  bound[ALL_REGIONS_BINDING] = {
    fetch: (input: RequestInfo | URL, init?: RequestInit) => app.fetch(new Request(input, init), bound as unknown as Env, ctx),
  };
  return bound as unknown as Env;
}
