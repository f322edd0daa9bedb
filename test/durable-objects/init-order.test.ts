/**
 * Ordering two worker versions' region inits (durable-objects/init-order.ts): a newer one replaces
 * the one in force at once; an older one is routed by it while it is in use, and replaces it once
 * it has gone unused for OLDER_INIT_AFTER_MS (a rollback); inits without a generation come as they go.
 */
import { describe, expect, it } from "vitest";
import { InitOrder, OLDER_INIT_AFTER_MS } from "../../durable-objects/init-order.ts";

const v1 = { fingerprint: "a", generation: 1_000 };
const v2 = { fingerprint: "b", generation: 2_000 };

describe("InitOrder", () => {
  it("takes a newer init at once, and serves only the init in force", () => {
    const order = new InitOrder();
    expect(order.serves("a", 0)).toBe(false);
    order.adopt(v1, 0);
    expect(order.serves("a", 1)).toBe(true);
    expect(order.serves("b", 1)).toBe(false);
    expect(order.replaces(v2, 2)).toBe(true);
  });

  it("routes an older init by the newer while the newer is in use, and takes it once the newer has gone unused (a rollback)", () => {
    const order = new InitOrder();
    order.adopt(v2, 0);
    expect(order.replaces(v1, 10)).toBe(false);
    // Its calls now need no init: the router in force serves them.
    expect(order.serves("a", 20)).toBe(true);
    // The newer one keeps being used: the older never takes over.
    for (let t = 0; t <= 5 * OLDER_INIT_AFTER_MS; t += OLDER_INIT_AFTER_MS / 2) {
      expect(order.serves("b", t)).toBe(true);
      expect(order.replaces(v1, t + 1)).toBe(false);
    }
    // The newer one's calls stop (a rollback to the older version): a minute later the older takes over.
    const last = 5 * OLDER_INIT_AFTER_MS;
    expect(order.serves("a", last + OLDER_INIT_AFTER_MS - 1)).toBe(true);
    expect(order.replaces(v1, last + OLDER_INIT_AFTER_MS - 1)).toBe(false);
    expect(order.serves("a", last + OLDER_INIT_AFTER_MS)).toBe(false);
    expect(order.replaces(v1, last + OLDER_INIT_AFTER_MS)).toBe(true);
    order.adopt(v1, last + OLDER_INIT_AFTER_MS);
    expect(order.serves("b", last + OLDER_INIT_AFTER_MS + 1)).toBe(false);
  });

  it("does not hold an older init back for an init read back at a restart (not known to be in use)", () => {
    const order = new InitOrder();
    order.adopt(v2, undefined);
    expect(order.replaces(v1, 1)).toBe(true);
    // Once a call carries it, it is in use again.
    const again = new InitOrder();
    again.adopt(v2, undefined);
    expect(again.serves("b", 5)).toBe(true);
    expect(again.replaces(v1, 6)).toBe(false);
  });

  it("dates the init in force by the newest version that sent it: a same-configuration newer version holds an older one back", () => {
    const order = new InitOrder();
    order.adopt(v1, 0);
    // Version 3 kept version 1's configuration (it changed only code): it is served by fingerprint.
    expect(order.serves("a", 1, 3_000)).toBe(true);
    // Version 2, older than 3, does not replace what 3 runs on.
    expect(order.replaces(v2, 2)).toBe(false);
  });

  it("takes an init without a generation, or of the same one, as it comes", () => {
    const order = new InitOrder();
    order.adopt(v2, 0);
    expect(order.replaces({ fingerprint: "c" }, 1)).toBe(true);
    expect(order.replaces({ fingerprint: "d", generation: 2_000 }, 1)).toBe(true);
    order.adopt({ fingerprint: "c" }, 1);
    expect(order.replaces(v1, 2)).toBe(true);
  });
});
