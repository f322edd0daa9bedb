/** bench/wan/stages.ts: a profile's samples assigned to the request's stages by their stack's source modules. */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Profiler } from "node:inspector";
import { STAGES, moduleStage, stageSamples } from "../wan/stages.ts";

// A bundle as esbuild writes it: each module's code after a `// path` comment, the paths relative to
// the bundle's folder (outside the project), packages under node_modules.
const BUNDLE = [
  "var x = 1;", // 0
  "// ../../node_modules/zod/v4/core/schemas.js", // 1
  "function zodRun() {}", // 2
  "// ../../../../work/x/src/edge/api/schemas.ts", // 3
  "function parseBody() {}", // 4
  "// ../../../../work/x/src/core/prefix.ts", // 5
  "function prefixKey() {}", // 6
  "// ../../../../work/x/src/proxy/decision-log.ts", // 7
  "function recordDecision() {}", // 8
  "// ../../../../work/x/src/util/unknown.ts", // 9
  "function helper() {}", // 10
].join("\n");

const URL = "index.js";
function frame(id: number, functionName: string, line: number, children: number[] = [], url = URL): Profiler.ProfileNode {
  return { id, callFrame: { functionName, scriptId: "1", url, lineNumber: line, columnNumber: 0 }, children };
}

test("moduleStage names the stage of the modules on the request path, and none for the rest", () => {
  assert.equal(moduleStage("src/core/prefix.ts"), "edge: canonicalise + hash the prompt");
  assert.equal(moduleStage("src/core/internal-auth.ts"), "internal boundary: HMAC sign + verify");
  assert.equal(moduleStage("src/http/body.ts"), "edge: body read, JSON parse, validation");
  assert.equal(moduleStage("src/http/json-errors.ts"), "edge: body read, JSON parse, validation");
  assert.equal(moduleStage("durable-objects/route-session.ts"), "object call: route session (route, firstByte, complete)");
  assert.equal(moduleStage("src/region/call-node.ts"), "node call setup (body, headers, fetch)");
  assert.equal(moduleStage("src/proxy/relay.ts"), "relay: stream and SSE events (edge guard, relay, seam)");
  assert.equal(moduleStage("src/proxy/read-clock.ts"), "relay: stream and SSE events (edge guard, relay, seam)");
  assert.equal(moduleStage("src/edge/guard-stream.ts"), "relay: stream and SSE events (edge guard, relay, seam)");
  assert.equal(moduleStage("src/edge/forward.ts"), "service binding: dispatch encode/decode, edge and region handlers");
  assert.equal(moduleStage("node_modules/hono/dist/hono-base.js"), "edge: HTTP, Hono, API key, bounds");
  assert.equal(moduleStage("node_modules/zod/v4/core/schemas.js"), undefined, "zod counts for its caller");
  assert.equal(moduleStage("src/util/unknown.ts"), undefined);
});

test("each sample goes to the innermost frame of its stack that names a stage; idle is left out", () => {
  // root -> parseBody -> zodRun ; root -> prefixKey ; root -> recordDecision -> (native log) ; root -> helper ; GC ; program ; idle
  const nodes = [
    frame(1, "(root)", -1, [2, 4, 5, 7, 8, 9, 10], ""),
    frame(2, "parseBody", 4, [3]),
    frame(3, "zodRun", 2),
    frame(4, "prefixKey", 6),
    frame(5, "recordDecision", 8, [6]),
    frame(6, "log", -1, [], ""),
    frame(7, "helper", 10),
    frame(8, "(garbage collector)", -1, [], ""),
    frame(9, "(program)", -1, [], ""),
    frame(10, "(idle)", -1, [], ""),
  ];
  const profile: Profiler.Profile = {
    nodes,
    startTime: 0,
    endTime: 1,
    samples: [3, 3, 4, 6, 6, 6, 7, 8, 9, 10, 10, 10, 10],
    timeDeltas: [],
  };
  const counts = stageSamples(profile, BUNDLE);
  assert.equal(counts["edge: body read, JSON parse, validation"], 2, "zod's frames count for the edge's validation that called them");
  assert.equal(counts["edge: canonicalise + hash the prompt"], 1);
  assert.equal(counts["logging + tracing (decision line, spans)"], 3, "console.log's native work counts for the code that logged");
  assert.equal(counts["other JavaScript"], 1);
  assert.equal(counts["garbage collection"], 1);
  assert.equal(counts["runtime native (streams, sockets, RPC plumbing)"], 1);
  assert.equal(
    STAGES.reduce((n, s) => n + counts[s], 0),
    9,
    "every sample but the idle ones, once",
  );
});
