/**
 * Reserve, then settle (docs/USAGE.md, "How it is enforced"): a budgeted request holds what it may
 * spend, its estimated prompt tokens plus its `max_tokens` (capped by the tenant's
 * `budget.reserve_max_tokens`), from its admission until its bill settles it. The budget check
 * (spend.ts) counts what is held beside what was spent, so forty requests admitted at once can no
 * longer each see the whole budget left (issue 31: a 20,000-token budget spent 20.1x).
 *
 * A hold is the region object's alone, in memory: a restarted object starts with none. It ends with
 * the request's bill, or when the request ends without one (refused by its node, cancelled), and
 * the object never waits on the worker for that: a hold whose placements all failed and that no
 * retry or continuation took up within {@link IDLE_GRACE_MS} is released, and every hold expires
 * at the request timeout whatever happened (a worker that died mid-request).
 */
import { addTokens, addUsd, tokenCount, usdAmount } from "./bounds.ts";
import { costUsd, type Price } from "./cost.ts";
import { utcDay, utcMonth } from "./periods.ts";

/** Tokens and USD: what is spent, or held. */
export interface Amount {
  tokens: number;
  usd: number;
}

/**
 * `budget.reserve_max_tokens`'s default: the completion tokens a request that sets no `max_tokens`
 * (or more than this) holds. 4,096 is the largest default output of the common chat APIs, so a
 * typical answer fits its hold; a tenant whose answers run longer raises it.
 */
export const DEFAULT_RESERVE_MAX_TOKENS = 4_096;

/**
 * How long a hold outlives its last placement's failure waiting for a retry or a continuation to
 * take it up: both are asked for within milliseconds of the failure (src/region/place.ts,
 * continue.ts), so 10 s is room for a loaded worker, and short next to a budget's day.
 */
export const IDLE_GRACE_MS = 10_000;

/** Holds one object keeps at most: far more requests than one object has in flight (past it, budgeted requests are refused as saturated). */
export const MAX_HOLDS = 50_000;

/** The body fields that bound a request's completion, by API (the first present wins). */
const MAX_TOKEN_FIELDS: Record<string, readonly string[]> = {
  "/v1/chat/completions": ["max_completion_tokens", "max_tokens"],
  "/v1/completions": ["max_tokens"],
  "/v1/responses": ["max_output_tokens"],
  "/v1/messages": ["max_tokens"],
};

/**
 * The completion tokens a request's body allows (`max_completion_tokens` / `max_tokens`, the
 * Responses API's `max_output_tokens`), or undefined when it sets none a node would honour (absent,
 * null, not a positive integer).
 */
export function requestedMaxTokens(path: string, body: Record<string, unknown>): number | undefined {
  for (const field of MAX_TOKEN_FIELDS[path] ?? []) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    return typeof v === "number" && Number.isSafeInteger(v) && v > 0 ? v : undefined;
  }
  return undefined;
}

/**
 * What a budgeted request holds: its estimated prompt tokens plus its `max_tokens`, or `cap` when
 * it sets none or more; in USD at the tenant's price (all of the prompt uncached: the most it may
 * cost).
 */
export function reservationOf(promptTokens: number, maxTokens: number | undefined, cap: number, price: Price | undefined): Amount {
  const completionTokens = maxTokens === undefined ? cap : Math.min(maxTokens, cap);
  return {
    tokens: tokenCount(promptTokens + completionTokens),
    usd: usdAmount(costUsd({ promptTokens, cachedTokens: 0, completionTokens }, price)),
  };
}

/** Settled bills per model a {@link PromptCorrection} learns from: the most recent, so a changed template or tokenizer is learned within as many requests. */
export const CORRECTION_WINDOW = 32;
/** The largest correction: a node claiming more than 4x the estimate is the usage validation's to refuse (src/region/bill.ts), and no longer widens holds. */
export const MAX_PROMPT_FACTOR = 4;
/** Models a correction is kept for (the oldest forgotten past it). */
const MAX_CORRECTED_MODELS = 1_024;

/**
 * How far the nodes' prompt counts run past the router's estimate (characters / 4), by model,
 * learned from settled bills: the largest ratio of the last {@link CORRECTION_WINDOW}. A hold's
 * prompt is the estimate times it, so requests in flight no longer each overrun their hold by the
 * chat template's tokens (bench/BUDGET.md: 27 tokens a 340-token hold on the simulated fleet,
 * x64 requests in flight), and the overshoot within one object stays one request's worth whatever
 * the concurrency. 1 until a model's first bill; at most {@link MAX_PROMPT_FACTOR}.
 */
export class PromptCorrection {
  private readonly ratios = new Map<string, number[]>();

  /** A settled bill of `model`: the node counted `billed` prompt tokens where the router estimated `estimated`. */
  observe(model: string, estimated: number, billed: number): void {
    if (!(estimated > 0) || !(billed >= 0)) return;
    let window = this.ratios.get(model);
    if (!window) {
      if (this.ratios.size >= MAX_CORRECTED_MODELS) this.ratios.delete(this.ratios.keys().next().value!);
      this.ratios.set(model, (window = []));
    }
    window.push(Math.min(MAX_PROMPT_FACTOR, billed / estimated));
    if (window.length > CORRECTION_WINDOW) window.shift();
  }

  /** The factor a hold's estimated prompt is multiplied by (at least 1). */
  factor(model: string): number {
    const window = this.ratios.get(model);
    return window?.length ? Math.max(1, ...window) : 1;
  }

