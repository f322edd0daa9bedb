/**
 * `allowed_origins` entries (src/core/origin-patterns.ts): each form parsed, each bad one refused
 * with a message naming why, and the configuration naming the bad entry.
 */
import { describe, expect, it } from "vitest";
import { parseOriginPattern } from "../../src/core/origin-patterns.ts";
import { configSchema } from "../../src/config/schema.ts";
import { TEST_CONFIG } from "../fixtures/config.ts";

describe("allowed_origins entries", () => {
  it.each([
    ["gpu-1.example.com", { kind: "name", name: "gpu-1.example.com" }, undefined, undefined],
    ["GPU-1.Example.com.", { kind: "name", name: "gpu-1.example.com" }, undefined, undefined],
    ["*.gpus.example.com:8000", { kind: "suffix", suffix: ".gpus.example.com" }, 8000, undefined],
    ["https://*.gpus.example.com", { kind: "suffix", suffix: ".gpus.example.com" }, undefined, "https"],
    ["10.0.0.0/8", { kind: "cidr", family: 4, network: 0x0a000000n, prefix: 8 }, undefined, undefined],
    ["10.0.0.5", { kind: "cidr", family: 4, network: 0x0a000005n, prefix: 32 }, undefined, undefined],
    ["10.0.0.5:8000", { kind: "cidr", family: 4, network: 0x0a000005n, prefix: 32 }, 8000, undefined],
    ["fd00::/8", { kind: "cidr", family: 6, network: 0xfdn << 120n, prefix: 8 }, undefined, undefined],
    ["[fd00::/8]:8000", { kind: "cidr", family: 6, network: 0xfdn << 120n, prefix: 8 }, 8000, undefined],
    ["[::ffff:10.0.0.0/104]", { kind: "cidr", family: 6, network: (0xffffn << 32n) | 0x0a000000n, prefix: 104 }, undefined, undefined],
  ])("%s", (text, host, port, scheme) => {
    expect(parseOriginPattern(text)).toEqual({ source: text, host, port, scheme });
  });

  it.each([
    ["*", "bare *"],
    ["*.com", "at least two labels"],
    ["a.*.example.com", "only a leading *."],
    ["10.0.0.5/8", "host bits set"],
    ["10.0.0.0/33", "prefix length must be 0-32"],
    ["fd00::/129", "prefix length must be 0-128"],
    ["300.1.1.1", "not an IPv4 address"],
    ["2130706433", "not an IPv4 address"],
    ["010.0.0.1", "not an IPv4 address"],
    ["ftp://x.example.com", "http or https"],
    ["x.example.com/path", "/prefix needs an IP"],
    ["user@x.example.com", "no user, path"],
    ["x.example.com:99999", "port must be 1-65535"],
    ["[fd00::1", "unclosed ["],
    ["fd00::zz", "not an IPv6 address"],
    ["bücher.example.com", "punycode"],
    ["gpu_1..example.com", "not a DNS name"],
  ])("refuses %s (%s)", (text, message) => {
    const p = parseOriginPattern(text);
    expect("error" in p && p.error).toContain(message);
  });

  it("the configuration refuses a bad entry, naming it", () => {
    const cfg = structuredClone(TEST_CONFIG) as unknown as { regions: Array<Record<string, unknown>> };
    cfg.regions[0]!.allowed_origins = ["*.ok.example.com", "10.0.0.5/8"];
    const r = configSchema.safeParse(cfg);
    expect(r.success).toBe(false);
    expect(r.error!.issues[0]).toMatchObject({ path: ["regions", 0, "allowed_origins", 1] });
    expect(r.error!.issues[0]!.message).toContain("host bits set");
  });
});
