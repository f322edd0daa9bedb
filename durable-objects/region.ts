/**
 * The region Durable Object: one per GPU region, addressed by region name, the single writer of
 * that region's routing state.
 *
 * In memory: a {@link RegionRouter} (node table, prefix index, load model, policy). The index and
 * the load are soft state: after an eviction or restart they are rebuilt by traffic within a few
 * requests per prefix, which is cheaper than persisting every dispatch. The node table and the
 * region's configuration are durable, in SQLite:
 *
 *     config(key TEXT PRIMARY KEY, value TEXT NOT NULL)
 *       'init'  -> JSON RegionInit (settings, static nodes, fingerprint) last applied
 *     nodes(id TEXT PRIMARY KEY, url TEXT, models TEXT (JSON array), kv_capacity_tokens INTEGER,
 *           static INTEGER (0/1), last_seen INTEGER (ms epoch), boot_id TEXT NULL,
 *           engine TEXT NULL (added by ALTER TABLE to objects created before it))
 *     node_secrets(id TEXT PRIMARY KEY, sha256 TEXT): the SHA-256 of each registered node's secret
 *           (src/core/node-identity.ts), never the secret; a table of its own so that objects
 *           created before node secrets need no migration (their nodes simply have none)
 *
 * Usage (durable-objects/usage-store.ts, docs/USAGE.md): each answered request's bill is summed
 * in memory and written to the `usage` table every `usage.flush_interval_ms` (the alarm), when the
 * object is restarted, and before a usage query; budgeted tenants' spend goes to the budget ledger
 * (the object named SPEND_LEDGER_NAME) at the same flush, whose totals come back for the budget
 * check in `route`.
 *
 * An alarm expires reporting nodes whose reports stopped (and releases in-flight requests whose
 * worker never completed them), and flushes usage. Per request the object does only in-memory
 * work: `route` and `complete` touch no storage.
 */
import { DurableObject, RpcTarget } from "cloudflare:workers";
import { nodeEngineSchema, nodeIdSchema, nodeReportSchema, type NodeReport } from "../src/contracts/node.ts";
import {
  completionOutcomeSchema,
  exchangeRequestSchema,
  nodeFeedSchema,
  responseIdSchema,
  routeRequestSchema,
  shardLoadsSchema,
  ticketSchema,
  type ExchangeAnswer,
  type ExchangeRequest,
  type NodeFeed,
  type ShardLoads,
} from "../src/contracts/routing.ts";
import { loadExchangeName } from "../src/core/shard.ts";
import { RegionRouter, type NodeSpec, type RegionHistoryView, type RegionSnapshot } from "../src/core/region/index.ts";
import type { RegionDigest } from "../src/core/region/long-prefixes.ts";
import {
  authorizeRemoval,
  authorizeReport,
  nodeCredentialSchema,
  type IdentityEntry,
  type IdentityRefusal,
} from "../src/core/node-identity.ts";
import { regionInitSchema, type RegionInit, type UsageInit } from "../src/contracts/region-init.ts";
import {
  billSchema,
  spendReportSchema,
  spendTotalsSchema,
  usageQuerySchema,
  type Bill,
  type SpendReport,
  type SpendTotals,
  type UsageAnswer,
} from "../src/contracts/usage.ts";
import { PendingUsage } from "../src/core/usage/pending.ts";
import { utcDay, utcMonth } from "../src/core/usage/periods.ts";
import { overBudgetMessage, SpendView } from "../src/core/usage/spend.ts";
import { SPEND_LEDGER_NAME, UsageStore } from "./usage-store.ts";
import { BUDGET_LEDGER_BINDING } from "../src/contracts/topology.ts";
import { CONTRACT_HEADER, REGION_CONTRACT_VERSION, regionPath } from "../src/contracts/region-service.ts";

/** The configuration's defaults (src/config/usage-schema.ts), for an object that has had no init (the budget ledger). */
const DEFAULT_FLUSH_INTERVAL_MS = 1_000;
const DEFAULT_RETENTION_DAYS = 400;
import {
  RESTART_REASON,
  type CompletionOutcome,
  type ReportOutcome,
  type RouteAnswer,
  type RouteRequest,
  type RouteSessionApi,
} from "../src/contracts/region-object.ts";

/**
 * A reporting node's `last_seen` is written at most this often (as a fraction of the silence
 * timeout): reports arrive every second or so, and a restart only needs `last_seen` to within a
 * fraction of the timeout to expire the node correctly.
 */
