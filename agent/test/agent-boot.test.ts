/** warmpath-agent's restart detection (boot.ts), backoff (backoff.ts) and command line (args.ts). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { HELP, UsageError, parseAgentArgs } from "../args.ts";
import { backoffDelay } from "../backoff.ts";
import { bootMarkers, newBootId, restartReason } from "../boot.ts";
import { llamacpp } from "../engines/llamacpp.ts";
import { sglang } from "../engines/sglang.ts";
import { vllm } from "../engines/vllm.ts";
import { parsePrometheus } from "../prometheus.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
const fixture = (name: string) => readFileSync(join(FIXTURES, name), "utf8");

const vllmPage = (prompt: number, start?: number) =>
  parsePrometheus(
    [
      ...(start === undefined ? [] : [`process_start_time_seconds ${start}`]),
      `vllm:prompt_tokens_total{engine="0",model_name="m"} ${prompt}`,
      `vllm:generation_tokens_total{engine="0",model_name="m"} 10`,
    ].join("\n"),
  );

test("vLLM markers: the process start time and the counters, summed over label sets", () => {
  const m = bootMarkers(vllm, { samples: parsePrometheus(fixture("vllm-0.10-metrics.txt")), headers: {} });
  assert.deepEqual(m, {
    engine: "vllm",
    start: "1763201451.62",
    counters: { "vllm:prompt_tokens_total": 2456301, "vllm:generation_tokens_total": 183442, "vllm:request_success_total": 1223 },
  });
});

test("a restart is seen from a counter going backwards, even without any outage", () => {
  const before = bootMarkers(vllm, { samples: vllmPage(5000), headers: {} });
  const grown = bootMarkers(vllm, { samples: vllmPage(5200), headers: {} });
  const reset = bootMarkers(vllm, { samples: vllmPage(40), headers: {} });
  assert.equal(restartReason(undefined, before), undefined);
  assert.equal(restartReason(before, grown), undefined);
  assert.equal(restartReason(before, before), undefined);
  assert.match(restartReason(grown, reset) ?? "", /vllm:prompt_tokens_total went backwards \(5200 -> 40\)/);
});

test("a restart is seen from a new process start time, even if the counters have grown past the old values", () => {
  const before = bootMarkers(vllm, { samples: vllmPage(5000, 1763201451.62), headers: {} });
  const after = bootMarkers(vllm, { samples: vllmPage(9000, 1763209999.5), headers: {} });
  assert.match(restartReason(before, after) ?? "", /process start changed/);
});

test("llama.cpp: the Process-Start-Time-Unix header is the start marker; the recorded restart resets the counters", () => {
  const busy = {
    samples: parsePrometheus(fixture("llamacpp-recorded-metrics-after.txt")),
    headers: { "process-start-time-unix": "1227768" },
  };
  const fresh = { samples: parsePrometheus(fixture("llamacpp-recorded-metrics.txt")), headers: { "process-start-time-unix": "1228367" } };
  const before = bootMarkers(llamacpp, busy);
  assert.equal(before.start, "1227768");
  assert.equal(before.counters["llamacpp:prompt_tokens_total"], 7715);
  assert.match(restartReason(before, bootMarkers(llamacpp, fresh)) ?? "", /process start changed/);
  // Without the header (a proxy dropped it), the counters alone show it.
  const noHeader = (s: typeof busy) => bootMarkers(llamacpp, { samples: s.samples, headers: {} });
  assert.match(restartReason(noHeader(busy), noHeader(fresh)) ?? "", /llamacpp:prompt_tokens_total went backwards \(7715 -> 0\)/);
});

test("SGLang markers come from its tokenizer counters", () => {
  const m = bootMarkers(sglang, { samples: parsePrometheus(fixture("sglang-metrics.txt")), headers: {} });
  assert.deepEqual(m.counters, {
    "sglang:prompt_tokens_total": 5230012,
    "sglang:generation_tokens_total": 402211,
    "sglang:num_requests_total": 8841,
  });
  assert.equal(m.start, undefined);
});

test("another engine behind the same URL is a new boot", () => {
  const a = bootMarkers(vllm, { samples: vllmPage(1), headers: {} });
  const b = bootMarkers(sglang, { samples: [], headers: {} });
  assert.match(restartReason(a, b) ?? "", /engine changed/);
});

test("boot ids are fresh each time and fit the contract", () => {
  const a = newBootId();
  assert.notEqual(a, newBootId());
  assert.ok(a.length > 0 && a.length <= 128);
});

test("backoff: doubles from the base, bounded by the cap, jittered within [step/2, step]", () => {
  const lo = () => 0;
  const hi = () => 1;
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7].map((n) => backoffDelay(n, 1000, 30000, hi)),
    [1000, 2000, 4000, 8000, 16000, 30000, 30000],
  );
  assert.deepEqual(
    [1, 2, 6].map((n) => backoffDelay(n, 1000, 30000, lo)),
    [500, 1000, 15000],
  );
  assert.equal(backoffDelay(1000, 1000, 30000, hi), 30000); // no overflow however long the outage
});

const REQUIRED = ["--router", "http://r.example", "--region", "us-east", "--node-id", "gpu-1", "--url", "http://10.0.0.5:8000/"];

test("args: defaults", () => {
  assert.deepEqual(parseAgentArgs(REQUIRED), {
    routerUrl: "http://r.example",
    region: "us-east",
    nodeId: "gpu-1",
    nodeUrl: "http://10.0.0.5:8000",
    engineUrl: "http://10.0.0.5:8000",
    metricsUrl: "http://10.0.0.5:8000/metrics",
    engine: "auto",
    models: undefined,
    kvCapacityTokens: undefined,
    maxRunning: undefined,
    intervalMs: 1000,
    engineTimeoutMs: 3000,
    routerTimeoutMs: 5000,
    maxBackoffMs: 30000,
    downAfter: 3,
    stateFile: undefined,
  });
});

test("args: overrides", () => {
  const c = parseAgentArgs([
    ...REQUIRED,
    "--engine-url=http://127.0.0.1:8000",
    "--engine",
    "llamacpp",
    "--models",
    "a, b",
    "--kv-capacity-tokens",
    "65536",
    "--max-running",
    "128",
    "--interval-ms",
    "250",
    "--down-after",
    "5",
    "--state-file",
    "/var/lib/warmpath/gpu-1.json",
  ]);
  assert.equal(c?.engineUrl, "http://127.0.0.1:8000");
  assert.equal(c?.metricsUrl, "http://127.0.0.1:8000/metrics");
  assert.equal(c?.nodeUrl, "http://10.0.0.5:8000");
  assert.equal(c?.engine, "llamacpp");
  assert.deepEqual(c?.models, ["a", "b"]);
  assert.equal(c?.kvCapacityTokens, 65536);
  assert.equal(c?.maxRunning, 128);
  assert.equal(c?.intervalMs, 250);
  assert.equal(c?.downAfter, 5);
  assert.equal(c?.stateFile, "/var/lib/warmpath/gpu-1.json");
});

test("args: refuses a token on the command line, bad values and unknown flags", () => {
  assert.throws(() => parseAgentArgs([...REQUIRED, "--token", "secret"]), /WARMPATH_NODE_TOKEN, never from the command line/);
  assert.throws(() => parseAgentArgs([...REQUIRED, "--node-token=secret"]), /never from the command line/);
  assert.throws(() => parseAgentArgs(REQUIRED.slice(2)), /missing --router/);
  assert.throws(() => parseAgentArgs([...REQUIRED, "--engine", "tgi"]), /--engine must be one of vllm, sglang, llamacpp/);
  assert.throws(() => parseAgentArgs([...REQUIRED, "--interval-ms", "0"]), /--interval-ms must be a positive integer/);
  assert.throws(() => parseAgentArgs([...REQUIRED, "--kv-capacity-tokens", "1e3x"]), /positive integer/);
  assert.throws(() => parseAgentArgs([...REQUIRED, "--max-running", "0"]), /--max-running must be a positive integer/);
  assert.throws(() => parseAgentArgs([...REQUIRED, "--max-running", "65537"]), /--max-running must be at most 65536/);
  assert.throws(() => parseAgentArgs(["--router", "ftp://x", ...REQUIRED.slice(2)]), /http\(s\) URL/);
  assert.throws(() => parseAgentArgs([...REQUIRED.slice(0, 4), "--node-id", "GPU_1", ...REQUIRED.slice(6)]), /--node-id/);
  assert.throws(() => parseAgentArgs([...REQUIRED, "--frobnicate"]), UsageError);
  assert.equal(parseAgentArgs(["--help"]), undefined);
  assert.equal(parseAgentArgs(["-h"]), undefined);
  assert.match(HELP, /WARMPATH_NODE_TOKEN/);
});
