/**
 * The comparison of two CompatCanary reports (scripts/compat/compare.ts) and what the run requires
 * of them (run.ts `failures`): a different outcome, finding or failing status is a disagreement;
 * counts and reshaped error bodies are notes. Reports are parsed by the contract the runner reads
 * CompatCanary's JSON with (canary.ts).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { canaryReportSchema, type CanaryReport, type ProbeResult } from "../compat/canary.ts";
import { disagreements, evidenceNotes, finding } from "../compat/compare.ts";
import { failures, formatCompat, type CompatRun, type PairRun } from "../compat/run.ts";

const probe = (id: string, status: ProbeResult["status"], summary: string, httpStatus?: number, body?: string): ProbeResult => ({
  id,
  name: id,
  category: "c",
  required: true,
  weight: 1,
  status,
  summary,
  durationMs: 1,
  ...(httpStatus ? { error: { message: summary, httpStatus, ...(body ? { responseBody: body } : {}) } } : {}),
});

function report(results: ProbeResult[]): CanaryReport {
  return canaryReportSchema.parse({
    schemaVersion: "compatcanary.report.v1",
    scanner: { name: "compatcanary", version: "0.2.2" },
    target: { baseUrl: "http://127.0.0.1:1/v1", model: "m", profile: "modern" },
    score: 100,
    compatible: true,
    summary: { passes: 0, warnings: 0, failures: 0, requiredFailures: 0, total: results.length },
    results,
    startedAt: "ignored: unknown fields are allowed",
  });
}

const base = [
  probe("models.list", "pass", "Discovered 1 models; selected model is listed"),
  probe("chat.streaming", "pass", "Received 64 valid chat stream chunks and [DONE]"),
  probe("chat.structured_output", "fail", "HTTP 400 from /chat/completions", 400, '{"error":{"code":400}}'),
];

test("equal reports agree; counts and error bodies that differ are notes, not disagreements", () => {
  const node = report(base);
  const warmpath = report([
    probe("models.list", "pass", "Discovered 2 models; selected model is listed"),
    base[1]!,
    probe("chat.structured_output", "fail", "HTTP 400 from /chat/completions", 400, '{"error":{"code":"node_error"}}'),
  ]);
  assert.deepEqual(disagreements(node, node), []);
  assert.deepEqual(disagreements(node, warmpath), []);
  const notes = evidenceNotes(node, warmpath);
  assert.equal(notes.length, 2);
  assert.match(notes[0]!, /Discovered 1 models.*Discovered 2 models/);
  assert.match(notes[1]!, /node_error/);
  assert.equal(finding("Received 64 chunks"), "Received N chunks");
});

test("another outcome, another finding, another failing status or a missing probe is a disagreement", () => {
  const node = report(base);
  const cases: [ProbeResult[], string, RegExp][] = [
    [
      [base[0]!, probe("chat.streaming", "warn", "Received 64 chat chunks and 1 non-canonical metadata event(s)"), base[2]!],
      "chat.streaming",
      /node pass, warmpath warn/,
    ],
    [[base[0]!, probe("chat.streaming", "pass", "Received 64 valid chat stream chunks"), base[2]!], "chat.streaming", /node "Received/],
    [
      [base[0]!, base[1]!, probe("chat.structured_output", "fail", "HTTP 400 from /chat/completions", 502)],
      "chat.structured_output",
      /HTTP 400 at the node, 502/,
    ],
    [[base[0]!, base[1]!], "chat.structured_output", /not run against warmpath/],
  ];
  for (const [results, id, why] of cases) {
    const d = disagreements(node, report(results));
    assert.equal(d.length, 1, id);
    assert.equal(d[0]!.id, id);
    assert.match(d[0]!.why, why);
  }
  assert.deepEqual(disagreements(report(base.slice(0, 2)), node), [{ id: "chat.structured_output", why: "not run against the node" }]);
});

test("the run fails on a disagreement, or on any probe not passed in front of the simulated fleet", () => {
  const pass = report(base.slice(0, 2));
  const pair = (node: CanaryReport, warmpath: CanaryReport, short: string): PairRun => ({
    engine: short,
    short,
    node,
    warmpath,
    disagreements: disagreements(node, warmpath),
    notes: evidenceNotes(node, warmpath),
  });
  const good: CompatRun = { fleet: pair(pass, pass, "simulated fleet"), llama: pair(report(base), report(base), "llama-server") };
  assert.deepEqual(failures(good), [], "a probe failing at llama-server and at warmpath alike is not a failure");
  const md = formatCompat(good, "npm run compat");
  assert.match(md, /CompatCanary 0\.2\.2/);
  assert.match(
    md,
    /\| probe \| required \| simulated fleet \(node\) \| warmpath \+ simulated fleet \| llama-server \(node\) \| warmpath \+ llama-server \|/,
  );
  assert.match(md, /warmpath \+ llama-server\*\*: equal to the node, probe by probe/);

  const fleetFails: CompatRun = { fleet: pair(report(base), report(base), "simulated fleet"), llama: undefined };
  assert.deepEqual(failures(fleetFails), [
    "simulated fleet: chat.structured_output fail: HTTP 400 from /chat/completions",
    "simulated fleet: chat.structured_output fail: HTTP 400 from /chat/completions",
  ]);
  const differs: CompatRun = { fleet: good.fleet, llama: pair(report(base), report(base.slice(0, 2)), "llama-server") };
  assert.match(failures(differs).join("\n"), /llama-server: warmpath differs from the node on chat.structured_output/);
  assert.match(formatCompat(differs, "x"), /DIFFERS from the node/);
});
