/**
 * A node's control endpoints, for tests and demos: GET /admin/state, and POST /admin/faults,
 * /admin/restart and /admin/crash; and POST /reset_prefix_cache, named as vLLM names it. Each POST reads an optional JSON object body first, so a bad
 * body is a 400 even on an unknown admin path.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { FaultsSchema } from "./config.ts";
import { RequestError } from "./prompt.ts";
import { parseJsonObject, readBody, sendError, sendJson } from "./http-io.ts";
import type { NodeRuntime } from "./node-runtime.ts";

/** What the control endpoints can do to the node's process (implemented by node.ts). */
export interface Lifecycle {
  crash(): Promise<void>;
  restart(downMs: number): Promise<void>;
}

async function readOptionalObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const text = await readBody(req);
  return text.trim() === "" ? {} : parseJsonObject(text);
}

/** A field that, when present, must be a number >= 0 (milliseconds). */
function optionalMs(body: Record<string, unknown>, key: string): number | undefined {
  const v = body[key];
  if (v === undefined) return undefined;
  if (typeof v !== "number" || v < 0) throw new RequestError(`${key} must be a number >= 0`, key);
  return v;
}

export function getState(node: NodeRuntime, res: ServerResponse): void {
  sendJson(res, 200, node.state());
}

export async function postFaults(node: NodeRuntime, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readOptionalObject(req);
  const parsed = FaultsSchema.partial().safeParse(body);
  if (!parsed.success) {
    const msg = parsed.error.issues.map((i) => `${i.path.join(".") || "(body)"}: ${i.message}`).join("; ");
    throw new RequestError(msg);
  }
  sendJson(res, 200, { faults: node.setFaults(parsed.data) });
}

/**
 * Runs a restart or crash after its answer was sent: nobody awaits it, so a failure (the node's
 * port taken while it was down) is logged here rather than left to crash the fleet's process.
 */
function detached(node: NodeRuntime, what: string, work: () => Promise<void>): void {
  work().catch((e: unknown) =>
    console.error(JSON.stringify({ event: "node_lifecycle_failed", node: node.o.id, what, message: String(e) })),
  );
}

export async function postRestart(node: NodeRuntime, life: Lifecycle, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const downMs = optionalMs(await readOptionalObject(req), "down_ms") ?? 0;
  // Answer first, then die: the restart closes this connection too.
  res.on("finish", () => detached(node, "restart", () => life.restart(downMs)));
  sendJson(res, 200, { restarting: true, down_ms: downMs, old_boot_id: node.bootId });
}

export async function postCrash(node: NodeRuntime, life: Lifecycle, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const after = optionalMs(await readOptionalObject(req), "restart_after_ms");
  res.on("finish", () => {
    detached(node, "crash", async () => {
      await life.crash();
      if (after !== undefined) node.autoRestart = setTimeout(() => detached(node, "restart", () => life.restart(0)), after);
    });
  });
  sendJson(res, 200, { crashing: true, restart_after_ms: after ?? null });
}

/** Drops the cached prefixes no running request pins, keeping the process and its boot id (vLLM's endpoint). */
export function postResetPrefixCache(node: NodeRuntime, res: ServerResponse): void {
  sendJson(res, 200, { dropped_blocks: node.engine.cache.reset(), boot_id: node.bootId });
}

/** POST /admin/<anything else>: the body is still read and checked, then 404. */
export async function postUnknownAdmin(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  await readOptionalObject(req);
  sendError(res, 404, `no such admin endpoint ${path}`, "NotFoundError");
}
