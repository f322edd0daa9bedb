/** Reserve, then settle (src/core/usage/reservations.ts): what a budgeted request holds, and when it stops holding it. */
import { describe, expect, it } from "vitest";
import {
  CORRECTION_WINDOW,
  DEFAULT_RESERVE_MAX_TOKENS,
  MAX_PROMPT_FACTOR,
  PromptCorrection,
  IDLE_GRACE_MS,
  MAX_HOLDS,
  requestedMaxTokens,
  reservationOf,
  Reservations,
} from "../../../src/core/usage/reservations.ts";

const AT = Date.UTC(2026, 11, 5, 12, 0, 0);
const TIMEOUT = 600_000;
const DAY = "2026-12-05";
const MONTH = "2026-12";

describe("requestedMaxTokens", () => {
  it("reads each API's completion bound, the newer name first, and ignores what a node would not honour", () => {
    expect(requestedMaxTokens("/v1/chat/completions", { max_tokens: 50 })).toBe(50);
    expect(requestedMaxTokens("/v1/chat/completions", { max_completion_tokens: 20, max_tokens: 50 })).toBe(20);
    expect(requestedMaxTokens("/v1/chat/completions", { max_completion_tokens: null, max_tokens: 50 })).toBe(50);
    expect(requestedMaxTokens("/v1/completions", { max_tokens: 7 })).toBe(7);
    expect(requestedMaxTokens("/v1/responses", { max_output_tokens: 300, max_tokens: 1 })).toBe(300);
    expect(requestedMaxTokens("/v1/messages", { max_tokens: 1024 })).toBe(1024);
    for (const bad of [0, -5, 1.5, "12", 1e300, true])
      expect(requestedMaxTokens("/v1/chat/completions", { max_tokens: bad })).toBeUndefined();
    expect(requestedMaxTokens("/v1/chat/completions", {})).toBeUndefined();
    expect(requestedMaxTokens("/v1/other", { max_tokens: 5 })).toBeUndefined();
  });
});

describe("reservationOf", () => {
  const price = { input: 3, cachedInput: 1, output: 15 };
  it("holds the prompt plus max_tokens, or the cap when none or more is asked; in USD with the whole prompt uncached", () => {
    expect(reservationOf(300, 32, DEFAULT_RESERVE_MAX_TOKENS, price)).toEqual({ tokens: 332, usd: (300 * 3 + 32 * 15) / 1e6 });
    expect(reservationOf(300, undefined, 1000, price).tokens).toBe(1300);
    expect(reservationOf(300, 50_000, 1000, price).tokens).toBe(1300);
    expect(reservationOf(300, 32, 1000, undefined)).toEqual({ tokens: 332, usd: 0 });
  });
});

