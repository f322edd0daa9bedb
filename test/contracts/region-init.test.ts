/** The region init's fingerprint (src/contracts/region-init.ts): short, stable, and changed by any change of the init. */
import { describe, expect, it } from "vitest";
import { env } from "cloudflare:workers";
import { loadConfig } from "../../src/config/load.ts";
import { MAX_FINGERPRINT_CHARS, regionInitFingerprint, regionInitRefSchema, regionInitSchema } from "../../src/contracts/region-init.ts";

describe("regionInitFingerprint", () => {
  const regions = loadConfig(env).regions;

  it("is what the loaded configuration sends, within the contract's bound, and the same for the same content", () => {
    for (const r of regions) {
      expect(r.init.fingerprint).toBe(regionInitFingerprint(structuredClone(r.init)));
      expect(r.init.fingerprint.length).toBeLessThanOrEqual(MAX_FINGERPRINT_CHARS);
      expect(regionInitSchema.safeParse(r.init).success).toBe(true);
      expect(r.initRef).toEqual({ fingerprint: r.init.fingerprint });
      expect(regionInitRefSchema.safeParse(r.initRef).success).toBe(true);
    }
    expect(new Set(regions.map((r) => r.init.fingerprint)).size).toBe(regions.length);
  });

  it("changes with a setting, a static node or the usage settings", () => {
    const init = regions.find((r) => r.init.staticNodes.length > 0)!.init;
    const base = regionInitFingerprint(init);
    const variants = [
      { ...init, settings: { ...init.settings, maxQueueSeconds: init.settings.maxQueueSeconds + 1 } },
      { ...init, settings: { ...init.settings, nodeSilenceMs: init.settings.nodeSilenceMs * 2 } },
      { ...init, staticNodes: init.staticNodes.slice(1) },
      { ...init, staticNodes: init.staticNodes.map((n, i) => (i === 0 ? { ...n, kvCapacityTokens: n.kvCapacityTokens + 1 } : n)) },
      { ...init, usage: { ...init.usage, flushIntervalMs: init.usage.flushIntervalMs + 1 } },
    ];
    const prints = variants.map((v) => regionInitFingerprint(v));
    for (const p of prints) expect(p).not.toBe(base);
    expect(new Set(prints).size).toBe(prints.length);
  });

  it("refuses an unbounded fingerprint (one stored before they were hashed)", () => {
    const init = regions[0]!.init;
    expect(regionInitSchema.safeParse({ ...init, fingerprint: "x".repeat(MAX_FINGERPRINT_CHARS + 1) }).success).toBe(false);
    expect(regionInitRefSchema.safeParse({ fingerprint: "" }).success).toBe(false);
  });
});
