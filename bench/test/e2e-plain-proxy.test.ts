/**
 * bench/e2e/plain-proxy.ts, the yardstick bench:e2e holds the router against: a real forwarding
 * proxy in a process of its own (method, path, headers and body through; the answer streamed back
 * as it comes; the upstreams in turn; a 502 in OpenAI's shape when an upstream is down).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { startPlainProxy } from "../e2e/plain-proxy-launch.ts";
import { freePort } from "../../scripts/ports.ts";

/** An upstream that echoes what it got, or (on /stream) sends one event, waits for `release`, then ends. */
async function upstream(name: string, release: Promise<void>): Promise<{ url: string; server: http.Server }> {
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => {
      if (req.url === "/stream") {
        res.writeHead(200, { "content-type": "text/event-stream", "x-upstream": name });
        res.write("data: first\n\n");
        void release.then(() => res.end("data: [DONE]\n\n"));
        return;
      }
      res.writeHead(201, { "content-type": "application/json", "x-upstream": name, connection: "keep-alive" });
      res.end(JSON.stringify({ method: req.method, url: req.url, body, auth: req.headers.authorization ?? null }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

test("the plain proxy forwards requests to its upstreams in turn and streams answers through as they come", async () => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const a = await upstream("a", released);
  const b = await upstream("b", released);
  const proxy = await startPlainProxy([a.url, b.url]);
  try {
    const seen: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`${proxy.url}/v1/chat/completions?n=${i}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer k" },
        body: `{"i":${i}}`,
      });
      assert.equal(res.status, 201);
      seen.push(res.headers.get("x-upstream")!);
      assert.deepEqual(await res.json(), { method: "POST", url: `/v1/chat/completions?n=${i}`, body: `{"i":${i}}`, auth: "Bearer k" });
    }
    assert.deepEqual(seen, ["a", "b", "a", "b"]);

    // The first event arrives while the upstream still holds the stream open: nothing is buffered.
    const res = await fetch(`${proxy.url}/stream`);
    const reader = res.body!.getReader();
    const first = await reader.read();
    assert.equal(new TextDecoder().decode(first.value), "data: first\n\n");
    release();
    let rest = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    assert.equal(rest, "data: [DONE]\n\n");
  } finally {
    await proxy.stop();
    a.server.close();
    b.server.close();
  }
});

test("the plain proxy answers 502 in OpenAI's error shape when its upstream cannot be reached", async () => {
  const proxy = await startPlainProxy([`http://127.0.0.1:${await freePort()}`]);
  try {
    const res = await fetch(`${proxy.url}/v1/models`);
    assert.equal(res.status, 502);
    const body = (await res.json()) as { error: { message: string; type: string; code: string; param: null } };
    assert.match(body.error.message, /upstream unreachable/);
    assert.equal(body.error.code, "bad_gateway");
    assert.equal(body.error.param, null);
  } finally {
    await proxy.stop();
  }
});

test("the plain proxy refuses to start without an upstream", async () => {
  await assert.rejects(startPlainProxy([]), /exited \(2\) before it listened/);
});
