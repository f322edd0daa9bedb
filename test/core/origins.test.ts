/**
 * Node origins (src/core/origins.ts): URL normalisation as workerd's WHATWG parser does it, CIDR
 * matching, the allow-list, and the addresses refused whatever the allow-list says. Entries parsed:
 * test/core/origin-patterns.test.ts; IPv6 parsing: test/core/origin-hosts.test.ts.
 */
import { describe, expect, it } from "vitest";
import { checkNodeUrl, originPolicy, originTokenAllowed, type OriginPolicy } from "../../src/core/origins.ts";
import { loadConfig } from "../../src/config/load.ts";
import { TEST_CONFIG } from "../fixtures/config.ts";

const policy = (allowedOrigins: string[] | undefined, development = false, staticNodeUrls: string[] = []): OriginPolicy =>
  originPolicy({ allowedOrigins, staticNodeUrls, development });

const production = policy(["*.gpus.example.com", "10.0.0.0/8", "[fd00::/8]:8000"]);
const everything = policy(["0.0.0.0/0", "::/0"]);

function refusal(url: string, p: OriginPolicy = production) {
  const r = checkNodeUrl(url, p);
  if (r.ok) throw new Error(`${url} was accepted as ${r.url}`);
  return r;
}

describe("WHATWG normalisation (as workerd parses URLs)", () => {
  it.each([
    ["http://2130706433/", "http://127.0.0.1/"],
    ["http://0x7f.1:8000", "http://127.0.0.1:8000"],
    ["http://0177.0.0.1", "http://127.0.0.1"],
    ["http://127.1", "http://127.0.0.1"],
    ["http://%31%32%37.0.0.1/v1", "http://127.0.0.1/v1"],
  ])("%s is 127.0.0.1: allowed in development, refused as loopback in production", (raw, normalised) => {
    const dev = checkNodeUrl(raw, policy(undefined, true));
    expect(dev).toMatchObject({ ok: true, url: normalised });
    const prod = refusal(raw, everything);
    expect(prod).toMatchObject({ status: 403, code: "origin_not_allowed" });
    expect(prod.message).toContain("its host is a loopback address");
  });

  it("decimal, hex and octal forms of other addresses are checked as the dotted address", () => {
    expect(refusal("http://2852039166/", everything).message).toContain("its host is a cloud metadata address");
    expect(refusal("http://0xa9.0xfe.0xa9.0xfe/", everything).message).toContain("its host is a cloud metadata address");
    expect(checkNodeUrl("http://167772165:8000/", production)).toMatchObject({ ok: true, url: "http://10.0.0.5:8000/" });
    expect(refusal("http://3232235786/", production).message).toContain(
      "its origin (scheme, host and port) is not in the region's allowed_origins",
    );
  });

  it("lowercases names, drops the default port, keeps a path, and adds no trailing slash", () => {
    expect(checkNodeUrl("http://GPU-1.Gpus.Example.COM:80", production)).toMatchObject({ ok: true, url: "http://gpu-1.gpus.example.com" });
    expect(checkNodeUrl("https://gpu-1.gpus.example.com:443/", production)).toMatchObject({ url: "https://gpu-1.gpus.example.com/" });
    expect(checkNodeUrl("http://gpu-1.gpus.example.com:8000/base", production)).toMatchObject({
      url: "http://gpu-1.gpus.example.com:8000/base",
    });
    // A trailing dot is the same name.
    expect(checkNodeUrl("http://gpu-1.gpus.example.com./", production).ok).toBe(true);
  });
});

describe("malformed node URLs (400 invalid_node_url)", () => {
  it.each([
    ["userinfo", "http://user:hunter2@gpu-1.gpus.example.com/"],
    ["user only", "http://admin@gpu-1.gpus.example.com/"],
    ["empty userinfo", "http://@gpu-1.gpus.example.com/"],
    ["fragment", "http://gpu-1.gpus.example.com/#x"],
    ["empty fragment", "http://gpu-1.gpus.example.com/#"],
    ["scheme", "ftp://gpu-1.gpus.example.com/"],
    ["javascript", "javascript:alert(1)"],
    ["file", "file:///etc/passwd"],
    ["not a URL", "gpu-1"],
    ["host over 253", `http://${"a".repeat(60)}.${"b".repeat(60)}.${"c".repeat(60)}.${"d".repeat(60)}.gpus.example.com/`],
    ["URL over 2048", `http://gpu-1.gpus.example.com/${"x".repeat(2100)}`],
    ["3,000-character host", `http://${"a".repeat(3000)}.gpus.example.com/`],
    ["empty label", "http://a..gpus.example.com/"],
  ])("%s", (_, raw) => {
    const r = refusal(raw, everything);
    expect(r).toMatchObject({ status: 400, code: "invalid_node_url" });
    expect(r.message).toMatch(/^Invalid report: url: /);
    expect(r.message).not.toContain("hunter2");
    expect(r.message).not.toContain("admin@");
  });
});