const LAST_SEEN_WRITE_FRACTION = 1 / 3;

/**
 * How often a shard of a sharded region exchanges its load with the others (src/core/shard.ts).
 * The shard benchmark (bench/SHARDS.md) puts the split's cost in mean TTFT at 0.97-1.04x the
 * single object with this interval; without the exchange (reports only, every second) an earlier
 * run measured up to 1.4x, because each shard saw a fraction of the fleet's utilisation and
 * spilled too eagerly.
 * It is the shortest interval: with more shards, or more node reports into the exchange, the
 * interval grows ({@link exchangeIntervalMs}).
 */
const SHARD_LOAD_SYNC_MS = 20;
/** A shard's load older than this is left out of the others' sum (a shard that stopped routing has nothing queued there that is still ahead). */
const SHARD_LOAD_STALE_MS = 1_000;

/**
 * A placed request's session with the object that placed it: `route` returns it, and its first
 * byte and completion are calls on it. Workers RPC keeps calls on an RpcTarget a call returned in
 * that call's session, which Cloudflare bills as one object request: one billed request per
 * client request instead of three (route, firstByte, complete; docs/SCALING.md, B1). It holds
 * only the ticket: a session outliving an object restart fails its calls, as a ticket would.
 */
export class RouteSession extends RpcTarget implements RouteSessionApi {
  private readonly object: RegionDurableObject;
  private readonly ticket: string;

  constructor(object: RegionDurableObject, ticket: string) {
    super();
    this.object = object;
    this.ticket = ticket;
  }

  firstByte(responseId?: string): void {
    this.object.ticketFirstByte(this.ticket, responseId);
  }

  complete(outcome: CompletionOutcome): boolean {
    return this.object.ticketComplete(this.ticket, outcome);
  }
}

/**
 * The requests a second a sharded region's exchange object takes, for the shards' exchanges and
 * the region's node reports together: 90% of the ~1,000 an object serves (docs/SCALING.md). The
 * reports come first (one a second per node, ingested once for every shard); the shards' exchanges
 * share what is left, never less than MIN_EXCHANGES_PER_SECOND.
 */
const EXCHANGE_OBJECT_BUDGET = 900;
/** Past this many node reports a second the exchange object is over its budget whatever the interval: a limit of one object per region's ingest (docs/SCALING.md). */
const MIN_EXCHANGES_PER_SECOND = 100;

/**
 * The interval between a shard's exchanges: 20 ms, or longer so that the region's shards and its
 * node reports stay within the exchange's budget (with 400 nodes reporting each second: 20 ms up
 * to 10 shards, 62 ms at 31).
 */
export function exchangeIntervalMs(shards: number, reportsPerSecond: number): number {
  const room = Math.max(MIN_EXCHANGES_PER_SECOND, EXCHANGE_OBJECT_BUDGET - reportsPerSecond);
  return Math.max(SHARD_LOAD_SYNC_MS, (shards * 1000) / room);
}

/** The window over which the exchange counts the node reports it ingests. */
const REPORT_RATE_WINDOW_MS = 10_000;

/** The most node reports (or removals) one exchange answer carries; a longer feed comes in parts. */
const MAX_FEED_REPORTS = 4096;

interface NodeRow extends Record<string, SqlStorageValue> {
  id: string;
  url: string;
  models: string;
  kv_capacity_tokens: number;
  static: number;
  last_seen: number;
  boot_id: string | null;
  engine: string | null;
}

