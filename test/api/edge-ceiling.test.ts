/**
 * The edge's request ceiling (src/config/edge-ceiling.ts): the `RATE_LIMITER` binding, its limit
 * derived from the configuration (vitest.config.ts gives miniflare the same derivation), counting
 * only tenants with a configured request limit.
 */
import { describe, expect, it } from "vitest";
import { edgeCeilingPerMinute } from "../../src/config/edge-ceiling.ts";
import { ACME_KEY, HOOLI_KEY, TEST_CONFIG } from "../fixtures/config.ts";
import { chat } from "../helpers.ts";

const ceiling = edgeCeilingPerMinute(TEST_CONFIG as never)!;
/** A request refused after the ceiling (an unknown model: 404), so no node or region object does any work. */
const cheap = (key: string) => chat({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] }, { key });

describe("the edge ceiling", () => {
  it("is twice the most any limited tenant may send a minute over its regions; none limited, none", () => {
    // initech: 3 a minute in each of the configuration's regions.
    expect(ceiling).toBe(2 * 3 * TEST_CONFIG.regions.length);
    expect(edgeCeilingPerMinute({ regions: TEST_CONFIG.regions as never, tenants: [{ id: "a" } as never] })).toBeUndefined();
  });

  it("refuses a limited tenant past it with its own code and the x-ratelimit-* headers", async () => {
    for (let i = 0; i < ceiling; i++) {
      const res = await cheap(HOOLI_KEY);
      expect(res.status).toBe(404);
      await res.arrayBuffer();
    }
    const refused = await cheap(HOOLI_KEY);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("60");
    expect(refused.headers.get("x-ratelimit-limit-requests")).toBe(String(ceiling));
    expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect(refused.headers.get("x-ratelimit-reset-requests")).toBe("60s");
    const err = await refused.json<{ error: { type: string; code: string } }>();
    expect(err.error).toMatchObject({ type: "rate_limit_error", code: "edge_rate_limit_exceeded" });
  });

  it("never counts a tenant without a configured limit", async () => {
    for (let i = 0; i < ceiling + 10; i++) {
      const res = await cheap(ACME_KEY);
      expect(res.status).toBe(404);
      await res.arrayBuffer();
    }
  });
});