describe("Reservations", () => {
  it("sums holds by tenant, day and month, and frees them on release", () => {
    const r = new Reservations();
    expect(r.reserve("a", "t", { tokens: 300, usd: 0.5 }, AT, AT + TIMEOUT)).toBe(true);
    expect(r.reserve("b", "t", { tokens: 200, usd: 0.25 }, AT, AT + TIMEOUT)).toBe(true);
    r.reserve("c", "u", { tokens: 1000, usd: 0 }, AT, AT + TIMEOUT);
    expect(r.held("t", DAY)).toEqual({ tokens: 500, usd: 0.75 });
    expect(r.held("t", MONTH)).toEqual({ tokens: 500, usd: 0.75 });
    expect(r.held("u", DAY).tokens).toBe(1000);
    expect(r.held("t", "2026-12-06")).toEqual({ tokens: 0, usd: 0 });
    expect(r.release("a")).toBe(true);
    expect(r.release("a")).toBe(false);
    expect(r.held("t", DAY)).toEqual({ tokens: 200, usd: 0.25 });
    r.release("b");
    // Emptied exactly, whatever a float's last bits would have left.
    expect(r.held("t", DAY)).toEqual({ tokens: 0, usd: 0 });
    expect(r.size).toBe(1);
  });

  it("a retry or continuation takes up the same hold; its completion finds it by ticket", () => {
    const r = new Reservations();
    r.reserve("req", "t", { tokens: 300, usd: 0 }, AT, AT + TIMEOUT);
    r.ticketed("req", "t1");
    // The first node failed; the retry is placed (attach) before or after that completion: once held either way.
    r.detach("req", AT + 10);
    expect(r.attach("req")).toBe(true);
    expect(r.reserve("req", "t", { tokens: 300, usd: 0 }, AT, AT + TIMEOUT)).toBe(true);
    expect(r.held("t", DAY).tokens).toBe(300);
    r.ticketed("req", "t2");
    expect(r.requestOf("t1")).toBe("req");
    expect(r.requestOf("t2")).toBe("req");
    expect(r.attach("unknown")).toBe(false);
    r.release("req");
    expect(r.requestOf("t1")).toBeUndefined();
    expect(r.requestOf("t2")).toBeUndefined();
  });

  it("a hold whose placements all failed is released after its idle grace; every hold at its request timeout", () => {
    const r = new Reservations();
    r.reserve("failed", "t", { tokens: 100, usd: 0 }, AT, AT + TIMEOUT);
    r.reserve("live", "t", { tokens: 200, usd: 0 }, AT, AT + TIMEOUT);
    r.detach("failed", AT + 1_000);
    expect(r.nextExpiry()).toBe(AT + 1_000 + IDLE_GRACE_MS);
    expect(r.expire(AT + 1_000 + IDLE_GRACE_MS - 1)).toBe(0);
    expect(r.expire(AT + 1_000 + IDLE_GRACE_MS)).toBe(1);
    expect(r.held("t", DAY).tokens).toBe(200);
    // Two placements live: one failing leaves the hold to the other.
    r.attach("live");
    r.detach("live", AT + 2_000);
    expect(r.expire(AT + 2_000 + IDLE_GRACE_MS)).toBe(0);
    expect(r.nextExpiry()).toBe(AT + TIMEOUT);
    expect(r.expire(AT + TIMEOUT)).toBe(1);
    expect(r.size).toBe(0);
    expect(r.nextExpiry()).toBeUndefined();
  });

  it("is bounded: past MAX_HOLDS a new request is not held (the caller refuses it)", () => {
    const r = new Reservations();
    for (let i = 0; i < MAX_HOLDS; i++) r.reserve(`r${i}`, "t", { tokens: 1, usd: 0 }, AT, AT + TIMEOUT);
    expect(r.reserve("one-more", "t", { tokens: 1, usd: 0 }, AT, AT + TIMEOUT)).toBe(false);
    expect(r.held("t", DAY).tokens).toBe(MAX_HOLDS);
    r.release("r0");
    expect(r.reserve("one-more", "t", { tokens: 1, usd: 0 }, AT, AT + TIMEOUT)).toBe(true);
  });
});

describe("PromptCorrection", () => {
  it("widens a model's holds by the largest ratio of its recent bills' prompts to the estimate, within bounds", () => {
    const c = new PromptCorrection();
    const own = { tokens: 340, usd: 0.34 };
    // Before any bill: as the worker computed it.
    expect(c.widen("m", 308, own)).toBe(own);
    // The simulated fleet's chat template: 27 tokens past a 308-token estimate.
    c.observe("m", 308, 335);
    c.observe("m", 308, 320);
    expect(c.factor("m")).toBeCloseTo(335 / 308);
    const wide = c.widen("m", 308, own);
    expect(wide.tokens).toBe(340 + 27);
    expect(wide.usd).toBeCloseTo(0.34 * (367 / 340));
    // A prompt counted under the estimate never narrows a hold; other models are untouched.
    c.observe("n", 100, 50);
    expect(c.factor("n")).toBe(1);
    expect(c.factor("other")).toBe(1);
    // An absurd count widens by at most MAX_PROMPT_FACTOR, and leaves the window after CORRECTION_WINDOW bills.
    c.observe("m", 308, 9e15);
    expect(c.factor("m")).toBe(MAX_PROMPT_FACTOR);
    for (let i = 0; i < CORRECTION_WINDOW; i++) c.observe("m", 308, 308);
    expect(c.factor("m")).toBe(1);
    c.observe("m", 0, 10);
    expect(c.factor("m")).toBe(1);
  });

  it("the hold keeps its request's model and estimate for the bill that settles it", () => {
    const r = new Reservations();
    r.reserve("req", "t", { tokens: 340, usd: 0 }, AT, AT + TIMEOUT, { model: "m", promptTokens: 308 });
    expect(r.promptOf("req")).toEqual({ model: "m", promptTokens: 308 });
    r.release("req");
    expect(r.promptOf("req")).toBeUndefined();
  });
});
