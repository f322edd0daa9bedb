import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { test } from "node:test";
import { freePort } from "../ports.ts";

const ephemeralLow = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);

const listen = (port: number) =>
  new Promise<Server>((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(port, "127.0.0.1", () => resolve(s));
  });
const close = (s: Server) => new Promise<void>((r) => s.close(() => r()));

test("ports come from below the OS's ephemeral range, distinct, and bindable", async () => {
  // Asked all at once, as a system boot asks for its workers' ports: none handed out twice.
  const ports = await Promise.all(Array.from({ length: 40 }, () => freePort()));
  assert.equal(new Set(ports).size, ports.length);
  for (const port of ports) {
    assert.ok(port >= 20_000 && port < ephemeralLow, `${port} outside 20000-${ephemeralLow - 1}`);
  }
  const servers = await Promise.all(ports.map(listen));
  await Promise.all(servers.map(close));
});

test("a port something listens on is passed over", async () => {
  const random = Math.random;
  // Held outside freePort (which would also remember it): only the failed bind can pass it over.
  let held: Server | undefined;
  let port = 25_000;
  for (; !held; port++) held = await listen(port).catch(() => undefined);
  port--;
  try {
    // The same random start as `held`'s port: the first candidate is taken, the next one is given.
    Math.random = () => (port - 20_000) / (ephemeralLow - 20_000) + 1e-9;
    const next = await freePort();
    assert.notEqual(next, port);
    assert.ok(next > port && next < port + 10, `${next} is not just after ${port}`);
  } finally {
    Math.random = random;
    await close(held!);
  }
});
