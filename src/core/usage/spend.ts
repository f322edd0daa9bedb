/**
 * A region object's view of what budgeted tenants have spent over every region, and the check a
 * request passes before it is placed (docs/USAGE.md). What the object knows: the budget ledger's
 * totals as of its last exchange (every region's spend, this object's sent batches included), plus
 * what it has spent itself since (`unsent`, and a batch sent but not yet acknowledged). The check is
 * in memory, on the request's way through the object it already asks: a budget never adds a round
 * trip. Requests in flight here hold what they may spend (reservations.ts) and the check counts
 * it, so concurrency within one object adds nothing to the overshoot; what remains is what other
 * regions spent since the last exchange, and one request's worth per object (bounded in
 * docs/USAGE.md, measured by bench/BUDGET.md and test/api/budgets.test.ts).
 */
import type { Bill, RouteBudget, Spend } from "../../contracts/usage.ts";
import { addTokens, addUsd, tokenCount, usdAmount } from "./bounds.ts";
import { dayEndsAt, monthEndsAt, utcDay, utcMonth } from "./periods.ts";
import { periodKey as key, Reservations, type Amount } from "./reservations.ts";

/** A budget a tenant has spent: which, how much, and when it resets. */
export interface OverBudget {
  limit: "tokens_per_day" | "tokens_per_month" | "usd_per_day" | "usd_per_month";
  budget: number;
  spent: number;
  /** ms epoch */
  resetsAt: number;
  /**
   * Set when what is spent leaves room but the tenant's requests in flight here hold it
   * (reservations.ts): what they hold. Such a refusal is not remembered: it lasts only until they
   * settle.
   */
  reserved?: number;
}

/** Adds to a sum, saturating (bounds.ts): one absurd bill never makes a batch unsendable. */
function add(map: Map<string, Amount>, k: string, tokens: number, usd: number): void {
  const a = map.get(k);
  if (a) {
    a.tokens = addTokens(a.tokens, tokens);
    a.usd = addUsd(a.usd, usd);
  } else map.set(k, { tokens: tokenCount(tokens), usd: usdAmount(usd) });
}

export class SpendView {
  /** The ledger's totals at the last exchange, by tenant and period. */
  private known = new Map<string, Amount>();
  /** Spent here since the last batch was taken. */
  private unsent = new Map<string, Amount>();
  /** The batch sent and not yet acknowledged: resent as it is (same seq) until it is; its amounts by tenant and period. */
  private inflight: { seq: number; spends: Spend[]; amounts: Map<string, Amount> } | undefined;
  private seq = 0;
  /** When the ledger last answered (ms epoch; -Infinity: never). */
  lastAnsweredAt = -Infinity;
  /**
   * Budgets found spent, kept by the object across restarts (a restarted object knows no totals
   * until its first exchange answers): by tenant and limit, with the budget they were spent
   * against (a raised budget does not hold) and when they reset.
   */
  private readonly spentBudgets = new Map<string, OverBudget>();
  /** What this object's budgeted requests in flight hold. */
  readonly reservations = new Reservations();

  /** A budget found spent before (from storage): it holds until it resets or is changed. */
  remember(tenant: string, over: OverBudget): void {
    this.spentBudgets.set(key(tenant, over.limit), over);
  }

  /** Counts a budgeted tenant's bill in the day and month `at` falls in. */
  record(bill: Bill, at: number): void {
    if (!bill.budgeted) return;
    const tokens = bill.promptTokens + bill.completionTokens;
    add(this.unsent, key(bill.tenant, utcDay(at)), tokens, bill.costUsd);
    add(this.unsent, key(bill.tenant, utcMonth(at)), tokens, bill.costUsd);
  }

  /** What the tenant has spent in `period`, as far as this object knows. */
  spent(tenant: string, period: string): Amount {
    const k = key(tenant, period);
    const total = { tokens: 0, usd: 0 };
    // Three lookups, not a scan: this runs on every budgeted request's route.
    for (const a of [this.known.get(k), this.unsent.get(k), this.inflight?.amounts.get(k)]) {
      if (!a) continue;
      total.tokens = addTokens(total.tokens, a.tokens);
      total.usd = addUsd(total.usd, a.usd);
    }
    return total;
  }

