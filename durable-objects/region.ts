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
 *     nodes, node_secrets: the node table and its secrets' hashes (node-store.ts)
 *
 * Usage (durable-objects/usage-store.ts, docs/USAGE.md): each answered request's bill is summed
 * in memory and written to the `usage` table every `usage.flush_interval_ms` (the alarm), when the
 * object is restarted, and before a usage query; budgeted tenants' spend goes to the budget ledger
 * (the object named SPEND_LEDGER_NAME) at the same flush, whose totals come back for the budget
 * check in `route`.
 *
 * The same class plays every role of the region's objects (one class, one binding), each role in a
 * module of its own: a placed request's session (route-session.ts), a sharded region's load
 * exchange and each shard's side of it (load-exchange.ts), the budget ledger and each object's link
 * to it (budget-ledger.ts), the usage ledger's storage (usage-store.ts), and how an object
 * addresses the others (addressing.ts); the node table's storage is node-store.ts.
 *
 * An alarm expires reporting nodes whose reports stopped (and releases in-flight requests whose
 * worker never completed them), and flushes usage. Per request the object does only in-memory
 * work: `route` and `complete` touch no storage.
 */
import { DurableObject } from "cloudflare:workers";
import { nodeIdSchema, nodeReportSchema, type NodeReport } from "../src/contracts/node.ts";
import {
  completionOutcomeSchema,
  responseIdSchema,
  routeRequestSchema,
  type ExchangeAnswer,
  type ExchangeRequest,
} from "../src/contracts/routing.ts";
import { RegionRouter, type NodeSpec, type RegionHistoryView, type RegionSnapshot } from "../src/core/region/index.ts";
import type { RegionDigest } from "../src/core/region/long-prefixes.ts";
import {
  authorizeRemoval,
  authorizeReport,
  nodeCredentialSchema,
  type IdentityEntry,
  type IdentityRefusal,
} from "../src/core/node-identity.ts";
import { regionInitSchema, type RegionInit, type RegionInitRef, type UsageInit } from "../src/contracts/region-init.ts";
import {
  billSchema,
  MAX_USAGE_EXPORT_ROWS,
  usageQuerySchema,
  type Bill,
  type SpendTotals,
  type UsageAnswer,
} from "../src/contracts/usage.ts";
import { PendingUsage } from "../src/core/usage/pending.ts";
import { clampBill } from "../src/core/usage/bounds.ts";
import { IDLE_GRACE_MS } from "../src/core/usage/reservations.ts";
import { DEFAULT_FLUSH_INTERVAL_MS, DEFAULT_RETENTION_DAYS, UsageStore } from "./usage-store.ts";
import {
  INIT_NEEDED,
  RESTART_REASON,
  type CompletionOutcome,
  type InitNeeded,
  type ReportOutcome,
  type RouteAnswer,
  type RouteRequest,
} from "../src/contracts/region-object.ts";
import { RouteSession } from "./route-session.ts";
import { LoadExchange, ShardLink } from "./load-exchange.ts";
import { BudgetLedgerLink, ledgerSpend } from "./budget-ledger.ts";
import { QueueWaiters } from "./queue-waiters.ts";
import { InitOrder } from "./init-order.ts";
import { createConfigTable, readConfig, writeConfig } from "./config-table.ts";
import { NodeStore } from "./node-store.ts";
import type { RouteResult } from "../src/contracts/routing.ts";

/** Read here by bench/test/scale-model.test.ts (the scale model's exchange interval is this one). */
export { exchangeIntervalMs } from "./load-exchange.ts";

/**
 * A reporting node's `last_seen` is written at most this often (as a fraction of the silence
 * timeout): reports arrive every second or so, and a restart only needs `last_seen` to within a
 * fraction of the timeout to expire the node correctly.
 */
const LAST_SEEN_WRITE_FRACTION = 1 / 3;

