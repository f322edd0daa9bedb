/**
 * External conformance in CI (scripts/compat/run.ts): CompatCanary, a scanner this repository did
 * not write, against a node of the simulated fleet and warmpath in front of the fleet, then a real
 * llama-server and warmpath in front of it (the llama e2e test's build and model: built once into
 * .cache/, which both tests share, under ensure.ts's lock). warmpath must score as the node it
 * fronts, probe by probe, and pass every probe in front of the simulated fleet. ~1 minute once
 * llama-server is built (the first run builds it, ~2 min on 2 cores).
 */
import { before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../system.ts";
import { formatCompat, runCompat, type CompatRun } from "../compat/run.ts";

/** CompatCanary's `modern` profile: model discovery, chat (basic, streamed, tool call, structured output), Responses (basic, streamed). */
const MODERN_PROBES = [
  "models.list",
  "chat.basic",
  "chat.streaming",
  "chat.tool_call",
  "chat.structured_output",
  "responses.basic",
  "responses.streaming",
];

let run: CompatRun;

before(async () => {
  run = await runCompat({ log: (l) => console.error(l) });
  console.log(formatCompat(run, "npm run test:node (scripts/test/compat.test.ts)"));
});

const statuses = (r: CompatRun["fleet"]["node"]) => r.results.map((x) => [x.id, x.status]);

test("the scans are CompatCanary's pinned version, every probe of its modern profile, against all four endpoints", () => {
  const pinned = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { devDependencies: Record<string, string> })
    .devDependencies.compatcanary;
  for (const report of [run.fleet.node, run.fleet.warmpath, run.llama!.node, run.llama!.warmpath]) {
    assert.equal(report.scanner.version, pinned);
    assert.deepEqual(
      report.results.map((r) => r.id),
      MODERN_PROBES,
    );
  }
});

test("a node of the simulated fleet passes every probe, structured output included", () => {
  for (const r of run.fleet.node.results) assert.equal(r.status, "pass", `${r.id}: ${r.summary}`);
  assert.equal(run.fleet.node.score, 100);
});

test("warmpath in front of the simulated fleet: the node's report, probe by probe, every probe passed", () => {
  assert.deepEqual(run.fleet.disagreements, []);
  assert.deepEqual(statuses(run.fleet.warmpath), statuses(run.fleet.node));
  for (const r of run.fleet.warmpath.results) assert.equal(r.status, "pass", `${r.id}: ${r.summary}`);
  assert.equal(run.fleet.warmpath.score, run.fleet.node.score);
});

test("warmpath in front of llama-server: the node's report, probe by probe", () => {
  const llama = run.llama!;
  assert.deepEqual(llama.disagreements, []);
  assert.deepEqual(statuses(llama.warmpath), statuses(llama.node));
  assert.equal(llama.warmpath.score, llama.node.score);
  // What the engine serves well, warmpath serves: chat, streaming and the Responses API pass at both.
  for (const id of ["chat.basic", "chat.streaming", "responses.basic", "responses.streaming"]) {
    assert.equal(llama.warmpath.results.find((r) => r.id === id)?.status, "pass", id);
  }
});