  /**
   * The first of the tenant's budgets a request holding `own` may not go on against at `at`, or
   * undefined: it may. Refused when what is spent reaches a budget, or when spent + held by the
   * tenant's requests in flight here + `own` exceeds it. One exception keeps a budget smaller than
   * one request's hold usable, and is the one request's worth of the overshoot's bound: with
   * nothing of the tenant's in flight here, a request that does not fit whole goes on with what is
   * left (its hold then fills the budget, so it is the only one until it settles).
   */
  check(tenant: string, budget: RouteBudget | undefined, at: number, own: Amount = { tokens: 0, usd: 0 }): OverBudget | undefined {
    if (!budget) return undefined;
    const dayKey = utcDay(at);
    const monthKey = utcMonth(at);
    const day = this.spent(tenant, dayKey);
    const month = this.spent(tenant, monthKey);
    const dayHeld = this.reservations.held(tenant, dayKey);
    const monthHeld = this.reservations.held(tenant, monthKey);
    const over = (
      limit: OverBudget["limit"],
      max: number | undefined,
      spent: number,
      held: number,
      mine: number,
      resetsAt: number,
    ): OverBudget | undefined => {
      if (max === undefined) return undefined;
      const before = this.spentBudgets.get(key(tenant, limit));
      if (before && before.budget === max && before.resetsAt === resetsAt) spent = Math.max(spent, before.spent);
      if (spent >= max) return { limit, budget: max, spent, resetsAt };
      return held > 0 && spent + held + mine > max ? { limit, budget: max, spent, resetsAt, reserved: held } : undefined;
    };
    return (
      over("tokens_per_day", budget.tokensPerDay, day.tokens, dayHeld.tokens, own.tokens, dayEndsAt(at)) ??
      over("usd_per_day", budget.usdPerDay, day.usd, dayHeld.usd, own.usd, dayEndsAt(at)) ??
      over("tokens_per_month", budget.tokensPerMonth, month.tokens, monthHeld.tokens, own.tokens, monthEndsAt(at)) ??
      over("usd_per_month", budget.usdPerMonth, month.usd, monthHeld.usd, own.usd, monthEndsAt(at))
    );
  }

  /** Whether `over` is news (not yet remembered): the object then keeps it. A refusal for what is held is never kept. */
  isNew(tenant: string, over: OverBudget): boolean {
    if (over.reserved !== undefined) return false;
    const before = this.spentBudgets.get(key(tenant, over.limit));
    return !before || before.budget !== over.budget || before.resetsAt !== over.resetsAt;
  }

  /** Whether there is spend the ledger has not acknowledged. */
  get pending(): boolean {
    return this.inflight !== undefined || this.unsent.size > 0;
  }

  /**
   * The next batch for the ledger: the unacknowledged one again, or what was spent since (possibly
   * nothing: an exchange that only refreshes the totals).
   */
  takeBatch(): { seq: number; spends: Spend[] } {
    if (this.inflight) return this.inflight;
    const spends: Spend[] = [];
    for (const [k, a] of this.unsent) {
      const [tenant, period] = k.split("\u0000") as [string, string];
      spends.push({ tenant, period, tokens: a.tokens, usd: a.usd });
    }
    this.inflight = { seq: ++this.seq, spends, amounts: this.unsent };
    this.unsent = new Map();
    return this.inflight;
  }

  /** The ledger answered batch `seq` with every tenant's totals (that batch included). */
  acknowledge(seq: number, totals: readonly Spend[], at: number): void {
    if (this.inflight?.seq === seq) this.inflight = undefined;
    const known = new Map<string, Amount>();
    for (const t of totals) add(known, key(t.tenant, t.period), tokenCount(t.tokens), usdAmount(t.usd));
    this.known = known;
    this.lastAnsweredAt = at;
  }
}

/**
 * When to try again (s): a budget spent resets at its period's end; one held by requests in flight
 * frees as they settle, {@link HELD_RETRY_AFTER_SECONDS}.
 */
export function overBudgetRetryAfter(over: OverBudget, now: number): number {
  if (over.reserved !== undefined) return HELD_RETRY_AFTER_SECONDS;
  return Math.max(1, Math.ceil((over.resetsAt - now) / 1000));
}

/** Retry-After of a refusal for what requests in flight hold: most answers settle within a few seconds. */
const HELD_RETRY_AFTER_SECONDS = 1;

/** The refusal's message: which budget, what was spent (and held), when it resets. */
export function overBudgetMessage(tenant: string, over: OverBudget): string {
  const usd = over.limit.startsWith("usd");
  const amount = (n: number) => (usd ? `USD ${n.toFixed(2)}` : `${Math.round(n).toLocaleString("en-US")} tokens`);
  const per = over.limit.endsWith("day") ? "a day (UTC)" : "a month (UTC)";
  if (over.reserved !== undefined)
    return (
      `Tenant ${tenant}'s budget of ${amount(over.budget)} ${per} is spent or held by its requests in flight ` +
      `(${amount(over.spent)} spent over every region, ${amount(over.reserved)} held by requests in flight here); ` +
      `retry when they finish`
    );
  return (
    `Tenant ${tenant} has spent its budget of ${amount(over.budget)} ${per} (${amount(over.spent)} spent over every region); ` +
    `it resets at ${new Date(over.resetsAt).toISOString().replace(".000Z", "Z")}`
  );
}
