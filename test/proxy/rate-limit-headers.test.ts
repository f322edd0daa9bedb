/** OpenAI's x-ratelimit-* headers (src/proxy/rate-limit-headers.ts). */
import { describe, expect, it } from "vitest";
import { openaiDuration, rateLimitHeaders } from "../../src/proxy/rate-limit-headers.ts";

describe("rate-limit headers", () => {
  it("writes durations as api.openai.com does", () => {
    expect(openaiDuration(0.02)).toBe("20ms");
    expect(openaiDuration(1)).toBe("1s");
    expect(openaiDuration(1.5)).toBe("1.5s");
    expect(openaiDuration(360)).toBe("6m0s");
    expect(openaiDuration(61.25)).toBe("1m1.25s");
  });

  it("names each limit the tenant has, and only those", () => {
    expect(rateLimitHeaders({ requests: { limit: 60, remaining: 59, resetSeconds: 1 } })).toEqual({
      "x-ratelimit-limit-requests": "60",
      "x-ratelimit-remaining-requests": "59",
      "x-ratelimit-reset-requests": "1s",
    });
    expect(rateLimitHeaders(undefined)).toEqual({});
  });
});
