/**
 * A region object's view of what budgeted tenants have spent over every region, and the check a
 * request passes before it is placed (docs/USAGE.md). What the object knows: the budget ledger's
 * totals as of its last exchange (every region's spend, this object's sent batches included), plus
 * what it has spent itself since (`unsent`, and a batch sent but not yet acknowledged). The check is
 * in memory, on the request's way through the object it already asks: a budget never adds a round
 * trip. The price is the overshoot: what other regions spent since the last exchange, and requests
 * in flight when the budget ran out (bounded in docs/USAGE.md, measured by test/api/budgets.test.ts).
 */
import type { Bill, RouteBudget, Spend } from "../../contracts/usage.ts";
import { dayEndsAt, monthEndsAt, utcDay, utcMonth } from "./periods.ts";

/** A budget a tenant has spent: which, how much, and when it resets. */
export interface OverBudget {
  limit: "tokens_per_day" | "tokens_per_month" | "usd_per_day" | "usd_per_month";
  budget: number;
  spent: number;
  /** ms epoch */
  resetsAt: number;
}

interface Amount {
  tokens: number;
  usd: number;
}

const key = (tenant: string, period: string) => `${tenant}\u0000${period}`;

function add(map: Map<string, Amount>, k: string, tokens: number, usd: number): void {
  const a = map.get(k);
  if (a) {
    a.tokens += tokens;
    a.usd += usd;
  } else map.set(k, { tokens, usd });
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
      total.tokens += a.tokens;
      total.usd += a.usd;
    }
    return total;
  }

  /** The first of the tenant's budgets it has spent at `at`, or undefined: it may go on. */
  check(tenant: string, budget: RouteBudget | undefined, at: number): OverBudget | undefined {
    if (!budget) return undefined;
    const day = this.spent(tenant, utcDay(at));
    const month = this.spent(tenant, utcMonth(at));
    const over = (limit: OverBudget["limit"], max: number | undefined, spent: number, resetsAt: number): OverBudget | undefined => {
      if (max === undefined) return undefined;
      const before = this.spentBudgets.get(key(tenant, limit));
      if (before && before.budget === max && before.resetsAt === resetsAt) spent = Math.max(spent, before.spent);
      return spent >= max ? { limit, budget: max, spent, resetsAt } : undefined;
    };
    return (
      over("tokens_per_day", budget.tokensPerDay, day.tokens, dayEndsAt(at)) ??
      over("usd_per_day", budget.usdPerDay, day.usd, dayEndsAt(at)) ??
      over("tokens_per_month", budget.tokensPerMonth, month.tokens, monthEndsAt(at)) ??
      over("usd_per_month", budget.usdPerMonth, month.usd, monthEndsAt(at))
    );
  }

  /** Whether `over` is news (not yet remembered): the object then keeps it. */
  isNew(tenant: string, over: OverBudget): boolean {
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
    for (const t of totals) add(known, key(t.tenant, t.period), t.tokens, t.usd);
    this.known = known;
    this.lastAnsweredAt = at;
  }
}

/** The refusal's message: which budget, what was spent, when it resets. */
export function overBudgetMessage(tenant: string, over: OverBudget): string {
  const usd = over.limit.startsWith("usd");
  const amount = (n: number) => (usd ? `USD ${n.toFixed(2)}` : `${Math.round(n).toLocaleString("en-US")} tokens`);
  const per = over.limit.endsWith("day") ? "a day (UTC)" : "a month (UTC)";
  return (
    `Tenant ${tenant} has spent its budget of ${amount(over.budget)} ${per} (${amount(over.spent)} spent over every region); ` +
    `it resets at ${new Date(over.resetsAt).toISOString().replace(".000Z", "Z")}`
  );
}