  /**
   * `own` (a hold as the region worker computed it, for an estimated prompt of `promptTokens`)
   * widened by the model's factor; its USD grown in proportion.
   */
  widen(model: string, promptTokens: number, own: Amount): Amount {
    const extra = Math.ceil(promptTokens * (this.factor(model) - 1));
    if (extra <= 0 || own.tokens <= 0) return own;
    return { tokens: tokenCount(own.tokens + extra), usd: usdAmount(own.usd * ((own.tokens + extra) / own.tokens)) };
  }
}

/** The key of a tenant's period (`2026-12-05`, `2026-12`), as spend.ts keys its sums. */
export const periodKey = (tenant: string, period: string) => `${tenant}\u0000${period}`;

interface Hold {
  tenant: string;
  /** The model, and the router's estimate of the prompt: a settled bill's prompt teaches the {@link PromptCorrection}. */
  model: string;
  promptTokens: number;
  day: string;
  month: string;
  amount: Amount;
  /** ms epoch: released then whatever happened (the request timeout). */
  expiresAt: number;
  /** Placements (route calls) of the request under way: 0 once the last failed without a bill. */
  live: number;
  /** When `live` fell to 0 (ms epoch). */
  idleSince: number | undefined;
  /** Its placements' tickets, forgotten with it. */
  tickets: string[];
}

/** The holds of one region object, by hold key (a request's dispatch: routing.ts `holdKey`), and their sums by tenant and period. */
export class Reservations {
  private readonly holds = new Map<string, Hold>();
  private readonly byTicket = new Map<string, string>();
  private readonly sums = new Map<string, Amount & { holds: number }>();

  /** Holds in force. */
  get size(): number {
    return this.holds.size;
  }

  /** What the tenant's requests in flight here hold in `period` (a day or a month). */
  held(tenant: string, period: string): Amount {
    const sum = this.sums.get(periodKey(tenant, period));
    return sum ? { tokens: sum.tokens, usd: sum.usd } : { tokens: 0, usd: 0 };
  }

  has(requestId: string): boolean {
    return this.holds.has(requestId);
  }

  /** Holds `amount` for a request admitted at `at` (counted in that day and month); false when {@link MAX_HOLDS} are held. */
  reserve(
    requestId: string,
    tenant: string,
    amount: Amount,
    at: number,
    expiresAt: number,
    prompt: { model: string; promptTokens: number } = { model: "", promptTokens: 0 },
  ): boolean {
    if (this.holds.has(requestId)) return this.attach(requestId);
    if (this.holds.size >= MAX_HOLDS) return false;
    const hold: Hold = {
      tenant,
      ...prompt,
      day: utcDay(at),
      month: utcMonth(at),
      amount,
      expiresAt,
      live: 1,
      idleSince: undefined,
      tickets: [],
    };
    this.holds.set(requestId, hold);
    this.add(hold, 1);
    return true;
  }

  /** A retry or a continuation of a held request is being placed: it holds nothing more. */
  attach(requestId: string): boolean {
    const hold = this.holds.get(requestId);
    if (!hold) return false;
    hold.live++;
    hold.idleSince = undefined;
    return true;
  }

  /** A placement of the request got a ticket: its completion finds the hold by it. */
  ticketed(requestId: string, ticket: string): void {
    const hold = this.holds.get(requestId);
    if (!hold) return;
    hold.tickets.push(ticket);
    this.byTicket.set(ticket, requestId);
  }

  /** The model and estimated prompt of a held request. */
  promptOf(requestId: string): { model: string; promptTokens: number } | undefined {
    const hold = this.holds.get(requestId);
    return hold && { model: hold.model, promptTokens: hold.promptTokens };
  }

  /** The request a ticket was placed for, if it holds anything. */
  requestOf(ticket: string): string | undefined {
    return this.byTicket.get(ticket);
  }

  /** A placement ended without settling the request (its node failed; a retry or a continuation may follow). */
  detach(requestId: string, at: number): void {
    const hold = this.holds.get(requestId);
    if (!hold) return;
    hold.live = Math.max(0, hold.live - 1);
    if (hold.live === 0) hold.idleSince = at;
  }

  /** The request is settled (its bill counted) or ended without one: what it held is free. */
  release(requestId: string): boolean {
    const hold = this.holds.get(requestId);
    if (!hold) return false;
    this.holds.delete(requestId);
    for (const t of hold.tickets) this.byTicket.delete(t);
    this.add(hold, -1);
    return true;
  }

  /** Releases the holds past their request timeout, or idle past {@link IDLE_GRACE_MS}; how many. */
  expire(now: number): number {
    let n = 0;
    for (const [id, hold] of this.holds) {
      if (hold.expiresAt <= now || (hold.idleSince !== undefined && now - hold.idleSince >= IDLE_GRACE_MS)) {
        this.release(id);
        n++;
      }
    }
    return n;
  }

  /** When the next hold expires at the latest (ms epoch), for the object's alarm; undefined with none. */
  nextExpiry(): number | undefined {
    let next: number | undefined;
    for (const hold of this.holds.values()) {
      const at = hold.idleSince !== undefined ? Math.min(hold.expiresAt, hold.idleSince + IDLE_GRACE_MS) : hold.expiresAt;
      next = next === undefined ? at : Math.min(next, at);
    }
    return next;
  }

  private add(hold: Hold, sign: 1 | -1): void {
    for (const period of [hold.day, hold.month]) {
      const k = periodKey(hold.tenant, period);
      const sum = this.sums.get(k) ?? { tokens: 0, usd: 0, holds: 0 };
      sum.holds += sign;
      // The last hold of a period gone, its sum goes with it: a float's last bits never linger as a hold.
      if (sum.holds <= 0) {
        this.sums.delete(k);
        continue;
      }
      sum.tokens = addTokens(sum.tokens, sign * hold.amount.tokens);
      sum.usd = addUsd(sum.usd, sign * hold.amount.usd);
      this.sums.set(k, sum);
    }
  }
}