export class RegionDurableObject extends DurableObject<Env> {
  private router: RegionRouter | undefined;
  private fingerprint: string | undefined;
  private readonly persistedSeen = new Map<string, number>();
  /** Node id -> SHA-256 of its secret (mirrors `node_secrets`). */
  private readonly secrets = new Map<string, string>();
  private alarmAt: number | undefined;
  private readonly sql: SqlStorage;
  /** A shard: when it last sent its load to the region's exchange, and whether an exchange is under way. */
  private lastLoadSync = -Infinity;
  private loadSyncing = false;
  /** The load exchange (the object named by loadExchangeName): each shard's last load, and when it came. */
  private readonly shardLoads = new Map<number, { load: ShardLoads; at: number }>();
  /** A shard of a sharded region: which shard it is (from its route calls), and where it is in the exchange's node feed. */
  private shardIndex: number | undefined;
  private feedSeen: { epoch: string; version: number } | undefined;
  /** The region's node reports a second, as its exchange last said (what stretches the exchange interval). */
  private regionReportsPerSecond = 0;
  /** The exchange: reports ingested in the current window, and in the last full one (-1: none yet). */
  private readonly reportWindow = { start: Date.now(), count: 0, last: -1 };
  /** The region's ingest (the exchange of a sharded region): every node's latest accepted report, and removals, by feed version. */
  private readonly feedEpoch = crypto.randomUUID().slice(0, 8);
  private feedVersion = 0;
  private readonly feedReports = new Map<string, { version: number; report: NodeReport }>();
  private readonly feedRemoved = new Map<string, number>();
  /** Usage counted since the last flush, the stored ledger, and budgeted tenants' spend as this object knows it. */
  private readonly pendingUsage = new PendingUsage();
  private readonly usageStore: UsageStore;
  private readonly spendView = new SpendView();
  /** Until the first init arrives (the budget ledger object itself never gets one). */
  private usageInit: UsageInit | undefined;
  private get flushIntervalMs(): number {
    return this.usageInit?.flushIntervalMs ?? DEFAULT_FLUSH_INTERVAL_MS;
  }
  /** This instance, as the budget ledger tells its batches apart (a restarted object is a new source). */
  private readonly instance = crypto.randomUUID().slice(0, 8);
  private spendExchanging = false;
  /** When the last exchange with the budget ledger began: a failing ledger is asked at most once a flush interval, not once a request. */
  private spendAttemptAt = -Infinity;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.usageStore = new UsageStore(this.sql);
    for (const { tenant, over } of this.usageStore.spentBudgets(Date.now())) this.spendView.remember(tenant, over);
    ctx.blockConcurrencyWhile(async () => {
      this.sql.exec(`CREATE TABLE IF NOT EXISTS config (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
      this.sql.exec(`CREATE TABLE IF NOT EXISTS nodes (
        id TEXT PRIMARY KEY, url TEXT NOT NULL, models TEXT NOT NULL, kv_capacity_tokens INTEGER NOT NULL,
        static INTEGER NOT NULL, last_seen INTEGER NOT NULL, boot_id TEXT, engine TEXT)`);
      // An object created before nodes reported their engine gains the column (NULL: not said).
      const columns = this.sql.exec<{ name: string }>(`PRAGMA table_info(nodes)`).toArray();
      if (!columns.some((c) => c.name === "engine")) this.sql.exec(`ALTER TABLE nodes ADD COLUMN engine TEXT`);
      this.sql.exec(`CREATE TABLE IF NOT EXISTS node_secrets (id TEXT PRIMARY KEY, sha256 TEXT NOT NULL)`);
      const row = this.sql.exec<{ value: string }>(`SELECT value FROM config WHERE key = 'init'`).toArray()[0];
      // Validated before it was stored; a stored init this version no longer accepts is dropped, and
      // the router is built from the worker's init on the next call.
      const stored = row ? regionInitSchema.safeParse(JSON.parse(row.value)) : undefined;
      if (stored?.success) this.build(stored.data);
      const shard = this.sql.exec<{ value: string }>(`SELECT value FROM config WHERE key = 'shard'`).toArray()[0];
      if (shard) this.shardIndex = Number(shard.value);
      this.alarmAt = (await ctx.storage.getAlarm()) ?? undefined;
    });
  }

  /** Builds the router from a configuration and the stored node table. */
  private build(init: RegionInit): RegionRouter {
    const router = new RegionRouter({ ...init.settings }, crypto.randomUUID().slice(0, 8));
    const now = Date.now();
    for (const r of this.sql.exec<NodeRow>(`SELECT * FROM nodes`)) {
      router.upsertNode(this.rowToSpec(r), now);
      this.persistedSeen.set(r.id, r.last_seen);
    }
    this.secrets.clear();
    for (const r of this.sql.exec<{ id: string; sha256: string }>(`SELECT id, sha256 FROM node_secrets`)) this.secrets.set(r.id, r.sha256);
    this.router = router;
    this.fingerprint = init.fingerprint;
    this.usageInit = init.usage;
    this.syncStaticNodes(init, now);
    return router;
  }

  /**
   * Applies the worker's view of the configuration when it differs from the one in force. It is
   * validated only then: `route` runs per request, and an unchanged fingerprint was valid before.
   */
  private ensure(input: RegionInit): RegionRouter {
    if (this.router && this.fingerprint === input.fingerprint) return this.router;
    const init = regionInitSchema.parse(input);
    this.sql.exec(
      `INSERT INTO config (key, value) VALUES ('init', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
      JSON.stringify(init),
    );
    // New configuration (or first call): rebuild from it and the stored node table. The index and
    // load are soft state and are relearned; a policy switch therefore starts from a clean slate.
    return this.build(init);
  }

  private syncStaticNodes(init: RegionInit, now: number): void {
    const router = this.router!;
    const declared = new Set(init.staticNodes.map((n) => n.id));
    for (const spec of router.nodeSpecs()) {
      if (spec.static && !declared.has(spec.id)) {
        router.removeNode(spec.id);
        this.forget(spec.id);
      }
    }
    for (const n of init.staticNodes) {
      const spec: NodeSpec = { ...n, static: true, lastSeen: now };
      router.upsertNode(spec, now);
      this.persist(router.nodeSpec(n.id)!);
    }
  }

  private rowToSpec(r: NodeRow): NodeSpec {
    return {
      id: r.id,
      url: r.url,
      models: JSON.parse(r.models) as string[],
      kvCapacityTokens: r.kv_capacity_tokens,
      static: r.static === 1,
      lastSeen: r.last_seen,
      bootId: r.boot_id ?? undefined,
      engine: r.engine === null ? undefined : nodeEngineSchema.catch("other").parse(r.engine),
    };
  }

  private persist(spec: NodeSpec): void {
    this.sql.exec(
      `INSERT INTO nodes (id, url, models, kv_capacity_tokens, static, last_seen, boot_id, engine) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT(id) DO UPDATE SET url = excluded.url, models = excluded.models,
         kv_capacity_tokens = excluded.kv_capacity_tokens, static = excluded.static,
         last_seen = excluded.last_seen, boot_id = excluded.boot_id, engine = excluded.engine`,
      spec.id,
      spec.url,
      JSON.stringify(spec.models),
      spec.kvCapacityTokens,
      spec.static ? 1 : 0,
      spec.lastSeen,
      spec.bootId ?? null,
      spec.engine ?? null,
    );
    this.persistedSeen.set(spec.id, spec.lastSeen);
  }

  /** Drops a node's durable rows and its secret (removal, expiry, or gone from the configuration). */
  private forget(id: string): void {
    this.sql.exec(`DELETE FROM nodes WHERE id = ?`, id);
    this.sql.exec(`DELETE FROM node_secrets WHERE id = ?`, id);
    this.persistedSeen.delete(id);
    this.secrets.delete(id);
  }

  /** What node-identity.ts needs to know of a node's entry. */
  private identity(id: string): IdentityEntry | undefined {
    const spec = this.router?.nodeSpec(id);
    return spec && { static: spec.static, url: spec.url, lastSeen: spec.lastSeen, secretSha256: this.secrets.get(id) };
  }

  /** Makes sure the alarm fires by `at`. */
  private async scheduleAlarm(at: number | undefined): Promise<void> {
    if (at === undefined) return;
    if (this.alarmAt !== undefined && this.alarmAt <= at && this.alarmAt > Date.now()) return;
    this.alarmAt = at;
    await this.ctx.storage.setAlarm(at);
  }

  /**
   * Chooses a node for a request (see RegionRouter.route). A placement comes with its
   * {@link RouteSession}, on which the caller reports the first byte and the completion.
   */
  async route(init: RegionInit, request: RouteRequest): Promise<RouteAnswer> {
    const router = this.ensure(init);
    const req = routeRequestSchema.parse(request);
    const now = Date.now();
    if (req.budget !== undefined && req.tenant !== undefined) {
      // The budget ledger's totals are refreshed off the request's path, at most once a flush interval.
      const interval = this.flushIntervalMs;
      if (now - this.spendView.lastAnsweredAt > interval && now - this.spendAttemptAt > interval) this.ctx.waitUntil(this.exchangeSpend());
      const over = this.spendView.check(req.tenant, req.budget, now);
      if (over) {
        router.rejectOverBudget(req, now);
        if (this.spendView.isNew(req.tenant, over)) {
          this.spendView.remember(req.tenant, over);
          this.usageStore.rememberSpent(req.tenant, over);
        }
        return {
          ok: false,
          reason: "over-budget",
          message: overBudgetMessage(req.tenant, over),
          retryAfterSeconds: Math.max(1, Math.ceil((over.resetsAt - now) / 1000)),
        };
      }
    }
    const result = router.route(req, now);
    if (req.shard !== undefined) {
      if (this.shardIndex !== req.shard) {
        // Kept, so that a restarted shard hears the feed before its alarm expires anyone (alarm()).
        this.shardIndex = req.shard;
        this.sql.exec(`INSERT OR REPLACE INTO config (key, value) VALUES ('shard', ?)`, String(req.shard));
      }
      this.syncLoad(router, req.shard, now);
    }
    if (!result.ok) return result;
    await this.scheduleAlarm(Date.now() + router.settings.requestTimeoutMs);
    return { ...result, session: new RouteSession(this, result.ticket) };
  }

  /**
   * A shard of a sharded region: at most every {@link exchangeIntervalMs}, sends what it has dispatched
   * to the region's load exchange and takes back the other shards' sum. Never awaited by a
   * request: a slow or failed exchange leaves the last known loads in place (they drain and decay
   * in the model), which is the reports-only behaviour.
   */
  private syncLoad(router: RegionRouter, shard: number, now: number): void {
    const interval = exchangeIntervalMs(router.settings.shards, this.regionReportsPerSecond);
    if (router.settings.shards <= 1 || this.loadSyncing || now - this.lastLoadSync < interval) return;
    this.ctx.waitUntil(this.exchangeWithRegion(router, shard, now));
  }

  /** One exchange: this shard's load out; the others' load and the node reports it has not seen back. */
  private async exchangeWithRegion(router: RegionRouter, shard: number, now: number): Promise<void> {
    this.loadSyncing = true;
    this.lastLoadSync = now;
    try {
      const exchange = this.env.REGION.getByName(loadExchangeName(router.settings.name));
      const answer = await exchange.exchange({ shard, load: router.ownLoad(now), feed: this.feedSeen });
      if (this.router !== router) return;
      router.shareForeignLoad(shardLoadsSchema.parse(answer.loads), Date.now());
      const feed = nodeFeedSchema.parse(answer.feed);
      this.regionReportsPerSecond = Math.max(0, Number(answer.reportsPerSecond) || 0);
      // The exchange keeps each node's last_seen durably; a shard writes a node's row only when it
      // changes (a restarted shard takes the whole feed at its first exchange).
      for (const r of feed.reports) await this.applyReport(router, r, Date.now(), false);
      for (const id of feed.removed) if (router.removeNode(id)) this.forget(id);
      this.feedSeen = { epoch: feed.epoch, version: feed.version };
    } catch (e) {
      console.error(JSON.stringify({ event: "shard_load_exchange_error", region: router.settings.name, message: String(e) }));
    } finally {
      this.loadSyncing = false;
    }
  }

  /**
   * The exchange of a sharded region (an object of its own, named by loadExchangeName): keeps each
   * shard's latest load and answers a shard with the sum of the others', and with the node reports
   * the region's ingest (this object's {@link report}) accepted since the shard last asked.
   */
  exchange(request: ExchangeRequest): ExchangeAnswer {
    const parsed = exchangeRequestSchema.safeParse(request);
    // Only the worker's own shards call this; a malformed load is dropped (and logged), never summed.
    if (!parsed.success) {
      console.error(JSON.stringify({ event: "shard_load_refused", message: parsed.error.message.slice(0, 200) }));
      return {
        loads: {},
        feed: { epoch: this.feedEpoch, version: this.feedVersion, reports: [], removed: [] },
        reportsPerSecond: this.reportsPerSecond(Date.now()),
      };
    }
    const { shard, load, feed } = parsed.data;
    const now = Date.now();
    this.shardLoads.set(shard, { load, at: now });
    const others: ShardLoads = {};
    for (const [k, entry] of this.shardLoads) {
      if (k === shard) continue;
      if (now - entry.at > SHARD_LOAD_STALE_MS) {
        this.shardLoads.delete(k);
        continue;
      }
      for (const [node, l] of Object.entries(entry.load)) {
        const sum = (others[node] ??= { queued: 0, recent: 0 });
        sum.queued += l.queued;
        sum.recent += l.recent;
      }
    }
    return {
      loads: others,
      feed: this.feedSince(feed?.epoch === this.feedEpoch ? feed.version : -1),
      reportsPerSecond: this.reportsPerSecond(now),
    };
  }

  /** The node reports a second this object ingested over its last full window (the current one's so far, before one). */
  private reportsPerSecond(now: number): number {
    this.countReport(now, 0);
    const w = this.reportWindow;
    return w.last >= 0 ? w.last / (REPORT_RATE_WINDOW_MS / 1000) : w.count / Math.max(1, (now - w.start) / 1000);
  }

  private countReport(now: number, n: number): void {
    const w = this.reportWindow;
    if (now - w.start >= REPORT_RATE_WINDOW_MS) {
      w.last = now - w.start < 2 * REPORT_RATE_WINDOW_MS ? w.count : 0;
      w.start = now;
      w.count = 0;
    }
    w.count += n;
  }

  /** The feed after `since` (-1: every node's latest report, for a shard new to this instance), at most MAX_FEED_REPORTS. */
  private feedSince(since: number): NodeFeed {
    const fresh = [...this.feedReports.values()].filter((e) => e.version > since).sort((a, b) => a.version - b.version);
    const reports = fresh.slice(0, MAX_FEED_REPORTS);
    // A longer feed is sent in parts: the shard asks again from the last report it got.
    const version = fresh.length > reports.length ? reports[reports.length - 1]!.version : this.feedVersion;
    const removed = since < 0 ? [] : [...this.feedRemoved].filter(([, v]) => v > since && v <= version).map(([id]) => id);
    return { epoch: this.feedEpoch, version, reports: reports.map((e) => e.report), removed: removed.slice(0, MAX_FEED_REPORTS) };
  }

  /** Records an accepted report (or a removal) in the region's node feed, for the other shards. */
  private publish(router: RegionRouter, id: string, report: NodeReport | undefined): void {
    if (router.settings.shards <= 1) return;
    if (report) this.countReport(Date.now(), 1);
    const version = ++this.feedVersion;
    if (report) {
      this.feedReports.set(id, { version, report });
      this.feedRemoved.delete(id);
    } else {
      this.feedReports.delete(id);
      this.feedRemoved.set(id, version);
      // Removals older than a node's silence timeout are of no use: a shard that missed them expires the node itself.
      for (const [k, v] of this.feedRemoved) if (this.feedRemoved.size > MAX_FEED_REPORTS && v < version) this.feedRemoved.delete(k);
    }
  }

  /**
   * A stored response's node, remembered by the shard its follow-ups will ask (the shard that
   * served the request is chosen by its prompt, a follow-up's by the response id it names).
   */
  rememberResponse(init: RegionInit, responseId: unknown, nodeId: unknown): void {
    this.ensure(init).rememberResponse(responseIdSchema.parse(responseId), nodeIdSchema.parse(nodeId));
  }

  /** The first byte of a dispatched request's answer arrived (with the id of a stored response, if any): {@link RouteSession}. */
  ticketFirstByte(ticket: string, responseId?: unknown): void {
    const id = responseId === undefined ? undefined : responseIdSchema.parse(responseId);
    this.router?.firstByte(ticketSchema.parse(ticket), Date.now(), id);
  }

  /** Releases a dispatched request and records its outcome: {@link RouteSession}. */
  ticketComplete(ticket: string, outcome: unknown): boolean {
    const t = ticketSchema.parse(ticket);
    const o = completionOutcomeSchema.parse(outcome);
    if (o.bill) this.bill(o.bill);
    return this.router?.complete(t, o, Date.now()) ?? false;
  }

  /**
   * The usage of a request placed without this object (the region worker's stateless placement,
   * src/region/stateless.ts), billed once the object answers again.
   */
  recordUsage(init: RegionInit, bill: unknown): void {
    this.ensure(init);
    this.bill(billSchema.parse(bill));
  }

  /** Counts a bill: written at the next flush (the alarm), at once if the rows in memory reach their bound. */
  private bill(bill: Bill): void {
    const now = Date.now();
    this.pendingUsage.add(bill, now);
    this.spendView.record(bill, now);
    if (this.pendingUsage.full) this.flushUsage(now);
    this.ctx.waitUntil(this.scheduleAlarm(now + this.flushIntervalMs));
  }

  /** Writes the usage counted in memory to the ledger's table (synchronous SQLite: durable with the event's output). */
  private flushUsage(now: number): void {
    const rows = this.pendingUsage.take();
    try {
      this.usageStore.write(rows);
      this.usageStore.prune(this.usageInit?.retentionDays ?? DEFAULT_RETENTION_DAYS, now);
    } catch (e) {
      this.pendingUsage.restore(rows);
      console.error(
        JSON.stringify({ event: "usage_flush_error", region: this.router?.settings.name, rows: rows.length, message: String(e) }),
      );
    }
  }

  /**
   * Sends the budget ledger what budgeted tenants spent here since the last batch, and takes back
   * every tenant's totals for today and this month. One at a time; a failed batch is resent as it
   * was (the ledger applies it once).
   */
  private async exchangeSpend(): Promise<void> {
    if (this.spendExchanging) return;
    this.spendExchanging = true;
    const now = Date.now();
    this.spendAttemptAt = now;
    const batch = this.spendView.takeBatch();
    try {
      const source = `${this.router?.settings.name ?? "?"}/${this.shardIndex ?? 0}/${this.instance}`;
      const report = { source, seq: batch.seq, spends: batch.spends, periods: [utcDay(now), utcMonth(now)] };
      this.spendView.acknowledge(batch.seq, spendTotalsSchema.parse(await this.sendSpend(report)).totals, Date.now());
    } catch (e) {
      console.error(JSON.stringify({ event: "spend_exchange_error", region: this.router?.settings.name, message: String(e) }));
    } finally {
      this.spendExchanging = false;
    }
  }

  /**
   * To the budget ledger: in this worker's namespace if it is the ledger's home (or the local
   * single-process composition, which has one namespace), else through the binding to the home
   * region's worker (BUDGET_LEDGER_BINDING), which asks it there.
   */
  private async sendSpend(report: SpendReport): Promise<unknown> {
    const home = (this.env as unknown as Record<string, unknown>)[BUDGET_LEDGER_BINDING] as Fetcher | undefined;
    if (!home) return this.env.REGION.getByName(SPEND_LEDGER_NAME).spend(report);
    const region = this.usageInit?.ledgerRegion ?? "";
    const res = await home.fetch(`https://region.warmpath.internal${regionPath.spend(region)}`, {
      method: "POST",
      headers: { "content-type": "application/json", [CONTRACT_HEADER]: String(REGION_CONTRACT_VERSION) },
      body: JSON.stringify(report),
    });
    if (!res.ok) throw new Error(`budget ledger's home ${region} answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
    return res.json();
  }

  /** The budget ledger (the object named SPEND_LEDGER_NAME): applies a region object's batch once, answers the totals. */
  spend(report: unknown): SpendTotals {
    const r = spendReportSchema.parse(report);
    const now = Date.now();
    const totals = this.usageStore.applySpend(r, now);
    this.usageStore.prune(DEFAULT_RETENTION_DAYS, now);
    return { totals };
  }

  /** This object's usage ledger rows for a query (GET /admin/usage), what is still in memory written first. */
  usage(init: RegionInit, query: unknown): UsageAnswer {
    const router = this.ensure(init);
    const q = usageQuerySchema.parse(query);
    this.flushUsage(Date.now());
    return { data: this.usageStore.query(q, router.settings.name) };
  }

  /**
   * A node's load report, if `credential` may act as the node (src/core/node-identity.ts): the
   * region token registers a new id (storing the hash of the secret the worker hands out), a node
   * secret updates its own node. Decided and applied without an await in between, so two
   * registrations of one id cannot both succeed.
   */
  async report(init: RegionInit, report: unknown, credential: unknown): Promise<ReportOutcome> {
    const router = this.ensure(init);
    const r = nodeReportSchema.parse(report);
    const cred = nodeCredentialSchema.parse(credential);
    const now = Date.now();
    const entry = this.identity(r.node_id);
    const decision = authorizeReport(entry, cred, r.url, now, router.settings.nodeSilenceMs);
    if (!decision.ok) return decision;
    if (decision.register) {
      // A new id, or one whose entry expired by silence (the alarm may not have run yet): start afresh.
      if (entry) {
        router.removeNode(r.node_id);
        this.forget(r.node_id);
      }
      if (cred.kind === "region" && cred.registerSha256 !== undefined) {
        this.sql.exec(`INSERT OR REPLACE INTO node_secrets (id, sha256) VALUES (?, ?)`, r.node_id, cred.registerSha256);
        this.secrets.set(r.node_id, cred.registerSha256);
      }
    }
    const { spec, changed } = await this.applyReport(router, r, now);
    this.publish(router, spec.id, { ...r, url: spec.url });
    // A new or changed node reaches every shard before the node is told (its first requests may go
    // to any shard); its later reports reach them through the exchange's feed.
    const mirror = router.settings.shards > 1 && (decision.register || changed);
    return { ok: true, spec, registered: decision.register, mirror };
  }

  /**
   * A report shard 0 of a sharded region has already accepted (the worker passes it on): every
   * shard needs every node's load and presence, while identity (node secrets) stays with shard 0.
   */
  async mirrorReport(init: RegionInit, report: unknown): Promise<void> {
    const router = this.ensure(init);
    await this.applyReport(router, nodeReportSchema.parse(report), Date.now());
  }

  /** Applies an accepted report to the router and persists what a restart needs. */
  private async applyReport(
    router: RegionRouter,
    r: NodeReport,
    now: number,
    seenIsDurable = true,
  ): Promise<{ spec: NodeSpec; changed: boolean }> {
    const before = router.nodeSpec(r.node_id);
    // A static node's URL is the configuration's: a report never moves it.
    const spec = router.report(before?.static ? { ...r, url: before.url } : r, now);
    const changed =
      !before ||
      before.url !== spec.url ||
      before.kvCapacityTokens !== spec.kvCapacityTokens ||
      before.bootId !== spec.bootId ||
      before.engine !== spec.engine ||
      JSON.stringify(before.models) !== JSON.stringify(spec.models);
    const lastWrite = this.persistedSeen.get(spec.id) ?? 0;
    if (changed || (seenIsDurable && now - lastWrite > router.settings.nodeSilenceMs * LAST_SEEN_WRITE_FRACTION)) this.persist(spec);
    await this.scheduleAlarm(now + router.settings.nodeSilenceMs);
    return { spec, changed };
  }

  /**
   * Removes a node (DELETE /v1/nodes/{region}/{node_id}) if `credential` is the admin token or the
   * node's own secret; its secret is revoked with it.
   */
  removeNode(init: RegionInit, nodeId: unknown, credential: unknown): { ok: true } | { ok: false; reason: IdentityRefusal } {
    this.ensure(init);
    const id = nodeIdSchema.parse(nodeId);
    const decision = authorizeRemoval(this.identity(id), nodeCredentialSchema.parse(credential));
    if (!decision.ok) return decision;
    this.router!.removeNode(id);
    this.forget(id);
    this.publish(this.router!, id, undefined);
    return decision;
  }

  /** A node removed through shard 0 of a sharded region (the worker passes the removal on). */
  forgetNode(init: RegionInit, nodeId: unknown): void {
    const id = nodeIdSchema.parse(nodeId);
    if (this.ensure(init).removeNode(id)) this.forget(id);
  }

  /** The region's state for operators and the dashboard. */
  snapshot(init: RegionInit): RegionSnapshot {
    return this.ensure(init).snapshot(Date.now());
  }

  /** The long prefixes this region (shard) holds, for the edge's cross-region choice (src/core/warm-region.ts). */
  digest(init: RegionInit): RegionDigest {
    return this.ensure(init).digest();
  }

  /** The last hour in buckets and the recent decisions, for the dashboard (in memory: lost with the object). */
  history(init: RegionInit): RegionHistoryView {
    return this.ensure(init).historyView(Date.now());
  }

  /**
   * Operator: restarts the object (POST /admin/regions/{region}/restart). `abort` drops this
   * instance and everything it holds in memory (index, load model, history, tickets in flight);
   * the next call constructs the object again from storage (configuration and node table). The
   * call itself fails with the abort's reason, as every call still running on this instance does.
   */
  async restart(): Promise<void> {
    // Usage counted in memory is written first, and budgeted spend sent: a restart loses soft
    // state, never billing.
    this.flushUsage(Date.now());
    await this.ctx.storage.sync();
    if (this.spendView.pending) await this.exchangeSpend();
    this.ctx.abort(RESTART_REASON);
  }

  override async alarm(): Promise<void> {
    this.alarmAt = undefined;
    if (this.pendingUsage.size > 0) this.flushUsage(Date.now());
    if (this.spendView.pending) await this.exchangeSpend();
    // Spend the budget ledger has not acknowledged is sent again at the next interval.
    if (this.spendView.pending) await this.scheduleAlarm(Date.now() + this.flushIntervalMs);
    const router = this.router;
    if (!router) return;
    // A shard that has routed nothing lately has not heard the feed: hear it before expiring anyone
    // (a node silent here may have reported through the exchange). Only then: the same alarm
    // flushes usage every second, which needs no exchange.
    if (this.shardIndex !== undefined && !this.loadSyncing && router.hasSilentNodes(Date.now()))
      await this.exchangeWithRegion(router, this.shardIndex, Date.now());
    const { expired, nextAt } = router.expire(Date.now());
    for (const id of expired) {
      this.forget(id);
      if (this.feedReports.has(id)) this.publish(router, id, undefined);
      console.log(JSON.stringify({ event: "node_expired", region: router.settings.name, node: id }));
    }
    await this.scheduleAlarm(nextAt);
  }
}
