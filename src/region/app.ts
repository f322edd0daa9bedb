/**
 * The region worker's service: what the edge asks a region's worker over its service binding
 * (src/contracts/region-service.ts). It runs by the region's GPUs (Cloudflare placement), so the
 * object calls, the node calls and the retries between nodes all stay within the region, and the
 * request crosses the long haul once, edge to here.
 *
 * Not public: a deployed region worker has no route and no workers.dev address (scripts/deploy.ts),
 * so only bindings reach it; it still validates every message, and refuses a contract version it
 * does not speak or a region it does not serve before it touches anything.
 */
import { Hono, type Context } from "hono";
import { loadConfig, regionIngestStub, regionShardStubs, type LoadedConfig, type LoadedRegion } from "../config/load.ts";
import { RESTART_REASON } from "../contracts/region-object.ts";
import {
  CONTRACT_HEADER,
  MAX_DISPATCH_META_BYTES,
  MIN_REGION_CONTRACT_VERSION,
  REFUSAL_HEADER,
  REGION_CONTRACT_VERSION,
  decodeDispatch,
  dispatchRequestSchema,
  removeRequestSchema,
  reportRequestSchema,
  type RegionRefusal,
} from "../contracts/region-service.ts";
import { REGION_VAR } from "../contracts/topology.ts";
import { mergeHistories, mergeSnapshots } from "../core/region/merge.ts";
import { readBytesLimited } from "../http/body.ts";
import { serveInRegion } from "./dispatch.ts";
import { nodeBody } from "./node-body.ts";
import { RegionTrace } from "./trace.ts";
import {
  SPEND_LEDGER_NAME,
  spendReportSchema,
  spendTotalsSchema,
  usageAnswerSchema,
  usageQuerySchema,
  type UsageAnswer,
} from "../contracts/usage.ts";
import { mergeUsageRows } from "../core/usage/rows.ts";

interface RegionEnv {
  Bindings: Env;
  Variables: { config: LoadedConfig; region: LoadedRegion };
}

/** The region this worker serves (its `WARMPATH_REGION`), or undefined: every region (the local composition). */
function servedRegion(env: Env): string | undefined {
  const v = (env as unknown as Record<string, unknown>)[REGION_VAR];
  return typeof v === "string" && v !== "" ? v : undefined;
}

/** Every answer says which contract produced it (the edge takes no other for the region's). */
const versioned = { [CONTRACT_HEADER]: String(REGION_CONTRACT_VERSION) };

/** A refusal: the edge tries the next region (or answers the client with the reason). */
export function refusalResponse(refusal: RegionRefusal): Response {
  const status = refusal.reason === "rate-limited" || refusal.reason === "over-share" || refusal.reason === "over-budget" ? 429 : 503;
  return Response.json(refusal, { status, headers: { ...versioned, [REFUSAL_HEADER]: refusal.reason } });
}

function refuse(reason: RegionRefusal["reason"], message: string): Response {
  return refusalResponse({ reason, message, retryAfterSeconds: 1, attempts: [] });
}

/** A message the edge sent malformed: a defect between the two workers, not the client's; logged. */
function malformed(message: string): Response {
  console.error(JSON.stringify({ event: "region_message_refused", message: message.slice(0, 300) }));
  return Response.json(
    { error: { message, type: "invalid_request_error", code: "invalid_region_message", param: null } },
    { status: 400, headers: versioned },
  );
}

