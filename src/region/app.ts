/**
 * The region worker's service: what the edge asks a region's worker over its service binding
 * (src/contracts/region-service.ts). It runs by the region's GPUs (Cloudflare placement), so the
 * object calls, the node calls and the retries between nodes all stay within the region, and the
 * request crosses the long haul once, edge to here.
 *
 * Not public: a deployed region worker has no route and no workers.dev address (scripts/deploy.ts),
 * so only bindings reach it. It still takes only what the edge made: every message must be signed
 * with the internal secret (src/region/authenticate.ts; docs/SECURITY.md), the budget ledger's
 * spend batches by a region worker; it validates every message, re-checks a node's origin against
 * its region's allow-list, and refuses a contract version it does not speak or a region it does
 * not serve before it touches anything.
 */
import { Hono, type Context } from "hono";
import { loadConfig, regionIngestStub, regionShardStubs, regionStub, type LoadedConfig, type LoadedRegion } from "../config/load.ts";
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
import { readRequestLimited } from "../http/body.ts";
import { checkNodeUrl } from "../core/origins.ts";
import { INTERNAL_AUTH_HEADER } from "../core/internal-auth.ts";
import { authenticate, authMetricsText } from "./authenticate.ts";
import { serveInRegion } from "./dispatch.ts";
import { nodeBody } from "./node-body.ts";
import { RegionTrace } from "./trace.ts";
import {
  SPEND_LEDGER_NAME,
  spendReportSchema,
  spendTotalsSchema,
  MAX_USAGE_EXPORT_ROWS,
  usageAnswerSchema,
  usageQuerySchema,
  type UsageAnswer,
} from "../contracts/usage.ts";
import { gatherBounded, mergeUsageRows } from "../core/usage/rows.ts";

interface RegionEnv {
  Bindings: Env;
  /** `body`: the message's bytes, read (bounded) and verified with its signature before any handler runs. */
  Variables: { config: LoadedConfig; region: LoadedRegion; body: Uint8Array };
}

/**
 * The longest message other than a dispatch: a spend batch of MAX_SPEND_LINES (8,192) lines of
 * ~150 bytes is 1.2 MB; node reports and removals are under 16 KiB.
 */
const MAX_CONTROL_MESSAGE_BYTES = 2 * 1024 * 1024;

/** Parses a message's JSON body (undefined if it is not JSON). */
function json(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
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

  /** This isolate's internal-boundary refusals (counters only, nothing of any message). */
  app.get("/metrics", (c) => c.text(authMetricsText(), 200, { "content-type": "text/plain; version=0.0.4" }));

  // The signature first: nothing else runs for a message the edge (or, for spend, a region worker)
  // did not make. The body is read once, within its bound, and kept for the handler.
  app.use("/region/v1/*", async (c, next) => {
    const now = Date.now();
    if (!c.req.header(INTERNAL_AUTH_HEADER)) {
      await c.req.raw.body?.cancel().catch(() => {});
      return (await authenticate(c.env, c.req.raw, new Uint8Array(), now, versioned))!;
    }
    const dispatch = /\/dispatch$/.test(c.req.path);
    const bound = dispatch
      ? 4 + MAX_DISPATCH_META_BYTES + loadConfig(c.env, { kind: "region", served: servedRegion(c.env) }).raw.limits.max_body_bytes
      : MAX_CONTROL_MESSAGE_BYTES;
    const bytes = await readRequestLimited(c.req.raw, bound);
    if (bytes === undefined) return malformed(dispatch ? "dispatch message over its bound" : "message over its bound");
    const refused = await authenticate(c.env, c.req.raw, bytes, now, versioned);
    if (refused) return refused;
    c.set("body", bytes);
    await next();
  });

  // Contract and region next: nothing else runs for a version or a region this worker does not serve.
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
    const decoded = decodeDispatch(c.get("body"));
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
        holdKey: crypto.randomUUID(),
        ...(await nodeBody(region, meta.data, decoded.body)),
        trace,
        clientGone: c.req.raw.signal,
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
    const parsed = reportRequestSchema.safeParse(json(c.get("body")));
    if (!parsed.success) return malformed(`report: ${parsed.error.issues[0]?.message ?? "invalid"}`);
    const region = c.get("region");
    // The edge checked the node's URL against the region's allow-list; checked again here, where
    // the node will be called from, so no message (a defect, a configuration the edge has not
    // caught up with) puts a node at an address the region does not allow.
    const url = checkNodeUrl(parsed.data.report.url, region.origins);
    if (!url.ok) {
      console.error(
        JSON.stringify({ event: "region_origin_refused", region: region.config.name, node: parsed.data.report.node_id, code: url.code }),
      );
      return c.json(
        { error: { message: url.message, type: "invalid_request_error", code: url.code, param: "url" } },
        url.status,
        versioned,
      );
    }
    parsed.data.report.url = url.url;
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
    const parsed = removeRequestSchema.safeParse(json(c.get("body")));
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
    const report = spendReportSchema.safeParse(json(c.get("body")));
    if (!report.success) return malformed(`spend: ${report.error.issues[0]?.message ?? "invalid"}`);
    const totals = await c.env.REGION.getByName(SPEND_LEDGER_NAME).spend(report.data);
    return c.json(spendTotalsSchema.parse(totals), 200, versioned);
  });

  /** The region's usage ledger (every shard's rows, summed), for GET /admin/usage. */
  app.get("/region/v1/:region/usage", async (c) => {
    const q = usageQuerySchema.safeParse({
      tenant: c.req.query("tenant"),
      from: c.req.query("from"),
      to: c.req.query("to"),
      limit: c.req.query("limit"),
    });
    if (!q.success) return malformed(`usage query: ${q.error.issues[0]?.message ?? "invalid"}`);
    const region = c.get("region");
    // One shard after another, each asked for what the others left of the bound (gatherBounded).
    // Every shard the region has had is asked, as shard 0 knows them: lowering `shards` leaves the
    // removed shards' bills where they were written.
    const { limit, ...query } = q.data;
    let shards = region.init.settings.shards;
    const rows = await gatherBounded(limit ?? MAX_USAGE_EXPORT_ROWS, (k, left) => {
      if (k >= shards) return undefined;
      // The default bound is not sent: an object still on the code before `limit` (a deploy's first
      // minutes) refuses a key it does not know, and answers a whole region's export as before.
      const ask = left < MAX_USAGE_EXPORT_ROWS ? { ...query, limit: left } : query;
      return regionStub(c.env, region, k)
        .usage(region.init, ask)
        .then((a) => {
          const answer = usageAnswerSchema.parse(a);
          if (k === 0 && answer.shards !== undefined) shards = Math.max(shards, answer.shards);
          return answer;
        });
    });
    if (!rows) return c.json({ data: [], overflow: true } satisfies UsageAnswer, 200, versioned);
    const data = mergeUsageRows(rows);
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
