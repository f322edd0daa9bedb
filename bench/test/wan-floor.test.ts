/**
 * bench/wan/floor-worker.mts, the runtime's floor bench:wan holds warmpath against: each mode must
 * do the work it stands for (forward the request, return the node's whole answer, stream events
 * through; the hops mode call its Durable Object and complete what it placed), or its figures
 * would price less than the path's unavoidable work.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { FLOOR_MODES, startFloor } from "../wan/floor.ts";
import { startNode } from "../wan/node.ts";

test("every floor mode returns the node's answer whole, and the hops mode places and completes through its object", async () => {
  const answer = await startNode("answer");
  const stream = await startNode({ events: 5 });
  const floor = await startFloor();
  try {
    const direct = await (await fetch(`${stream.url}/v1/chat/completions`, { method: "POST", body: "{}" })).text();
    for (const mode of FLOOR_MODES) {
      const before = stream.received;
      const r = await fetch(`${floor.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "x-floor": mode, "x-floor-node": stream.url },
        body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "hi" }] }),
      });
      assert.equal(r.status, 200, mode);
      assert.equal(r.headers.get("content-type"), "text/event-stream", mode);
      const text = await r.text();
      // The same five events and the end as the node sends anyone (ids differ per answer).
      assert.equal(text.replace(/"id":"c\d+"/g, ""), direct.replace(/"id":"c\d+"/g, ""), mode);
      assert.equal(stream.received, before + 1, `${mode} called the node once`);
      // Each hop placed one request at a time and completed it before the next.
      if (mode === "hops") assert.equal(r.headers.get("x-floor-in-flight"), "1");
    }
    const again = await fetch(`${floor.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "x-floor": "hops", "x-floor-node": answer.url },
      body: "{}",
    });
    assert.equal(again.headers.get("x-floor-in-flight"), "1");
    assert.match(await again.text(), /data: \[DONE\]/);
    const unknown = await fetch(`${floor.url}/v1/chat/completions`, { method: "POST", headers: { "x-floor": "nope" }, body: "{}" });
    assert.equal(unknown.status, 400);
  } finally {
    floor.stop();
    await answer.close();
    await stream.close();
  }
});