/**
 * While requests are queued the alarm fires this long after the queue's wake time, should the
 * waiters' timer not have (queue-waiters.ts): the queue is served at most a second late, and the
 * usage flush's alarm (every second under traffic) usually comes first, so this rarely sets one.
 */
const QUEUE_ALARM_BACKSTOP_MS = 1_000;

/** A dispatch's hold key as `route` takes it (routing.ts), for {@link RegionDurableObject.leaveQueue}. */
const holdKeySchema = routeRequestSchema.shape.holdKey.unwrap();

export class RegionDurableObject extends DurableObject<Env> {
  private router: RegionRouter | undefined;
  /** Which init the router is built from, while two worker versions send theirs (init-order.ts). */
  private readonly initOrder = new InitOrder();
  /** The node table in SQLite, and the hashes of the nodes' secrets (node-store.ts). */
  private readonly nodeStore: NodeStore;
  private alarmAt: number | undefined;
  private readonly sql: SqlStorage;
  /** The load exchange's role (the object named by loadExchangeName), and a shard's side of it. */
  private readonly loadExchange = new LoadExchange();
  /** Queued requests' `route` calls, waiting for the router's answer (queue-waiters.ts). */
  private readonly waiters = new QueueWaiters();
  private readonly shard: ShardLink;
  /** Usage counted since the last flush, and the stored ledger. */
  private readonly pendingUsage = new PendingUsage();
  private readonly usageStore: UsageStore;
  /** Budgeted tenants' spend as this object knows it, and its exchanges with the budget ledger. */
  private readonly budgets: BudgetLedgerLink;
  /** Until the first init arrives (the budget ledger object itself never gets one). */
  private usageInit: UsageInit | undefined;
  /**
   * The most shards the inits this object was given named (the `config` table's `usage_shards`):
   * a usage query's answer says it, so that a region whose shards were lowered still exports what
   * the removed shards billed (src/region/app.ts).
   */
  private usageShards = 1;
  private get flushIntervalMs(): number {
    return this.usageInit?.flushIntervalMs ?? DEFAULT_FLUSH_INTERVAL_MS;
  }

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.usageStore = new UsageStore(this.sql);
    this.nodeStore = new NodeStore(this.sql);
    this.budgets = new BudgetLedgerLink(ctx, env, this.usageStore, () => ({
      region: this.router?.settings.name,
      shard: this.shard.index,
      flushIntervalMs: this.flushIntervalMs,
      ledgerRegion: this.usageInit?.ledgerRegion,
    }));
    this.shard = new ShardLink(ctx, env, this.sql, {
      router: () => this.router,
      applyReport: (router, report, now, seenIsDurable) => this.applyReport(router, report, now, seenIsDurable),
      forget: (id) => this.nodeStore.forget(id),
    });
    ctx.blockConcurrencyWhile(async () => {
      createConfigTable(this.sql);
      this.nodeStore.migrate();
      const row = readConfig(this.sql, "init");
      // Validated before it was stored; a stored init this version no longer accepts is dropped, and
      // the router is built from the worker's init on the next call.
      const stored = row === undefined ? undefined : regionInitSchema.safeParse(JSON.parse(row));
      const shards = readConfig(this.sql, "usage_shards");
      if (shards !== undefined) this.usageShards = Number(shards);
      if (stored?.success) {
        // Read back, not seen in use: an older init (a rollback) need not wait for it to go unused again.
        this.build(stored.data, false);
        // The stored init's shards count too (an object whose init predates `usage_shards`).
        this.noteShards(stored.data.settings.shards);
      }
      this.shard.restore();
      this.alarmAt = (await ctx.storage.getAlarm()) ?? undefined;
    });
  }

  /**
   * Builds the router from a configuration and the stored node table. `inUse`: a call just carried
   * it (false: read back from storage at a restart; init-order.ts).
   */
  private build(init: RegionInit, inUse = true): RegionRouter {
    // A new configuration drops the old router and its queue: whoever waited in it tries another region.
    this.waiters.abandon({
      ok: false,
      reason: "saturated",
      message: "the region's configuration changed while the request was queued",
      retryAfterSeconds: 1,
    });
    const router = new RegionRouter({ ...init.settings }, crypto.randomUUID().slice(0, 8));
    const now = Date.now();
    // The stored table, then the configuration (syncStaticNodes): a static node's configured spec wins.
    for (const spec of this.nodeStore.load()) router.upsertNode(spec, now);
    this.router = router;
    this.initOrder.adopt(init, inUse ? now : undefined);
    this.usageInit = init.usage;
    this.syncStaticNodes(init, now);
    return router;
  }

  /**
   * Applies the worker's view of the configuration when it differs from the one in force. It is
   * validated only then: `route` runs per request, and an unchanged fingerprint was valid before.
   */
  private ensure(input: RegionInit): RegionRouter {
    const now = Date.now();
    if (this.router && this.initOrder.serves(input.fingerprint, now, input.generation)) return this.router;
    const init = regionInitSchema.parse(input);
    // Whether or not it is taken: the shards an init names may hold usage (an older version's too).
    this.noteShards(init.settings.shards);
    if (this.router && !this.initOrder.replaces(init, now)) {
      // An older worker version's configuration while the newer one is in use (a gradual
      // deployment): its calls are routed by the newer one, without a rebuild (init-order.ts).
      console.log(
        JSON.stringify({
          event: "region_init_deferred",
          region: this.router.settings.name,
          fingerprint: init.fingerprint,
          generation: init.generation,
          in_force: this.initOrder.inForce,
        }),
      );
      return this.router;
    }
    writeConfig(this.sql, "init", JSON.stringify(init));
    // New configuration (or first call): rebuild from it and the stored node table. The index and
    // load are soft state and are relearned; a policy switch therefore starts from a clean slate.
    return this.build(init);
  }

  /** Keeps the most shards an init named (`usage_shards`): their objects may hold usage the export must ask for. */
  private noteShards(shards: number): void {
    if (shards <= this.usageShards) return;
    this.usageShards = shards;
    writeConfig(this.sql, "usage_shards", String(shards));
  }

  /**
   * The router for a call that may carry only the init's fingerprint (`route`, region-init.ts):
   * undefined when that fingerprint is not the one in force, and so the caller must send the init.
   */
  private routerFor(input: RegionInit | RegionInitRef): RegionRouter | undefined {
    if ("settings" in input) return this.ensure(input);
    return this.initOrder.serves(input.fingerprint, Date.now()) ? this.router : undefined;
  }

  private syncStaticNodes(init: RegionInit, now: number): void {
    const router = this.router!;
    const declared = new Set(init.staticNodes.map((n) => n.id));
    for (const spec of router.nodeSpecs()) {
      if (spec.static && !declared.has(spec.id)) {
        router.removeNode(spec.id);
        this.nodeStore.forget(spec.id);
        // A report of it in the region's node feed would bring it back to a shard that restarts.
        if (this.loadExchange.has(spec.id)) this.loadExchange.publish(router, spec.id, undefined);
      }
    }
    for (const n of init.staticNodes) {
      const spec: NodeSpec = { ...n, static: true, lastSeen: now };
      router.configureNode(spec, now);
      this.nodeStore.persist(router.nodeSpec(n.id)!);
    }
  }

  /** What node-identity.ts needs to know of a node's entry. */
  private identity(id: string): IdentityEntry | undefined {
    const spec = this.router?.nodeSpec(id);
    return spec && { static: spec.static, url: spec.url, lastSeen: spec.lastSeen, secretSha256: this.nodeStore.secretOf(id) };
  }

  /** Makes sure the alarm fires by `at`. */
  private async scheduleAlarm(at: number | undefined): Promise<void> {
    if (at === undefined) return;
    if (this.alarmAt !== undefined && this.alarmAt <= at && this.alarmAt > Date.now()) return;
    this.alarmAt = at;
    await this.ctx.storage.setAlarm(at);
  }

  /**
   * Chooses a node for a request (see RegionRouter.route), once its tenant's budgets allow it
   * (budget-ledger.ts); a shard also exchanges its load when due (load-exchange.ts). A placement
   * comes with its {@link RouteSession}, on which the caller reports the first byte and the
   * completion. The worker sends the init's fingerprint only; if it is not the one in force the
   * answer is {@link InitNeeded}, and the worker calls again with the whole init.
   */
  async route(init: RegionInit | RegionInitRef, request: RouteRequest): Promise<RouteAnswer | InitNeeded> {
    const router = this.routerFor(init);
    if (!router) return INIT_NEEDED;
    const req = routeRequestSchema.parse(request);
    const now = Date.now();
    // The budget: refused, or the request holds what it may spend until its bill (budget-ledger.ts).
    const overBudget = this.budgets.admit(router, req, now);
    if (overBudget) return overBudget;
    // Admission (docs/ADMISSION.md): placed or refused now, or queued; a queued request's call
    // waits here for its answer (still one billed request: this call).
    const step = router.admit(req, now);
    if (req.shard !== undefined) this.shard.routed(router, req.shard, now);
    const answer = step.ok === "queued" ? this.waiters.wait(step.queueId, req.holdKey) : undefined;
    this.serveQueue(router, now);
    const result = answer ? await answer : (step as RouteResult);
    this.budgets.placed(req, result, Date.now());
    if (!result.ok) return result;
    await this.scheduleAlarm(Date.now() + router.settings.requestTimeoutMs);
    return { ...result, session: new RouteSession(this.tickets, result.ticket) };
  }

  /**
   * The client of the request queued under `holdKey` (its dispatch's, routing.ts) went while it
   * waited: it leaves the queue now, rather than when it is placed (a node then called for
   * nobody) or its wait runs out, holding its place and its budget's hold until then. Its `route`
   * call is answered with a refusal, which releases the hold. Returns whether it was waiting.
   */
  leaveQueue(holdKey: unknown): boolean {
    const key = holdKeySchema.parse(holdKey);
    const router = this.router;
    if (!router) return false;
    const left = this.waiters.leave(router, key, {
      ok: false,
      reason: "saturated",
      message: "the client went while the request was queued",
      retryAfterSeconds: 0,
    });
    // What it held back (its work ahead of others) no longer does.
    if (left) this.serveQueue(router, Date.now());
    return left;
  }

  /**
   * The exchange of a sharded region (an object of its own, named by loadExchangeName): keeps each
   * shard's latest load and answers a shard with the sum of the others', and with the node reports
   * the region's ingest (this object's {@link report}) accepted since the shard last asked.
   */
  exchange(request: ExchangeRequest): ExchangeAnswer {
    return this.loadExchange.answer(request);
  }

  /**
   * A stored response's node, remembered by the shard its follow-ups will ask (the shard that
   * served the request is chosen by its prompt, a follow-up's by the response id it names).
   */
  rememberResponse(init: RegionInit, responseId: unknown, nodeId: unknown): void {
    this.ensure(init).rememberResponse(responseIdSchema.parse(responseId), nodeIdSchema.parse(nodeId));
  }

  /**
   * What a {@link RouteSession} asks of this object. Not methods of the class (JavaScript-private):
   * Workers RPC exposes every public method, and a ticket is this object's own value, handed to the
   * session by `route`, so it needs no validation only if nothing else can pass one. What the worker
   * sends on the session (a response id, an outcome) is validated on arrival.
   */
  private readonly tickets = {
    firstByte: (ticket: string, responseId?: unknown) => this.#ticketFirstByte(ticket, responseId),
    complete: (ticket: string, outcome: unknown) => this.#ticketComplete(ticket, outcome),
  };

  /** The first byte of a dispatched request's answer arrived (with the id of a stored response, if any): {@link RouteSession}. */
  #ticketFirstByte(ticket: string, responseId?: unknown): void {
    const id = responseId === undefined ? undefined : responseIdSchema.parse(responseId);
    const router = this.router;
    if (!router) return;
    router.firstByte(ticket, Date.now(), id);
    // The node's prefill is done: its queue is shorter, and the region's queue may go on.
    this.serveQueue(router, Date.now());
  }

  /**
   * Serves the router's queue (queue-waiters.ts); while anything waits, the alarm is a backstop
   * for the waiters' timer, a second after it.
   */
  private serveQueue(router: RegionRouter, now: number): void {
    const wake = this.waiters.serve(router, now);
    if (wake !== undefined && (this.alarmAt === undefined || this.alarmAt > wake + QUEUE_ALARM_BACKSTOP_MS))
      this.ctx.waitUntil(this.scheduleAlarm(wake + QUEUE_ALARM_BACKSTOP_MS));
  }

  /** Releases a dispatched request and records its outcome: {@link RouteSession}. */
  #ticketComplete(t: string, outcome: unknown): boolean {
    const o = completionOutcomeSchema.parse(outcome);
    // The bill counted and the hold released in one step: the budget never sees neither, nor both.
    if (o.bill) this.bill(o.bill);
    // A hold left to a retry or continuation that may not come is released by the alarm after its grace.
    if (this.budgets.completed(t, o, Date.now()) === "detached") this.ctx.waitUntil(this.scheduleAlarm(Date.now() + IDLE_GRACE_MS));
    const router = this.router;
    if (!router) return false;
    const known = router.complete(t, o, Date.now());
    this.serveQueue(router, Date.now());
    return known;
  }

  /**
   * The usage of a request placed without this object (the region worker's stateless placement,
   * src/region/stateless.ts), billed once the object answers again.
   */
  recordUsage(init: RegionInit, bill: unknown): void {
    this.ensure(init);
    this.bill(billSchema.parse(bill));
  }

  /**
   * Counts a bill: written at the next flush (the alarm), at once if the rows in memory reach their
   * bound. A bill past what one request can cost is counted at the ceiling and logged
   * (src/core/usage/bounds.ts): no row or spend line can overflow.
   */
  private bill(raw: Bill): void {
    const now = Date.now();
    const { bill, clamped } = clampBill(raw);
    if (clamped.length)
      console.error(
        JSON.stringify({
          event: "bill_clamped",
          region: this.router?.settings.name,
          tenant: bill.tenant,
          model: bill.model,
          fields: clamped,
          billed: {
            promptTokens: raw.promptTokens,
            cachedTokens: raw.cachedTokens,
            completionTokens: raw.completionTokens,
            costUsd: raw.costUsd,
          },
        }),
      );
    this.pendingUsage.add(bill, now);
    this.budgets.record(bill, now);
    if (this.pendingUsage.full) this.flushUsage(now);
    this.ctx.waitUntil(this.scheduleAlarm(now + this.flushIntervalMs));
  }

  /**
   * Writes the usage counted in memory to the ledger's table (synchronous SQLite: durable with the
   * event's output). All the rows or none (one transaction): rows kept for the next flush after a
   * write that failed part-way were counted twice, once by the rows it had written. The prune is
   * apart: its failure leaves the rows written, and nothing to write again.
   */
  private flushUsage(now: number): void {
    const rows = this.pendingUsage.take();
    const failed = (what: string, e: unknown) =>
      console.error(
        JSON.stringify({
          event: "usage_flush_error",
          region: this.router?.settings.name,
          step: what,
          rows: rows.length,
          message: String(e),
        }),
      );
    try {
      this.ctx.storage.transactionSync(() => this.usageStore.write(rows));
    } catch (e) {
      this.pendingUsage.restore(rows);
      return failed("write", e);
    }
    try {
      this.usageStore.prune(this.usageInit?.retentionDays ?? DEFAULT_RETENTION_DAYS, now);
    } catch (e) {
      failed("prune", e);
    }
  }

  /** The budget ledger (the object named SPEND_LEDGER_NAME): applies a region object's batch once, answers the totals. */
  spend(report: unknown): SpendTotals {
    return ledgerSpend(this.usageStore, report);
  }

  /** This object's usage ledger rows for a query (GET /admin/usage), what is still in memory written first. */
  usage(init: RegionInit, query: unknown): UsageAnswer {
    const router = this.ensure(init);
    const q = usageQuerySchema.parse(query);
    this.flushUsage(Date.now());
    const limit = q.limit ?? MAX_USAGE_EXPORT_ROWS;
    const data = this.usageStore.query(q, router.settings.name, limit + 1);
    return data.length > limit ? { data: [], overflow: true, shards: this.usageShards } : { data, shards: this.usageShards };
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
        this.nodeStore.forget(r.node_id);
      }
      if (cred.kind === "region" && cred.registerSha256 !== undefined) {
        this.nodeStore.setSecret(r.node_id, cred.registerSha256);
      }
    }
    const { spec, changed } = await this.applyReport(router, r, now);
    this.loadExchange.publish(router, spec.id, { ...r, url: spec.url });
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
      before.maxRunning !== spec.maxRunning ||
      JSON.stringify(before.models) !== JSON.stringify(spec.models);
    const lastWrite = this.nodeStore.persistedAt(spec.id);
    if (changed || (seenIsDurable && now - lastWrite > router.settings.nodeSilenceMs * LAST_SEEN_WRITE_FRACTION))
      this.nodeStore.persist(spec);
    await this.scheduleAlarm(now + router.settings.nodeSilenceMs);
    // A new node, a restarted one, or a report of a shorter queue: the region's queue may go on.
    if (this.router === router) this.serveQueue(router, Date.now());
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
    this.nodeStore.forget(id);
    this.loadExchange.publish(this.router!, id, undefined);
    // Requests queued for the model only this node served are refused now, not at their deadline.
    this.serveQueue(this.router!, Date.now());
    return decision;
  }

  /** A node removed through shard 0 of a sharded region (the worker passes the removal on). */
  forgetNode(init: RegionInit, nodeId: unknown): void {
    const id = nodeIdSchema.parse(nodeId);
    if (this.ensure(init).removeNode(id)) this.nodeStore.forget(id);
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
    if (this.budgets.pending) await this.budgets.exchange();
    this.ctx.abort(RESTART_REASON);
  }

  override async alarm(): Promise<void> {
    this.alarmAt = undefined;
    if (this.pendingUsage.size > 0) this.flushUsage(Date.now());
    if (this.budgets.pending) await this.budgets.exchange();
    // Spend the budget ledger has not acknowledged is sent again at the next interval.
    if (this.budgets.pending) await this.scheduleAlarm(Date.now() + this.flushIntervalMs);
    // Holds past their request timeout or idle grace are released (reservations.ts).
    await this.scheduleAlarm(this.budgets.expire(Date.now()));
    const router = this.router;
    if (!router) return;
    // A shard that has routed nothing lately hears the feed before expiring anyone (load-exchange.ts).
    await this.shard.hearFeedBeforeExpiry(router);
    const { expired, nextAt } = router.expire(Date.now());
    for (const id of expired) {
      this.nodeStore.forget(id);
      if (this.loadExchange.has(id)) this.loadExchange.publish(router, id, undefined);
      console.log(JSON.stringify({ event: "node_expired", region: router.settings.name, node: id }));
    }
    this.serveQueue(router, Date.now());
    await this.scheduleAlarm(nextAt);
  }
}
