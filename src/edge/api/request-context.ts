/**
 * The per-request context handed from a Hono handler to the routing and proxy code: one object
 * instead of values unpacked from Hono's context and passed one by one.
 */
import type { Context } from "hono";
import type { AppEnv } from "../app-types.ts";
import type { LoadedConfig } from "../../config/load.ts";
import type { TenantConfig } from "../../config/schema.ts";
import type { EdgeTrace } from "../trace.ts";

/** The part of the execution context the proxy needs: work that outlives the response. */
export interface WaitUntil {
  waitUntil(promise: Promise<unknown>): void;
}

export interface RequestContext {
  request: Request;
  env: Env;
  ctx: WaitUntil;
  config: LoadedConfig;
  tenant: TenantConfig;
  requestId: string;
  /** When the request arrived (ms), for the log line's duration. */
  startedAt: number;
  /** The request's trace (middleware/trace.ts). */
  trace: EdgeTrace;
}

/** The context of an authenticated tenant request. */
export function requestContext(c: Context<AppEnv>): RequestContext {
  return {
    request: c.req.raw,
    env: c.env,
    ctx: c.executionCtx,
    config: c.get("config"),
    tenant: c.get("tenant"),
    requestId: c.get("requestId"),
    startedAt: Date.now(),
    trace: c.get("trace"),
  };
}
