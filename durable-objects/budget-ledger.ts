/**
 * Budgets (docs/USAGE.md), both sides of the budget ledger, each a role of the one region object
 * class (durable-objects/region.ts): a region object's link to the ledger ({@link BudgetLedgerLink}:
 * the budget check in `route`, and the exchange that sends the ledger what budgeted tenants spent
 * here and takes back their totals over every region), and the ledger itself, the object named
 * SPEND_LEDGER_NAME ({@link ledgerSpend}: applies a region object's batch once, answers the totals).
 */
import type { CompletionOutcome, RouteAnswer } from "../src/contracts/region-object.ts";
import { CONTRACT_HEADER, REGION_CONTRACT_VERSION, regionPath } from "../src/contracts/region-service.ts";
import type { RouteRequest } from "../src/contracts/routing.ts";
import { spendReportSchema, spendTotalsSchema, type Bill, type SpendReport, type SpendTotals } from "../src/contracts/usage.ts";
import type { RegionRouter } from "../src/core/region/index.ts";
import { utcDay, utcMonth } from "../src/core/usage/periods.ts";
import { overBudgetMessage, overBudgetRetryAfter, SpendView } from "../src/core/usage/spend.ts";
import { PromptCorrection } from "../src/core/usage/reservations.ts";
import { budgetLedgerHome, spendLedgerStub } from "./addressing.ts";
import { DEFAULT_RETENTION_DAYS, type UsageStore } from "./usage-store.ts";

/**
 * Holds are scanned for expiry on a budgeted request's way at most this often (a scan is O(holds));
 * the alarm scans too. A second is nothing next to their idle grace (10 s) and request timeout.
 */
const EXPIRE_INTERVAL_MS = 1_000;

/** Where a region object stands when it talks to the ledger. */
interface LedgerLinkContext {
  /** The object's region (its router's), once it has one. */
  region: string | undefined;
  /** Its shard in a sharded region, once it has routed as one. */
  shard: number | undefined;
  /** How often the ledger is asked at most (the usage flush interval). */
  flushIntervalMs: number;
  /** The ledger's home region (from the object's init), if known. */
  ledgerRegion: string | undefined;
}

/** A region object's side of the budget ledger: budgeted tenants' spend as this object knows it, and its exchanges with the ledger. */
export class BudgetLedgerLink {
  private readonly ctx: DurableObjectState;
  private readonly env: Env;
  private readonly usageStore: UsageStore;
  private readonly where: () => LedgerLinkContext;
  private readonly spendView = new SpendView();
  /** How far nodes count prompts past the router's estimate, by model: holds are widened by it. */
  private readonly prompts = new PromptCorrection();
  /** This instance, as the budget ledger tells its batches apart (a restarted object is a new source). */
  private readonly instance = crypto.randomUUID().slice(0, 8);
  private spendExchanging = false;
  /** When the holds were last scanned for expiry on a request's way (at most every EXPIRE_INTERVAL_MS). */
  private expiredAt = -Infinity;
  /** When the last exchange with the budget ledger began: a failing ledger is asked at most once a flush interval, not once a request. */
  private spendAttemptAt = -Infinity;

  constructor(ctx: DurableObjectState, env: Env, usageStore: UsageStore, where: () => LedgerLinkContext) {
    this.ctx = ctx;
    this.env = env;
    this.usageStore = usageStore;
    this.where = where;
    for (const { tenant, over } of usageStore.spentBudgets(Date.now())) this.spendView.remember(tenant, over);
  }

  /** Whether there is spend the ledger has not acknowledged. */
  get pending(): boolean {
    return this.spendView.pending;
  }

  /** Counts a bill's spend (a budgeted tenant's), for the next exchange and this object's own checks. */
  record(bill: Bill, now: number): void {
    this.spendView.record(bill, now);
  }

  /**
   * The budget check of a request, in the `route` call that admits it: its refusal (recorded with
   * the router) if its tenant has spent a budget or its requests in flight here hold the rest,
   * else undefined and the request holds its reservation until its bill settles it
   * (src/core/usage/reservations.ts). A retry or a continuation (no budget, its dispatch's hold key)
   * takes up the hold its first placement took. The ledger's totals are refreshed off the
   * request's path, at most once a flush interval.
   */
  admit(router: RegionRouter, req: RouteRequest, now: number): Extract<RouteAnswer, { ok: false }> | undefined {
    const holds = this.spendView.reservations;
    if (req.budget === undefined || req.tenant === undefined) {
      holds.attach(holdKey(req));
      return undefined;
    }
    const interval = this.where().flushIntervalMs;
    if (now - this.spendView.lastAnsweredAt > interval && now - this.spendAttemptAt > interval) this.ctx.waitUntil(this.exchange());
    if (now - this.expiredAt >= EXPIRE_INTERVAL_MS) {
      this.expiredAt = now;
      holds.expire(now);
    }
    // Widened by how far this model's nodes have counted prompts past the estimate (reservations.ts).
    const own = this.prompts.widen(req.model, req.promptTokens, req.reservation ?? { tokens: 0, usd: 0 });
    const over = this.spendView.check(req.tenant, req.budget, now, own);
    if (!over) {
      const prompt = { model: req.model, promptTokens: req.promptTokens };
      if (holds.reserve(holdKey(req), req.tenant, own, now, now + router.settings.requestTimeoutMs, prompt)) return undefined;
      return {
        ok: false,
        reason: "saturated",
        message: `region ${router.settings.name} holds too many budgeted requests`,
        retryAfterSeconds: 1,
      };
    }
    router.rejectOverBudget(req, now);
    if (this.spendView.isNew(req.tenant, over)) {
      this.spendView.remember(req.tenant, over);
      this.usageStore.rememberSpent(req.tenant, over);
    }
    return {
      ok: false,
      reason: "over-budget",
      message: overBudgetMessage(req.tenant, over),
      retryAfterSeconds: overBudgetRetryAfter(over, now),
    };
  }

