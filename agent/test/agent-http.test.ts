/**
 * agent/http.ts, the one HTTP client of the agent (engine scrapes and router reports): its timeout
 * covers the whole request, so a peer dripping bytes cannot hold a tick or a report past it; and
 * URLs are logged without their credentials.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { ConnectionError, httpRequestText, redactUrl } from "../http.ts";

/** Slack for a busy 2-core machine: a timeout fires no earlier than asked, and not much later. */
const LATE_MS = 1500;

async function listen(server: HttpServer | NetServer): Promise<string> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Writes one byte of `text` every `everyMs` on `socket`, until it closes; resolves when it does. */
function drip(socket: Socket, text: string, everyMs: number): Promise<void> {
  let i = 0;
  const timer = setInterval(() => socket.write(text[i++ % text.length]!), everyMs);
  return new Promise((resolve) => {
    socket.on("close", () => {
      clearInterval(timer);
      resolve();
    });
    socket.on("error", () => {});
  });
}

test("a peer dripping its status line and headers a byte every 300 ms: rejected at timeoutMs, connection closed", async () => {
  let closed: Promise<void> | undefined;
  const server = createNetServer((socket) => {
    closed = drip(socket, "HTTP/1.1 200 OK\r\nX-Slow: " + "a".repeat(1000), 300);
  });
  const url = await listen(server);
  try {
    const start = performance.now();
    await assert.rejects(httpRequestText(`${url}/metrics`, { timeoutMs: 1000 }), (err: Error) => {
      assert.ok(err instanceof ConnectionError);
      assert.equal(err.code, "ETIMEDOUT");
      assert.match(err.message, /timed out after 1000 ms/);
      return true;
    });
    const took = performance.now() - start;
    assert.ok(took >= 950 && took < 1000 + LATE_MS, `rejected after ${Math.round(took)} ms, timeoutMs 1000`);
    await closed; // the agent hung up: the drip ends
  } finally {
    server.close();
  }
});

test("a peer dripping its body a byte every 300 ms: rejected at timeoutMs, not when the body ends", async () => {
  let closed: Promise<void> | undefined;
  const server = createHttpServer((req, res) => {
    res.writeHead(200, { "content-type": "text/plain", "content-length": "1000000" });
    res.flushHeaders();
    closed = drip(req.socket, "vllm:num_requests_running 1\n", 300);
  });
  const url = await listen(server);
  try {
    const start = performance.now();
    await assert.rejects(httpRequestText(`${url}/metrics`, { timeoutMs: 1000 }), /timed out after 1000 ms/);
    const took = performance.now() - start;
    assert.ok(took >= 950 && took < 1000 + LATE_MS, `rejected after ${Math.round(took)} ms, timeoutMs 1000`);
    await closed;
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

test("a prompt peer is answered as before; an abort signal rejects at once; a body past maxBytes is refused", async () => {
  const server = createHttpServer((req, res) => {
    if (req.url === "/hang") return; // never answers
    res.writeHead(201, { "x-a": "b" }).end(req.url === "/big" ? "x".repeat(10_000) : "hello");
  });
  const url = await listen(server);
  try {
    const res = await httpRequestText(`${url}/ok`, { timeoutMs: 5000 });
    assert.deepEqual([res.status, res.text, res.headers["x-a"]], [201, "hello", "b"]);
    const abort = new AbortController();
    const pending = httpRequestText(`${url}/hang`, { timeoutMs: 60_000, signal: abort.signal });
    setTimeout(() => abort.abort(), 50);
    const start = performance.now();
    await assert.rejects(pending, (err: Error) => err instanceof ConnectionError && err.code === "ABORT_ERR");
    assert.ok(performance.now() - start < 1000 + LATE_MS);
    await assert.rejects(httpRequestText(`${url}/ok`, { timeoutMs: 5000, signal: abort.signal }), /aborted/);
    await assert.rejects(httpRequestText(`${url}/big`, { timeoutMs: 5000, maxBytes: 1000 }), /response larger than 1000 bytes/);
    await assert.rejects(httpRequestText("http://user:s3cret@[bad", { timeoutMs: 5000 }), (err: Error) => !err.message.includes("s3cret"));
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

test("redactUrl drops the user and password, and leaves other URLs as they were", () => {
  assert.equal(redactUrl("http://user:s3cret@10.0.0.5:8000/metrics"), "http://10.0.0.5:8000/metrics");
  assert.equal(redactUrl("http://user:s3cret@10.0.0.5:8000"), "http://10.0.0.5:8000");
  assert.equal(redactUrl("https://:s3cret@h.example/v1?x=1"), "https://h.example/v1?x=1");
  assert.equal(redactUrl("http://user@h.example/metrics"), "http://h.example/metrics");
  assert.equal(redactUrl("http://10.0.0.5:8000"), "http://10.0.0.5:8000");
  assert.equal(redactUrl("http://10.0.0.5:8000/metrics"), "http://10.0.0.5:8000/metrics");
  assert.equal(redactUrl("http://user:s3cret@[bad/metrics"), "http://[bad/metrics", "unparsable: still no password");
});
