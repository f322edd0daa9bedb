import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { ConfigError, NO_FAULTS, loadFleet, parseFleet } from "../config.ts";
import { startFleet } from "../fleet.ts";
import { blockHashes, countTokens, renderChat } from "../prompt.ts";

const DEFAULT_FLEET = fileURLToPath(new URL("../fleet.default.json", import.meta.url));

test("the default fleet loads: two regions of three nodes, defaults applied", () => {
  const f = loadFleet(DEFAULT_FLEET);
  assert.deepEqual(
    f.regions.map((r) => [r.name, r.nodes.length]),
    [
      ["us-east", 3],
      ["eu-west", 3],
    ],
  );
  const n = f.regions[0]!.nodes[0]!;
  assert.equal(n.kv_capacity_tokens, 200_000);
  assert.equal(n.max_running, 64);
  assert.equal(n.engine, "vllm");
  assert.deepEqual(n.faults, NO_FAULTS);
});

test("invalid fleet files are rejected naming the bad field", () => {
  const bad = (raw: unknown, re: RegExp) =>
    assert.throws(
      () => parseFleet(raw, "x.json"),
      (e: Error) => e instanceof ConfigError && re.test(e.message),
    );
  bad({ regions: [{ name: "r", nodes: [{ id: "a", kv_capacity_tokens: "lots" }] }] }, /regions\[0\]\.nodes\[0\]\.kv_capacity_tokens/);
  bad({ regions: [{ name: "r", nodes: [{ id: "a", prefil_tokens_per_second: 1 }] }] }, /prefil_tokens_per_second/);
  bad({ regions: [{ name: "r", nodes: [{ id: "a" }, { id: "a" }] }] }, /regions\[0\]\.nodes\[1\]\.id: duplicate/);
  bad({ regions: [{ name: "r", nodes: [{ id: "GPU_1" }] }] }, /regions\[0\]\.nodes\[0\]\.id: must be lowercase/);
  bad({ regions: [] }, /regions/);
  bad({ defaults: { faults: { error_rate: 3 } }, regions: [{ name: "r", nodes: [{ id: "a" }] }] }, /defaults\.faults\.error_rate/);
  bad({ regions: [{ name: "r", nodes: [{ id: "a", faults: { redirect_to: "/relative" } }] }] }, /nodes\[0\]\.faults\.redirect_to/);
  bad({ regions: [{ name: "r", nodes: [{ id: "a", faults: { prefill_slowdown: 0 } }] }] }, /nodes\[0\]\.faults\.prefill_slowdown/);
  bad({ regions: [{ name: "r", nodes: [{ id: "a", faults: { hang_after_tokens: 1.5 } }] }] }, /nodes\[0\]\.faults\.hang_after_tokens/);
  bad({ regions: [{ name: "r", nodes: [{ id: "a", faults: { die_after_tokens: 0 } }] }] }, /nodes\[0\]\.faults\.die_after_tokens/);
  bad(
    { defaults: { faults: { error_event_after_tokens: "2" } }, regions: [{ name: "r", nodes: [{ id: "a" }] }] },
    /defaults\.faults\.error_event_after_tokens/,
  );
  bad(
    { regions: [{ name: "r", nodes: [{ id: "a", faults: { malformed_after_tokens: -1 } }] }] },
    /nodes\[0\]\.faults\.malformed_after_tokens/,
  );
  bad({ regions: [{ name: "r", nodes: [{ id: "a", engine: "tgi" }] }] }, /regions\[0\]\.nodes\[0\]\.engine/);
  // Past the router's bound on a report's max_running_requests: a node the router would refuse.
  bad({ regions: [{ name: "r", nodes: [{ id: "a", max_running: 65_537 }] }] }, /regions\[0\]\.nodes\[0\]\.max_running/);
  bad({ defaults: { report_max_running: "yes" }, regions: [{ name: "r", nodes: [{ id: "a" }] }] }, /defaults\.report_max_running/);
});

test("node fields override defaults, faults merge field by field", () => {
  const f = parseFleet({
    defaults: { time_factor: 5, faults: { extra_latency_ms: 10 } },
    regions: [{ name: "r", nodes: [{ id: "a", time_factor: 2, faults: { error_rate: 0.5 } }, { id: "b" }] }],
  });
  const [a, b] = f.regions[0]!.nodes;
  assert.equal(a!.time_factor, 2);
  assert.equal(b!.time_factor, 5);
  assert.deepEqual(a!.faults, { ...NO_FAULTS, error_rate: 0.5, extra_latency_ms: 10 });
});

test("a fleet needs a token per region when it reports to a router; starts and stops every node", async () => {
  const config = parseFleet({ regions: [{ name: "r1", nodes: [{ id: "a" }, { id: "b" }] }] });
  await assert.rejects(startFleet(config, { routerUrl: "http://127.0.0.1:9" }), /--token-r1/);
  const fleet = await startFleet(config);
  assert.equal(fleet.nodes.length, 2);
  assert.equal((await fetch(fleet.node("r1", "b")!.url + "/health")).status, 200);
  await fleet.stop();
  await assert.rejects(fetch(fleet.nodes[0]!.url + "/health"));
});

test("chat rendering keeps earlier turns' text, so a growing conversation keeps its blocks", () => {
  const turn1 = [
    { role: "system", content: "S".repeat(300) },
    { role: "user", content: "first question" },
  ];
  const turn2 = [...turn1, { role: "assistant", content: "an answer" }, { role: "user", content: "second" }];
  const a = renderChat({ messages: turn1 });
  const b = renderChat({ messages: turn2 });
  const ha = blockHashes(a, "m", undefined);
  const hb = blockHashes(b, "m", undefined);
  assert.deepEqual(hb.slice(0, ha.length), ha);
  assert.equal(ha.length, Math.floor(a.length / 64));
  assert.equal(countTokens(a), Math.ceil(a.length / 4));
  // Tools come first; a different model or cache_salt shares nothing.
  assert.ok(
    renderChat({ messages: turn1, tools: [{ type: "function" }] }).indexOf("function") <
      renderChat({ messages: turn1, tools: [{ type: "function" }] }).indexOf("SSS"),
  );
  assert.notEqual(blockHashes(a, "other", undefined)[0], ha[0]);
  assert.notEqual(blockHashes(a, "m", "salt")[0], ha[0]);
});
