/** Engine-level cache isolation (src/region/cache-salt.ts): the salt, and the one change to the client's bytes. */
import { describe, expect, it } from "vitest";
import { engineCacheSalt, withCacheSalt } from "../../src/region/cache-salt.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

describe("engineCacheSalt", () => {
  it("is 32 hex characters (valid for vLLM and SGLang), one per namespace and client salt", async () => {
    const a = await engineCacheSalt("tenant:acme", undefined);
    expect(a).toMatch(/^[0-9a-f]{32}$/);
    expect(await engineCacheSalt("tenant:acme", undefined)).toBe(a); // stable: a tenant's prefixes stay warm
    expect(await engineCacheSalt("tenant:globex", undefined)).not.toBe(a);
    expect(await engineCacheSalt("tenant:acme", "s1")).not.toBe(a);
    // No client salt reaches another namespace's: the namespace is always part of it.
    expect(await engineCacheSalt("tenant:globex", "s1")).not.toBe(await engineCacheSalt("tenant:acme", "s1"));
    expect(await engineCacheSalt("shared:commons", undefined)).not.toBe(a);
  });
});

describe("withCacheSalt", () => {
  it("adds the field after the opening brace and changes no other byte", () => {
    const raw = ` {"model":"m",\n "messages":[] , "x":1}`;
    expect(text(withCacheSalt(bytes(raw), JSON.parse(raw), "abc"))).toBe(` {"cache_salt":"abc","model":"m",\n "messages":[] , "x":1}`);
  });

  it("takes no trailing comma in an empty object", () => {
    expect(JSON.parse(text(withCacheSalt(bytes("{ }"), {}, "abc")))).toEqual({ cache_salt: "abc" });
  });

  it("replaces the client's own salt rather than adding a second key (parsers disagree on duplicates)", () => {
    const raw = `{"model":"m","cache_salt":"mine"}`;
    const out = text(withCacheSalt(bytes(raw), JSON.parse(raw), "abc"));
    expect(JSON.parse(out)).toEqual({ model: "m", cache_salt: "abc" });
    expect(out.match(/cache_salt/g)).toHaveLength(1);
  });
});