describe("addresses refused even when a CIDR in allowed_origins covers them", () => {
  it.each([
    ["http://169.254.169.254/", "a cloud metadata address"],
    ["http://169.254.10.1:8000/", "a link-local address"],
    ["http://100.100.100.200/", "a cloud metadata address"],
    ["http://[fd00:ec2::254]/", "a cloud metadata address"],
    ["http://[fe80::1]/", "a link-local address"],
    ["http://[febf::1]/", "a link-local address"],
    ["http://0.0.0.0:8000/", "an unspecified (this-network) address"],
    ["http://0.1.2.3/", "an unspecified (this-network) address"],
    ["http://[::]/", "an unspecified address"],
    ["http://224.0.0.1/", "a multicast address"],
    ["http://255.255.255.255/", "a reserved or broadcast address"],
    ["http://[ff02::1]/", "a multicast address"],
    ["http://127.0.0.1:8000/", "a loopback address"],
    ["http://[::1]/", "a loopback address"],
    ["http://localhost:8000/", "a loopback name"],
    ["http://gpu.localhost/", "a loopback name"],
    ["http://metadata.google.internal/", "a cloud metadata name"],
    ["http://METADATA.google.internal./", "a cloud metadata name"],
    ["http://metadata/", "a cloud metadata name"],
    ["http://[::ffff:169.254.169.254]/", "a cloud metadata address (embedded in IPv6)"],
    ["http://[::ffff:127.0.0.1]/", "a loopback address (embedded in IPv6)"],
    ["http://[::169.254.169.254]/", "a cloud metadata address (embedded in IPv6)"],
    ["http://[64:ff9b::a9fe:a9fe]/", "a cloud metadata address (embedded in IPv6)"],
    ["http://[2002:a9fe:a9fe::1]/", "a cloud metadata address (embedded in IPv6)"],
    ["http://[::ffff:0:127.0.0.1]/", "a loopback address (embedded in IPv6)"],
    // Teredo: the client's address is stored inverted (127.0.0.1 as 80ff:fffe).
    ["http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "a loopback address (embedded in IPv6)"],
    ["http://[64:ff9b:1::7f00:1]/", "a local-use NAT64 address"],
    ["http://168.63.129.16/", "a cloud metadata address"],
    ["http://192.0.0.192/", "a cloud metadata address"],
  ])("%s: %s", (raw, reason) => {
    const r = refusal(raw, policy(["0.0.0.0/0", "::/0", "*.google.internal", "metadata", "localhost", "gpu.localhost"]));
    expect(r).toMatchObject({ status: 403, code: "origin_not_allowed" });
    expect(r.message).toContain(reason);
  });

  it("development mode allows loopback (any port), nothing else it would refuse", () => {
    const dev = policy(undefined, true);
    for (const url of ["http://127.0.0.1:9001", "http://localhost:8787", "http://[::1]:8000", "http://127.0.0.2"]) {
      expect(checkNodeUrl(url, dev).ok, url).toBe(true);
    }
    expect(refusal("http://169.254.169.254/", dev).message).toContain("metadata");
    expect(refusal("http://10.0.0.5/", dev).message).toContain("not in the region's allowed_origins");
  });
});

describe("the allow-list", () => {
  it("refuses private ranges and public hosts it does not name", () => {
    const none = policy(undefined);
    for (const url of [
      "http://10.0.0.5:8000",
      "http://192.168.1.10",
      "http://172.16.0.1",
      "http://[fd12::1]",
      "https://evil.example.net",
    ]) {
      const r = refusal(url, none);
      expect(r.status).toBe(403);
      expect(r.message).toContain("is not in the region's allowed_origins");
    }
    expect(refusal("http://192.168.1.10/").message).toContain("its origin (scheme, host and port) is not in the region's allowed_origins");
  });

  it("*.suffix matches names under it, not the suffix itself nor a name merely ending in its text", () => {
    expect(checkNodeUrl("http://a.gpus.example.com", production).ok).toBe(true);
    expect(checkNodeUrl("http://a.b.gpus.example.com", production).ok).toBe(true);
    expect(checkNodeUrl("http://gpus.example.com", production).ok).toBe(false);
    expect(checkNodeUrl("http://evilgpus.example.com", production).ok).toBe(false);
    expect(checkNodeUrl("http://a.gpus.example.com.evil.net", production).ok).toBe(false);
  });

  it("CIDR ranges, IPv4 and IPv6, with and without a port", () => {
    expect(checkNodeUrl("http://10.255.255.255:1234", production).ok).toBe(true);
    expect(checkNodeUrl("http://11.0.0.0", production).ok).toBe(false);
    expect(checkNodeUrl("http://[fd00::5]:8000", production).ok).toBe(true);
    expect(checkNodeUrl("http://[fd00::5]:8001", production).ok).toBe(false);
    expect(checkNodeUrl("http://[fe00::5]:8000", production).ok).toBe(false);
    const narrow = policy(["192.168.4.0/22", "2001:db8:1::/48"]);
    expect(checkNodeUrl("http://192.168.7.255", narrow).ok).toBe(true);
    expect(checkNodeUrl("http://192.168.8.0", narrow).ok).toBe(false);
    expect(checkNodeUrl("http://[2001:db8:1:ffff::1]", narrow).ok).toBe(true);
    expect(checkNodeUrl("http://[2001:db8:2::1]", narrow).ok).toBe(false);
    // An IPv4 range does not admit the same address mapped into IPv6 (list the IPv6 form to allow it).
    expect(checkNodeUrl("http://[::ffff:192.168.4.1]", narrow).ok).toBe(false);
  });

  it("ports and schemes, when an entry names them (the URL's effective port: 80 or 443 by default)", () => {
    const p = policy(["https://secure.example.com", "gpu.example.com:8000", "plain.example.com:80"]);
    expect(checkNodeUrl("https://secure.example.com:8443", p).ok).toBe(true);
    expect(checkNodeUrl("http://secure.example.com", p).ok).toBe(false);
    expect(checkNodeUrl("http://gpu.example.com:8000/v1", p).ok).toBe(true);
    expect(checkNodeUrl("https://gpu.example.com:8000", p).ok).toBe(true);
    expect(checkNodeUrl("http://gpu.example.com:22", p).ok).toBe(false);
    expect(checkNodeUrl("http://gpu.example.com", p).ok).toBe(false);
    expect(checkNodeUrl("http://plain.example.com", p).ok).toBe(true);
    expect(checkNodeUrl("https://plain.example.com", p).ok).toBe(false);
  });

  it("by default only the static nodes' exact origins (and loopback in development)", () => {
    const p = policy(undefined, false, ["http://gpu-1.example.com:8000", "https://10.1.2.3"]);
    expect(checkNodeUrl("http://gpu-1.example.com:8000/other/path", p).ok).toBe(true);
    expect(checkNodeUrl("http://gpu-1.example.com:8001", p).ok).toBe(false);
    expect(checkNodeUrl("https://gpu-1.example.com:8000", p).ok).toBe(false);
    expect(checkNodeUrl("https://10.1.2.3", p).ok).toBe(true);
    expect(checkNodeUrl("https://10.1.2.4", p).ok).toBe(false);
    expect(checkNodeUrl("http://127.0.0.1:9000", p).ok).toBe(false);
    expect(checkNodeUrl("http://127.0.0.1:9000", policy(undefined, true, ["http://gpu-1.example.com:8000"])).ok).toBe(true);
  });
});

describe("the origin token", () => {
  it("goes only to URLs inside the region's allowed origins", () => {
    const region = { origins: production };
    expect(originTokenAllowed("http://gpu-1.gpus.example.com:8000", region)).toBe(true);
    expect(originTokenAllowed("http://10.1.1.1:8000", region)).toBe(true);
    expect(originTokenAllowed("http://attacker.example.net", region)).toBe(false);
    expect(originTokenAllowed("http://169.254.169.254", { origins: everything })).toBe(false);
    expect(originTokenAllowed("http://user:pw@gpu-1.gpus.example.com", region)).toBe(false);
  });

  it("the loaded configuration compiles each region's allow-list and node tokens", () => {
    const cfg = structuredClone(TEST_CONFIG) as unknown as { mode: string; regions: Array<Record<string, unknown>> };
    cfg.mode = "production";
    cfg.regions[0]!.node_token_secret = ["NODE_TOKEN_NEXT", "NODE_TOKEN_TEST"];
    const env = {
      WARMPATH_CONFIG: cfg,
      NODE_TOKEN_TEST: "old",
      NODE_TOKEN_NEXT: "new",
      ADMIN_TOKEN_TEST: "a",
      ORIGIN_TOKEN_TEST: "o",
    } as unknown as Env;
    const loaded = loadConfig(env);
    const eu = loaded.regionByName.get("eu")!;
    expect(eu.nodeTokens).toEqual(["new", "old"]);
    expect(eu.nodeToken).toBe("new");
    expect(originTokenAllowed("http://gpu.ok.node.test", eu)).toBe(true);
    expect(originTokenAllowed("http://127.0.0.1:8000", eu)).toBe(false); // production: no loopback
    const rr = loaded.regionByName.get("rr")!; // static nodes: their origins, and *.node.test
    expect(originTokenAllowed("http://static-1.ok.node.test", rr)).toBe(true);
    // A missing secret of the list is named.
    expect(() => loadConfig({ ...env, WARMPATH_CONFIG: structuredClone(cfg), NODE_TOKEN_NEXT: undefined } as unknown as Env)).toThrow(
      /regions\.0\.node_token_secret\.0: secret NODE_TOKEN_NEXT is not set/,
    );
  });
});
