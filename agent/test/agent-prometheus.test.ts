/** warmpath-agent's Prometheus text parser (agent/prometheus.ts). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { meanValue, parsePrometheus, parseValue, series, sumOverReplicas } from "../prometheus.ts";

test("parses names with colons, labels, values and skips comments", () => {
  const samples = parsePrometheus(
    [
      "# HELP vllm:num_requests_running Number of requests in model execution batches.",
      "# TYPE vllm:num_requests_running gauge",
      'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
      "up 1",
      "",
      "# EOF",
    ].join("\n"),
  );
  assert.deepEqual(samples, [
    { name: "vllm:num_requests_running", labels: { engine: "0", model_name: "m" }, value: 3 },
    { name: "up", labels: {}, value: 1 },
  ]);
});

test("unescapes label values: backslash, quote, newline; keeps commas, braces and spaces inside", () => {
  const [s] = parsePrometheus(String.raw`m{path="C:\\models\\a",say="he said \"hi\"",multi="a\nb",odd="x,} y"} 1`);
  assert.deepEqual(s?.labels, { path: "C:\\models\\a", say: 'he said "hi"', multi: "a\nb", odd: "x,} y" });
});

test("reads Go and C++ float forms, +Inf, -Inf and NaN", () => {
  assert.equal(parseValue("1.23457e+06"), 1234570);
  assert.equal(parseValue("6.1234688e+010"), 61234688000); // prometheus_client's exponent quirk
  assert.equal(parseValue("3.0"), 3);
  assert.equal(parseValue("-0.5"), -0.5);
  assert.equal(parseValue("+Inf"), Infinity);
  assert.equal(parseValue("-Inf"), -Infinity);
  assert.ok(Number.isNaN(parseValue("NaN")));
  assert.equal(parseValue("abc"), undefined);
  assert.equal(parseValue(""), undefined);
  assert.equal(parseValue("0x10"), undefined);
  const [bucket] = parsePrometheus('ttft_bucket{le="+Inf"} 42');
  assert.deepEqual(bucket, { name: "ttft_bucket", labels: { le: "+Inf" }, value: 42 });
});

test("accepts timestamps, trailing commas, spaces around labels, CRLF and empty label sets", () => {
  const samples = parsePrometheus('a{x="1",} 2 1700000000000\r\nb { y = "2" } 3\r\nc{} 4\r\n');
  assert.deepEqual(
    samples.map((s) => [s.name, s.labels, s.value]),
    [
      ["a", { x: "1" }, 2],
      ["b", { y: "2" }, 3],
      ["c", {}, 4],
    ],
  );
});

test("skips malformed lines and keeps the rest of the page", () => {
  const samples = parsePrometheus(
    ["good 1", 'bad{x="unterminated} 2', "novalue", "bad2{x=1} 3", "bad3 1 2 3", "9starts_with_digit 1", 'also_good{a="b"} 5'].join("\n"),
  );
  assert.deepEqual(
    samples.map((s) => s.name),
    ["good", "also_good"],
  );
});

test("does not confuse a metric with a longer name that shares its prefix", () => {
  const samples = parsePrometheus("vllm:num_requests_running_total 9\nvllm:num_requests_running 2\n");
  assert.deepEqual(
    series(samples, "vllm:num_requests_running").map((s) => s.value),
    [2],
  );
});

test("sums a gauge over data-parallel replicas, counting each replica's ranks once", () => {
  const samples = parsePrometheus(
    [
      // replica 0 exported by two tensor-parallel ranks (same queue), replica 1 by one
      'sglang:num_running_reqs{dp_rank="0",tp_rank="0"} 4',
      'sglang:num_running_reqs{dp_rank="0",tp_rank="1"} 4',
      'sglang:num_running_reqs{dp_rank="1",tp_rank="0"} 6',
      'sglang:num_running_reqs{dp_rank="2",tp_rank="0"} NaN',
    ].join("\n"),
  );
  assert.equal(sumOverReplicas(samples, "dp_rank"), 10);
  assert.equal(sumOverReplicas([], "dp_rank"), undefined);
  assert.equal(meanValue(parsePrometheus("u 0.2\nu 0.6\nu NaN")), 0.4);
});
