import { test } from "node:test";
import assert from "node:assert/strict";
import { metricValue, parseLoad } from "../node-reporter.ts";

test("reads vLLM load metrics, summing label sets", () => {
  const page = [
    "# HELP vllm:num_requests_running Number of requests running.",
    'vllm:num_requests_running{model_name="a"} 3.0',
    'vllm:num_requests_running{model_name="b"} 2.0',
    'vllm:num_requests_waiting{model_name="a"} 1.0',
    'vllm:gpu_cache_usage_perc{model_name="a"} 0.42',
  ].join("\n");
  assert.deepEqual(parseLoad(page), { running: 5, waiting: 1, kvUsage: 0.42 });
});

test("reads SGLang load metrics", () => {
  assert.deepEqual(parseLoad('sglang:num_running_reqs{tp_rank="0"} 4\nsglang:num_queue_reqs 7\nsglang:token_usage 0.5\n'), {
    running: 4,
    waiting: 7,
    kvUsage: 0.5,
  });
});

test("does not confuse a metric with a longer name that shares its prefix", () => {
  assert.equal(metricValue("vllm:num_requests_running_total 9\nvllm:num_requests_running 2\n", ["vllm:num_requests_running"]), 2);
});

test("refuses a page without load metrics", () => {
  assert.throws(() => parseLoad("up 1\n"), /no vLLM or SGLang load metrics/);
});