export function createRegionApp(): Hono<RegionEnv> {
  const app = new Hono<RegionEnv>();

  app.get("/healthz", (c) => c.json({ ok: true }, 200, versioned));

  // Contract and region first: nothing else runs for a version or a region this worker does not serve.
  app.use("/region/v1/:region/*", async (c, next) => {
    const version = Number(c.req.header(CONTRACT_HEADER));
    if (!Number.isInteger(version) || version < MIN_REGION_CONTRACT_VERSION || version > REGION_CONTRACT_VERSION) {
      return refuse(
        "contract-mismatch",
        `region worker speaks contract ${MIN_REGION_CONTRACT_VERSION}-${REGION_CONTRACT_VERSION}, the edge sent ${c.req.header(CONTRACT_HEADER) ?? "none"}`,
      );
    }
    const name = c.req.param("region");
    const served = servedRegion(c.env);
    const config = loadConfig(c.env, { kind: "region", served });
    const region = config.regionByName.get(name);
    if (!region || (served !== undefined && served !== name)) {
      return refuse("wrong-region", `this region worker serves ${served ?? "no region of that name"}, not ${name}`);
    }
    c.set("config", config);
    c.set("region", region);
    await next();
  });

  app.post("/region/v1/:region/dispatch", async (c) => {
    const config = c.get("config");
    const bound = 4 + MAX_DISPATCH_META_BYTES + config.raw.limits.max_body_bytes;
    const bytes = await readBytesLimited(c.req.raw.body, bound);
    if (bytes === undefined) return malformed("dispatch message over its bound");
    const decoded = decodeDispatch(bytes);
    if (!decoded.ok) return malformed(decoded.message);
    const meta = dispatchRequestSchema.safeParse(decoded.meta);
    if (!meta.success) return malformed(`dispatch meta: ${meta.error.issues[0]?.message ?? "invalid"}`);
    const region = c.get("region");
    const trace = new RegionTrace(meta.data, region.config.name);
    let outcome: Awaited<ReturnType<typeof serveInRegion>>;
    try {
      outcome = await serveInRegion({
        env: c.env,
        ctx: c.executionCtx,
        config,
        region,
        request: meta.data,
        ...(await nodeBody(region, meta.data, decoded.body)),
        trace,
      });
    } catch (e) {
      trace.finish(String(e).slice(0, 200));
      throw e;
    }
    if (outcome.ok) return outcome.response;
    // Refused: the region's part of the trace is over (an answer's ends with its decision line).
    trace.finish(outcome.refusal.message, { "warmpath.refusal": outcome.refusal.reason });
    return refusalResponse(outcome.refusal);
  });

  app.post("/region/v1/:region/report", async (c) => {
    const parsed = reportRequestSchema.safeParse(await c.req.json().catch(() => undefined));
    if (!parsed.success) return malformed(`report: ${parsed.error.issues[0]?.message ?? "invalid"}`);
    const region = c.get("region");
    const outcome = await regionIngestStub(c.env, region).report(region.init, parsed.data.report, parsed.data.credential);
    // A sharded region: its exchange decided who the node is and passes its reports to the shards
    // in their exchanges; a new or changed node reaches every shard now, before the node is told it
    // is registered (its first requests may go to any shard). A shard that misses it is logged,
    // not fatal: the feed brings it.
    if (outcome.ok && outcome.mirror) {
      const accepted = { ...parsed.data.report, url: outcome.spec.url };
      await Promise.all(
        regionShardStubs(c.env, region).map((shard) =>
          shard
            .mirrorReport(region.init, accepted)
            .catch((e: unknown) =>
              console.error(JSON.stringify({ event: "shard_report_error", region: region.config.name, message: String(e) })),
            ),
        ),
      );
    }
    return c.json(outcome, 200, versioned);
  });

  app.post("/region/v1/:region/remove", async (c) => {
    const parsed = removeRequestSchema.safeParse(await c.req.json().catch(() => undefined));
    if (!parsed.success) return malformed(`remove: ${parsed.error.issues[0]?.message ?? "invalid"}`);
    const region = c.get("region");
    const outcome = await regionIngestStub(c.env, region).removeNode(region.init, parsed.data.nodeId, parsed.data.credential);
    // Awaited, unlike a report's: a removed node must stop receiving requests from every shard.
    if (outcome.ok && region.init.settings.shards > 1) {
      await Promise.all(regionShardStubs(c.env, region).map((shard) => shard.forgetNode(region.init, parsed.data.nodeId)));
    }
    return c.json(outcome, 200, versioned);
  });

  app.get("/region/v1/:region/state", async (c) => {
    const region = c.get("region");
    const snapshots = await Promise.all(regionShardStubs(c.env, region).map((s) => s.snapshot(region.init)));
    return c.json(mergeSnapshots(snapshots), 200, versioned);
  });

  app.get("/region/v1/:region/history", async (c) => {
    const region = c.get("region");
    return c.json(mergeHistories(await Promise.all(regionShardStubs(c.env, region).map((s) => s.history(region.init)))), 200, versioned);
  });

  app.get("/region/v1/:region/digest", async (c) => {
    const region = c.get("region");
    return c.json(await Promise.all(regionShardStubs(c.env, region).map((s) => s.digest(region.init))), 200, versioned);
  });

  /**
   * The budget ledger, for the other regions' objects (BUDGET_LEDGER_BINDING): served by the worker
   * of the first configured region, whose namespace holds it (durable-objects/usage-store.ts).
   */
  app.post("/region/v1/:region/spend", async (c) => {
    const config = c.get("config");
    const home = config.raw.regions[0]!.name;
    if (c.get("region").config.name !== home) return refuse("wrong-region", `the budget ledger is in region ${home}'s worker`);
    const report = spendReportSchema.safeParse(await c.req.json().catch(() => undefined));
    if (!report.success) return malformed(`spend: ${report.error.issues[0]?.message ?? "invalid"}`);
    const totals = await c.env.REGION.getByName(SPEND_LEDGER_NAME).spend(report.data);
    return c.json(spendTotalsSchema.parse(totals), 200, versioned);
  });

  /** The region's usage ledger (every shard's rows, summed), for GET /admin/usage. */
  app.get("/region/v1/:region/usage", async (c) => {
    const q = usageQuerySchema.safeParse({ tenant: c.req.query("tenant"), from: c.req.query("from"), to: c.req.query("to") });
    if (!q.success) return malformed(`usage query: ${q.error.issues[0]?.message ?? "invalid"}`);
    const region = c.get("region");
    const answers = await Promise.all(regionShardStubs(c.env, region).map((s) => s.usage(region.init, q.data)));
    const data = mergeUsageRows(answers.flatMap((a) => usageAnswerSchema.parse(a).data));
    return c.json({ data } satisfies UsageAnswer, 200, versioned);
  });

  /**
   * Restarts the region's Durable Object(s) (an operator's remedy for a wedged object; a fault for
   * scripts/faults/run.ts): soft state starts again, the node table and configuration are read
   * back from storage on the next call.
   */
  app.post("/region/v1/:region/restart", async (c) => {
    const stubs = regionShardStubs(c.env, c.get("region"));
    await Promise.all(
      stubs.map(async (stub) => {
        try {
          await stub.restart();
        } catch (e) {
          // The abort ends the very call that asked for it (workerd flags it `durableObjectReset`):
          // that is the restart done. Any other error is not.
          if (!(e instanceof Error && e.message.includes(RESTART_REASON))) throw e;
        }
      }),
    );
    return c.json({ objects: stubs.length }, 200, versioned);
  });

  app.notFound(() => malformed("no such region service path"));

  // Whatever fails here fails the region for this request: the edge tries the next one. The client
  // never sees this message (the edge words its own); the log has the detail.
  app.onError((err, c: Context<RegionEnv>) => {
    console.error(
      JSON.stringify({
        event: "region_worker_error",
        path: new URL(c.req.url).pathname,
        message: String(err),
        stack: (err as Error).stack,
      }),
    );
    return refuse("failed", "the region worker failed");
  });

  return app;
}
