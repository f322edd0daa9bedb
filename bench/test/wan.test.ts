/** The long-haul relay of bench:wan (bench/wan/relay.ts): the delay both ways, every byte in order. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, connect, type AddressInfo } from "node:net";
import { startRelay } from "../wan/relay.ts";

test("adds the round trip (half each way) and keeps every byte in order", async () => {
  // An echo server.
  const echo = createServer((s) => s.on("error", () => {}).pipe(s));
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
  const relay = await startRelay({ host: "127.0.0.1", port: (echo.address() as AddressInfo).port }, 60);
  try {
    const socket = connect(relay.port, "127.0.0.1");
    await new Promise<void>((r) => socket.once("connect", () => r()));
    const sent = Buffer.from(Array.from({ length: 20_000 }, (_, i) => i % 251));
    const got: Buffer[] = [];
    const started = performance.now();
    let firstAt = NaN;
    const done = new Promise<void>((resolve) =>
      socket.on("data", (chunk: Buffer) => {
        if (Number.isNaN(firstAt)) firstAt = performance.now();
        got.push(chunk);
        if (Buffer.concat(got).length >= sent.length) resolve();
      }),
    );
    // In pieces, as a stream would come.
    for (let i = 0; i < sent.length; i += 1000) socket.write(sent.subarray(i, i + 1000));
    await done;
    const rtt = firstAt - started;
    // Each way is a 30 ms timer, which libuv's millisecond loop clock may fire up to 1 ms early
    // against performance.now(): 58 ms is what the relay guarantees (measured minimum 59.5 in 5,000).
    assert.ok(rtt >= 58, `the first echo came back after ${rtt.toFixed(1)} ms, under the 60 ms round trip less 2 x 1 ms`);
    // Only a relay that adds far more than its delay fails here: a busy 2-core machine has taken 183 ms.
    assert.ok(rtt < 1000, `the first echo took ${rtt.toFixed(1)} ms`);
    assert.deepEqual(Buffer.concat(got), sent);
    socket.destroy();
  } finally {
    await relay.close();
    await new Promise<void>((r) => echo.close(() => r()));
  }
});