  /**
   * The request's placement in this call: a ticket its completion will settle the hold with, or
   * none. A first placement refused here holds nothing; a retry or a continuation refused here
   * leaves the hold to another placement, or to its idle grace.
   */
  placed(req: RouteRequest, result: { ok: true; ticket: string } | { ok: false }, now: number): void {
    const holds = this.spendView.reservations;
    const key = holdKey(req);
    if (result.ok) holds.ticketed(key, result.ticket);
    else if (req.budget !== undefined) holds.release(key);
    else holds.detach(key, now);
  }

  /**
   * A placement's completion: with the request's bill (counted by the caller first) or an end
   * that bills nothing (its node refused it, the client left), the hold is released; a node that
   * failed leaves it to the retry or continuation that may follow.
   */
  completed(ticket: string, outcome: CompletionOutcome, now: number): "released" | "detached" | undefined {
    const holds = this.spendView.reservations;
    const requestId = holds.requestOf(ticket);
    if (requestId === undefined) return undefined;
    if (outcome.bill || outcome.status === "refused" || outcome.status === "cancelled" || outcome.status === "ok") {
      const prompt = holds.promptOf(requestId);
      // What the node counted teaches the next holds of its model; an estimated bill teaches nothing.
      if (outcome.bill && !outcome.bill.estimated && prompt)
        this.prompts.observe(prompt.model, prompt.promptTokens, outcome.bill.promptTokens);
      holds.release(requestId);
      return "released";
    }
    holds.detach(requestId, now);
    return "detached";
  }

  /** Releases holds past their request timeout or idle grace; when the next one is due (for the alarm). */
  expire(now: number): number | undefined {
    this.spendView.reservations.expire(now);
    return this.spendView.reservations.nextExpiry();
  }

  /**
   * Sends the budget ledger what budgeted tenants spent here since the last batch, and takes back
   * every tenant's totals for today and this month. One at a time; a failed batch is resent as it
   * was (the ledger applies it once).
   */
  async exchange(): Promise<void> {
    if (this.spendExchanging) return;
    this.spendExchanging = true;
    const now = Date.now();
    this.spendAttemptAt = now;
    const batch = this.spendView.takeBatch();
    try {
      const { region, shard } = this.where();
      const source = `${region ?? "?"}/${shard ?? 0}/${this.instance}`;
      const report = { source, seq: batch.seq, spends: batch.spends, periods: [utcDay(now), utcMonth(now)] };
      this.spendView.acknowledge(batch.seq, spendTotalsSchema.parse(await this.sendSpend(report)).totals, Date.now());
    } catch (e) {
      console.error(JSON.stringify({ event: "spend_exchange_error", region: this.where().region, message: String(e) }));
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
    const home = budgetLedgerHome(this.env);
    if (!home) return spendLedgerStub(this.env).spend(report);
    const region = this.where().ledgerRegion ?? "";
    const res = await home.fetch(`https://region.warmpath.internal${regionPath.spend(region)}`, {
      method: "POST",
      headers: { "content-type": "application/json", [CONTRACT_HEADER]: String(REGION_CONTRACT_VERSION) },
      body: JSON.stringify(report),
    });
    if (!res.ok) throw new Error(`budget ledger's home ${region} answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
    return res.json();
  }
}

/** The budget ledger (the object named SPEND_LEDGER_NAME): applies a region object's batch once, answers the totals. */
export function ledgerSpend(usageStore: UsageStore, report: unknown): SpendTotals {
  const r = spendReportSchema.parse(report);
  const now = Date.now();
  const totals = usageStore.applySpend(r, now);
  usageStore.prune(DEFAULT_RETENTION_DAYS, now);
  return { totals };
}

/** What a request's hold is kept under: its dispatch's key, else (an older region worker) its id (routing.ts `holdKey`). */
function holdKey(req: RouteRequest): string {
  return req.holdKey ?? req.requestId;
}
