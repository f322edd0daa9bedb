/**
 * The internal boundary's pure part (src/core/internal-auth.ts): the header round-trips, a
 * signature covers every field, and the replay guard stays bounded without ever taking a replay.
 */
import { describe, expect, it } from "vitest";
import {
  MAX_CLOCK_SKEW_MS,
  ReplayGuard,
  failureStatus,
  parseInternalAuth,
  signInternal,
  verifyInternal,
  type SignedParts,
} from "../../src/core/internal-auth.ts";

const SECRET = "a-secret-of-at-least-thirty-two-characters";
const NOW = 1_800_000_000_000;
const parts: SignedParts = {
  role: "edge",
  method: "POST",
  pathAndQuery: "/region/v1/us/report",
  timestamp: NOW,
  nonce: "abcdefghijklmnop",
  body: new TextEncoder().encode('{"a":1}'),
};
const message = { method: "POST", pathAndQuery: "/region/v1/us/report", body: parts.body, expectedRole: "edge" as const };

describe("internal message signatures", () => {
  it("verify with the secret that made them, and with no other", async () => {
    const header = await signInternal(crypto.subtle, SECRET, parts);
    expect(parseInternalAuth(header)).toMatchObject({ role: "edge", timestamp: NOW, nonce: "abcdefghijklmnop" });
    expect(await verifyInternal(crypto.subtle, [SECRET], header, message, NOW, new ReplayGuard())).toEqual({ ok: true, secretIndex: 0 });
    // Rotation: the previous secret, second in the list.
    expect(
      await verifyInternal(crypto.subtle, ["another-secret-thirty-two-characters-x", SECRET], header, message, NOW, new ReplayGuard()),
    ).toEqual({ ok: true, secretIndex: 1 });
    expect(
      await verifyInternal(crypto.subtle, ["another-secret-thirty-two-characters-x"], header, message, NOW, new ReplayGuard()),
    ).toEqual({
      ok: false,
      failure: "bad-signature",
    });
    expect(await verifyInternal(crypto.subtle, [], header, message, NOW, new ReplayGuard())).toEqual({ ok: false, failure: "no-secret" });
  });

  it("cover the method, path, query, body and role", async () => {
    const header = await signInternal(crypto.subtle, SECRET, parts);
    const changed = [
      { ...message, method: "GET" },
      { ...message, pathAndQuery: "/region/v1/eu/report" },
      { ...message, pathAndQuery: "/region/v1/us/report?x=1" },
      { ...message, body: new TextEncoder().encode('{"a":2}') },
    ];
    for (const m of changed) {
      expect(await verifyInternal(crypto.subtle, [SECRET], header, m, NOW, new ReplayGuard())).toEqual({
        ok: false,
        failure: "bad-signature",
      });
    }
    expect(await verifyInternal(crypto.subtle, [SECRET], header, { ...message, expectedRole: "region" }, NOW, new ReplayGuard())).toEqual({
      ok: false,
      failure: "wrong-role",
    });
    // The role is signed: rewriting it in the header breaks the signature.
    expect(
      await verifyInternal(
        crypto.subtle,
        [SECRET],
        header.replace("r=edge", "r=region"),
        { ...message, expectedRole: "region" },
        NOW,
        new ReplayGuard(),
      ),
    ).toEqual({ ok: false, failure: "bad-signature" });
  });

  it("are refused outside the skew, once seen, missing or malformed; 401 or 403 as documented", async () => {
    const header = await signInternal(crypto.subtle, SECRET, parts);
    const guard = new ReplayGuard();
    const at = (now: number) => verifyInternal(crypto.subtle, [SECRET], header, message, now, guard);
    expect(await at(NOW + MAX_CLOCK_SKEW_MS + 1)).toEqual({ ok: false, failure: "expired" });
    expect(await at(NOW - MAX_CLOCK_SKEW_MS - 1)).toEqual({ ok: false, failure: "expired" });
    expect((await at(NOW + MAX_CLOCK_SKEW_MS)).ok).toBe(true);
    expect(await at(NOW)).toEqual({ ok: false, failure: "replayed" });
    expect(await verifyInternal(crypto.subtle, [SECRET], null, message, NOW, guard)).toEqual({ ok: false, failure: "missing" });
    for (const bad of ["v1", "v2;r=edge;t=1;n=abcdefghijklmnop;s=" + "0".repeat(64), header + "x", "x".repeat(300)]) {
      expect(await verifyInternal(crypto.subtle, [SECRET], bad, message, NOW, guard)).toEqual({ ok: false, failure: "malformed" });
    }
    expect(["missing", "malformed", "bad-signature", "no-secret"].map((f) => failureStatus(f as never))).toEqual([401, 401, 401, 401]);
    expect(["expired", "replayed", "wrong-role"].map((f) => failureStatus(f as never))).toEqual([403, 403, 403]);
  });
});

describe("the replay guard", () => {
  it("takes a nonce once, forgets it when it leaves the skew, and stays within its capacity without taking a replay", () => {
    const guard = new ReplayGuard(3, 1_000);
    expect(guard.admit("a", 100, 100)).toBe(true);
    expect(guard.admit("a", 100, 100)).toBe(false);
    expect(guard.admit("b", 101, 101)).toBe(true);
    expect(guard.admit("c", 102, 102)).toBe(true);
    // Full: the oldest (a, t=100) is forgotten and t <= 100 is refused from now on.
    expect(guard.admit("d", 103, 103)).toBe(true);
    expect(guard.size).toBe(3);
    expect(guard.admit("a", 100, 104)).toBe(false);
    expect(guard.admit("e", 99, 104)).toBe(false);
    // Past the window every entry is pruned; a nonce seen long ago is no longer kept (the skew check refuses its message).
    expect(guard.admit("f", 5_000, 5_000)).toBe(true);
    expect(guard.size).toBe(1);
  });
});
