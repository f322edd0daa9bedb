/**
 * Placing a request through the region's object (src/region/place.ts): the route call carries the
 * init's fingerprint only, and an object that does not hold the init (never called, or restarted
 * with a stored init it no longer accepts) gets it on a second call, so the request is placed by
 * the object, not statelessly.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { call, chat } from "../helpers.ts";

const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

async function askRr(content: string): Promise<Response> {
  const res = await chat({ model: "m-rr", messages: [{ role: "user", content }] });
  await res.arrayBuffer();
  return res;
}

describe("placing through the region's object", () => {
  it("sends the init to an object that asks for it, and places the request there (not statelessly)", async () => {
    // This file's storage is its own: the rr object has never been called.
    const first = await askRr("the object's first call");
    expect(first.status).toBe(200);
    expect(first.headers.get("x-warmpath-decision")).not.toBe("stateless");
    expect(first.headers.get("x-warmpath-policy")).toBe("round-robin");
    const second = await askRr("on the fingerprint alone");
    expect(second.status).toBe(200);
    expect(second.headers.get("x-warmpath-policy")).toBe("round-robin");

    // A restarted object whose stored init this version no longer accepts asks again, and gets it.
    await runInDurableObject(env.REGION.getByName("rr"), (_instance, state) => {
      state.storage.sql.exec(`UPDATE config SET value = json_set(value, '$.fingerprint', ?) WHERE key = 'init'`, "x".repeat(2000));
    });
    expect((await call("/admin/regions/rr/restart", { method: "POST", headers: admin })).status).toBe(200);
    const after = await askRr("after the restart");
    expect(after.status).toBe(200);
    expect(after.headers.get("x-warmpath-policy")).toBe("round-robin");
  });
});
