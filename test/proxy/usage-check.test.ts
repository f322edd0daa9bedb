import { describe, expect, it } from "vitest";
import {
  COMPLETION_SLACK_TOKENS,
  MAX_CHARS_PER_TOKEN,
  PROMPT_ALLOWANCE_TOKENS,
  PROMPT_ESTIMATE_FACTOR,
  checkUsage,
  type UsageBounds,
} from "../../src/proxy/usage-check.ts";

const bounds: UsageBounds = { maxTokens: 100, relayedBytes: 10_000, relayedChars: 400, promptEstimate: 50 };
const honest = { promptTokens: 60, cachedTokens: 32, completionTokens: 80 };

describe("checkUsage", () => {
  it("accepts an honest usage as it is", () => {
    expect(checkUsage(honest, bounds)).toEqual({ ok: true, usage: honest });
  });

  it("refuses counts that are not non-negative safe integers", () => {
    for (const bad of [
      { ...honest, completionTokens: -100_000 },
      { ...honest, completionTokens: 2.5 },
      { ...honest, promptTokens: -1 },
      { ...honest, cachedTokens: 1.5 },
      { ...honest, completionTokens: Number.NaN },
      { ...honest, completionTokens: 2 ** 60 },
    ]) {
      expect(checkUsage(bad, bounds)).toMatchObject({ ok: false, reason: "not-counts" });
    }
    expect(checkUsage({ ...honest, cachedTokens: 61 }, bounds)).toMatchObject({ ok: false, reason: "cached-over-prompt" });
  });

  it("bounds completion tokens by max_tokens plus the slack, and by the bytes relayed", () => {
    const at = 100 + COMPLETION_SLACK_TOKENS;
    expect(checkUsage({ ...honest, completionTokens: at }, bounds).ok).toBe(true);
    expect(checkUsage({ ...honest, completionTokens: at + 1 }, bounds)).toEqual({ ok: false, reason: "over-max-tokens", limit: at });
    expect(checkUsage({ ...honest, completionTokens: 9e15 }, { ...bounds, maxTokens: 5 })).toMatchObject({ reason: "over-max-tokens" });
    // Without max_tokens the relayed bytes bound it.
    const open = { ...bounds, maxTokens: undefined, relayedBytes: 500 };
    expect(checkUsage({ ...honest, completionTokens: 516 }, open).ok).toBe(true);
    expect(checkUsage({ ...honest, completionTokens: 517 }, open)).toEqual({ ok: false, reason: "over-relayed", limit: 516 });
  });

  it("refuses far fewer completion tokens than the relayed text can hold", () => {
    const chars = 100 * MAX_CHARS_PER_TOKEN;
    const b = { ...bounds, maxTokens: undefined, relayedChars: chars, relayedBytes: chars * 2 };
    expect(checkUsage({ ...honest, completionTokens: 100 }, b).ok).toBe(true);
    expect(checkUsage({ ...honest, completionTokens: 99 }, b)).toEqual({ ok: false, reason: "under-relayed", limit: 100 });
    // Unknown text (not a stream the seam read): no lower bound.
    expect(checkUsage({ ...honest, completionTokens: 0 }, { ...b, relayedChars: undefined }).ok).toBe(true);
  });

  it("bounds prompt tokens by a factor of the router's estimate", () => {
    const most = PROMPT_ESTIMATE_FACTOR * 50 + PROMPT_ALLOWANCE_TOKENS;
    expect(checkUsage({ ...honest, promptTokens: most }, bounds).ok).toBe(true);
    expect(checkUsage({ ...honest, promptTokens: most + 1 }, bounds)).toEqual({ ok: false, reason: "prompt-over-estimate", limit: most });
    expect(checkUsage({ promptTokens: 0, completionTokens: 1 }, bounds)).toMatchObject({ ok: false, reason: "prompt-under-estimate" });
    // An image's base64 makes the estimate far larger than the engine's count: not refused.
    expect(checkUsage({ ...honest, promptTokens: 1_500 }, { ...bounds, promptEstimate: 330_000 }).ok).toBe(true);
  });
});
