/**
 * The edge's side of the edge -> region worker boundary (src/contracts/region-service.ts): finds
 * a region's service binding, sends it a message with the contract version, and tells a region
 * worker's own answer from a failure to reach one. Every failure here is a failed region: the
 * caller tries the next region (dispatch) or answers 503 for that region (node and admin API).
 *
 * Every message is signed with the internal secret (src/http/internal-auth.ts; docs/SECURITY.md):
 * a region worker takes no other. A region worker that refuses the signature (the two hold
 * different secrets: a rotation done out of order) is a failed region, logged
 * `region_auth_refused` with the failure (never a secret).
 */
import type { z } from "zod";
import type { LoadedRegion } from "../config/load.ts";
import {
  CONTRACT_HEADER,
  REFUSAL_HEADER,
  REGION_CONTRACT_VERSION,
  regionRefusalSchema,
  type RegionRefusal,
} from "../contracts/region-service.ts";
import { ALL_REGIONS_BINDING, regionBindingName } from "../contracts/topology.ts";
import { ApiError } from "../http/errors.ts";
import { InternalSecretMissing, internalAuthHeader } from "../http/internal-auth.ts";
import { AUTH_REFUSAL_HEADER } from "../core/internal-auth.ts";

/** The host of the URLs sent over a binding: a binding ignores it, but a Request needs one. */
const BINDING_ORIGIN = "https://region.warmpath.internal";

/** A region worker could not be reached, or answered as no region worker of this contract would. */
export class RegionUnavailable extends Error {
  readonly region: string;
  readonly why: "no-binding" | "unreachable" | "contract-mismatch" | "not-a-region-answer" | "unauthenticated";

  constructor(region: string, why: RegionUnavailable["why"], detail: string) {
    super(`region worker for ${region}: ${detail}`);
    this.region = region;
    this.why = why;
  }
}

/**
 * The region's worker, as bound to this edge: `REGION_WORKER_<REGION>`, else the local
 * composition's binding to a service of every region (ALL_REGIONS_BINDING), else undefined.
 */
export function regionWorker(env: Env, region: LoadedRegion): Fetcher | undefined {
  const bindings = env as unknown as Record<string, unknown>;
  const b = bindings[regionBindingName(region.config.name)] ?? bindings[ALL_REGIONS_BINDING];
  return b !== null && typeof b === "object" && typeof (b as Fetcher).fetch === "function" ? (b as Fetcher) : undefined;
}

/**
 * Sends one message to the region's worker. Resolves with the region worker's own answer (it
 * carries a contract version), or a {@link RegionRefusal} it gave; throws {@link RegionUnavailable}
 * when there is no binding, the call fails, or what came back is not a region worker's answer (the
 * runtime's error page for a worker that threw or is being deployed, an older worker's 404).
 */
export async function callRegion(
  env: Env,
  region: LoadedRegion,
  path: string,
  init: { method: "GET" | "POST"; body?: Uint8Array | string; contentType?: string },
): Promise<{ ok: true; response: Response } | { ok: false; refusal: RegionRefusal }> {
  const name = region.config.name;
  const worker = regionWorker(env, region);
  if (!worker) throw new RegionUnavailable(name, "no-binding", `no service binding ${regionBindingName(name)}`);
  let signature: Record<string, string>;
  try {
    signature = await internalAuthHeader(env, "edge", init.method, BINDING_ORIGIN + path, init.body);
  } catch (e) {
    if (!(e instanceof InternalSecretMissing)) throw e;
    throw new RegionUnavailable(name, "unauthenticated", e.message);
  }
  const headers: Record<string, string> = { [CONTRACT_HEADER]: String(REGION_CONTRACT_VERSION), ...signature };
  if (init.contentType) headers["content-type"] = init.contentType;
  let response: Response;
  try {
    response = await worker.fetch(BINDING_ORIGIN + path, { method: init.method, headers, body: init.body ?? null });
  } catch (e) {
    throw new RegionUnavailable(name, "unreachable", `unreachable (${String(e).slice(0, 200)})`);
  }
  const authRefused = response.headers.get(AUTH_REFUSAL_HEADER);
  if (authRefused !== null) {
    await response.body?.cancel().catch(() => {});
    console.error(
      JSON.stringify({ event: "region_auth_refused", region: name, status: response.status, failure: authRefused.slice(0, 32) }),
    );
    throw new RegionUnavailable(name, "unauthenticated", `refused this edge's signature (${response.status} ${authRefused.slice(0, 32)})`);
  }
  const version = response.headers.get(CONTRACT_HEADER);
  if (version === null) {
    await response.body?.cancel().catch(() => {});
    throw new RegionUnavailable(name, "not-a-region-answer", `HTTP ${response.status} without a contract version`);
  }
  if (response.headers.has(REFUSAL_HEADER)) {
    const refusal = regionRefusalSchema.safeParse(await response.json().catch(() => undefined));
    if (!refusal.success) throw new RegionUnavailable(name, "not-a-region-answer", "a refusal that does not parse");
    if (refusal.data.reason === "contract-mismatch") {
      console.error(
        JSON.stringify({ event: "region_contract_mismatch", region: name, edge: REGION_CONTRACT_VERSION, message: refusal.data.message }),
      );
      throw new RegionUnavailable(name, "contract-mismatch", refusal.data.message);
    }
    return { ok: false, refusal: refusal.data };
  }
  return { ok: true, response };
}

/**
 * A JSON answer from the region's worker, for the node and admin APIs: a region that cannot be
 * reached or refuses is 503 `region_unavailable` naming the region (never the detail: it is logged).
 */
export async function regionJson<T>(env: Env, region: LoadedRegion, path: string, body?: unknown): Promise<T> {
  const name = region.config.name;
  try {
    const answer = await callRegion(
      env,
      region,
      path,
      body === undefined ? { method: "GET" } : { method: "POST", body: JSON.stringify(body), contentType: "application/json" },
    );
    if (answer.ok && answer.response.ok) return (await answer.response.json()) as T;
    const detail = answer.ok ? `HTTP ${answer.response.status}` : `${answer.refusal.reason}: ${answer.refusal.message}`;
    if (answer.ok) await answer.response.body?.cancel().catch(() => {});
    throw new RegionUnavailable(name, "not-a-region-answer", detail);
  } catch (e) {
    if (!(e instanceof RegionUnavailable)) throw e;
    console.error(JSON.stringify({ event: "region_unavailable", region: name, path, message: e.message }));
    throw ApiError.regionUnavailable(`Region '${name}' is unavailable right now; retry shortly`);
  }
}

/**
 * A region worker's JSON answer read through its contract (src/contracts/admin.ts): one that does
 * not parse is no region's answer (a worker of another version mid-deploy), logged, and 503 to
 * the caller as an unreachable region is.
 */
export async function regionAnswer<S extends z.ZodType>(env: Env, region: LoadedRegion, path: string, schema: S): Promise<z.output<S>> {
  const parsed = schema.safeParse(await regionJson<unknown>(env, region, path));
  if (parsed.success) return parsed.data;
  const name = region.config.name;
  const issue = parsed.error.issues[0];
  console.error(
    JSON.stringify({ event: "region_answer_refused", region: name, path, issue: `${issue?.path.join(".")}: ${issue?.message}` }),
  );
  throw ApiError.regionUnavailable(`Region '${name}' answered in a shape this edge does not read; retry shortly`);
}
