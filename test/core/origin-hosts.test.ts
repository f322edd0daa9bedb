/** Node hosts (src/core/origin-hosts.ts): IPv6 parsing (the rest is checked through checkNodeUrl, test/core/origins.test.ts). */
import { describe, expect, it } from "vitest";
import { parseIpv4, parseIpv6 } from "../../src/core/origin-hosts.ts";

describe("IPv6 addresses", () => {
  it("compression, embedded IPv4, invalid forms", () => {
    expect(parseIpv6("::")).toBe(0n);
    expect(parseIpv6("::1")).toBe(1n);
    expect(parseIpv6("1:2:3:4:5:6:7:8")).toBe(0x00010002000300040005000600070008n);
    expect(parseIpv6("::ffff:1.2.3.4")).toBe((0xffffn << 32n) | 0x01020304n);
    for (const bad of ["1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "fe80::1%eth0", ":::", "1.2.3.4"])
      expect(parseIpv6(bad), bad).toBeUndefined();
  });

  it("a dotted quad is strict: no leading zeros, no octet past 255", () => {
    expect(parseIpv4("10.0.0.5")).toBe(0x0a000005n);
    for (const bad of ["010.0.0.1", "256.0.0.1", "1.2.3", "2130706433"]) expect(parseIpv4(bad), bad).toBeUndefined();
  });
});
