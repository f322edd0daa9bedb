/**
 * The report contract's bounds (src/contracts/node.ts) on the agent's side (agent/limits.ts): one
 * figure past them gets the whole report refused (400) and the node expires, so engine figures
 * are clamped or treated as unreadable, and flags that could never be sent are refused at startup.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { EventEmitter, once } from "node:events";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_REPORTED_REQUESTS as CONTRACT_MAX_REQUESTS, nodeIdSchema, nodeReportSchema } from "../../src/contracts/node.ts";
import { startAgent, type AgentEvent } from "../agent.ts";
import { UsageError, parseAgentArgs } from "../args.ts";
import { sglang } from "../engines/sglang.ts";
import { count, positiveInt, type EngineScrape } from "../engines/types.ts";
import { vllm } from "../engines/vllm.ts";
import { MAX_MODEL_NAME, MAX_MODELS, MAX_NODE_URL, MAX_REGION, MAX_REPORTED_REQUESTS, MAX_TIMER_MS, NODE_ID } from "../limits.ts";
import { parsePrometheus } from "../prometheus.ts";
import { FakeRouter, FixtureEngine, WAIT_MS, testAgentOptions, waitFor } from "./fixtures/fakes.ts";

const fixture = (name: string) => readFileSync(join(import.meta.dirname, "fixtures", name), "utf8");
const page = (text: string): EngineScrape => ({ samples: parsePrometheus(text), headers: {} });

/** A valid report, to change one field of. */
const REPORT = {
  node_id: "gpu-1",
  region: "us-east",
  url: "http://10.0.0.5:8000",
  models: ["m"],
  kv_capacity_tokens: 1000,
  running: 0,
  waiting: 0,
  kv_usage: 0,
};
const accepted = (change: Record<string, unknown>) => nodeReportSchema.safeParse({ ...REPORT, ...change }).success;

test("the agent's bounds are the report contract's", () => {
  assert.equal(MAX_REPORTED_REQUESTS, CONTRACT_MAX_REQUESTS);
  for (const field of ["running", "waiting"]) {
    assert.ok(accepted({ [field]: MAX_REPORTED_REQUESTS }), field);
    assert.ok(!accepted({ [field]: MAX_REPORTED_REQUESTS + 1 }), field);
  }
  assert.ok(accepted({ models: Array.from({ length: MAX_MODELS }, (_, i) => `m${i}`) }));
  assert.ok(!accepted({ models: Array.from({ length: MAX_MODELS + 1 }, (_, i) => `m${i}`) }));
  assert.ok(accepted({ models: ["m".repeat(MAX_MODEL_NAME)] }));
  assert.ok(!accepted({ models: ["m".repeat(MAX_MODEL_NAME + 1)] }));
  assert.ok(accepted({ region: "r".repeat(MAX_REGION) }));
  assert.ok(!accepted({ region: "r".repeat(MAX_REGION + 1) }));
  const url = (n: number) => `http://h.example/${"p".repeat(n - "http://h.example/".length)}`;
  assert.ok(accepted({ url: url(MAX_NODE_URL) }));
  assert.ok(!accepted({ url: url(MAX_NODE_URL + 1) }));
  assert.ok(accepted({ kv_capacity_tokens: Number.MAX_SAFE_INTEGER }));
  assert.ok(!accepted({ kv_capacity_tokens: 1e17 }), "the contract refuses a capacity past 2^53-1");
  for (const id of ["gpu-1", "a".repeat(63), "a".repeat(64), "GPU", "-a", "a_b"]) {
    assert.equal(NODE_ID.test(id), nodeIdSchema.safeParse(id).success, id);
  }
});

test("counts are clamped to the contract's MAX_REPORTED_REQUESTS; a capacity past 2^53-1 is unreadable", () => {
  assert.equal(count(2e6), MAX_REPORTED_REQUESTS);
  assert.equal(count(1e300), MAX_REPORTED_REQUESTS);
  assert.equal(count(Infinity), 0, "not a figure: unknown, as before");
  assert.equal(positiveInt("1e17"), undefined);
  assert.equal(positiveInt(2 ** 53), undefined);
  assert.equal(positiveInt(String(Number.MAX_SAFE_INTEGER)), Number.MAX_SAFE_INTEGER);
  assert.equal(vllm.readCapacity(page('vllm:cache_config_info{engine="0",kv_cache_size_tokens="1e17"} 1.0\n')), undefined);
  assert.equal(
    vllm.readCapacity(page('vllm:cache_config_info{block_size="1000000000",engine="0",num_gpu_blocks="1000000000"} 1.0\n')),
    undefined,
    "block_size x num_gpu_blocks past 2^53-1",
  );
  const big = 2 ** 52;
  const twoEngines = [0, 1].map((e) => `vllm:cache_config_info{engine="${e}",kv_cache_size_tokens="${big}"} 1.0`).join("\n");
  assert.equal(vllm.readCapacity(page(twoEngines + "\n")), undefined, "a sum past 2^53-1");
  assert.equal(sglang.readCapacity(page("sglang:max_total_num_tokens 1e17\n")), undefined);
});

test("a vLLM page with 2e6 waiting and kv_cache_size_tokens 1e17: reports the contract accepts, capacity from block_size x num_gpu_blocks", async () => {
  const base = fixture("vllm-0.10-metrics.txt");
  const metrics = base
    .replace(/(vllm:num_requests_waiting\{[^}]*\}) 2\.0/, "$1 2e+06")
    .replace('vllm:cache_config_info{block_size="16",', 'vllm:cache_config_info{block_size="16",kv_cache_size_tokens="1e17",');
  assert.notEqual(metrics, base);
  assert.match(metrics, /kv_cache_size_tokens="1e17"/);
  const engine = new FixtureEngine({ metrics, models: fixture("vllm-models.json") });
  const router = new FakeRouter();
  await engine.start();
  await router.start();
  const bus = new EventEmitter();
  const events: AgentEvent[] = [];
  router.on("request", () => bus.emit("event"));
  const agent = startAgent(
    testAgentOptions(engine.url, router.url, {
      log: (e) => {
        events.push(e);
        bus.emit("event");
      },
    }),
  );
  try {
    const reports = await waitFor(bus, "event", () => (router.reports().length >= 2 ? router.reports() : undefined), "two reports");
    for (const r of reports) {
      const parsed = nodeReportSchema.safeParse(r);
      assert.ok(parsed.success, JSON.stringify(parsed.error?.issues));
      assert.equal(r.waiting, MAX_REPORTED_REQUESTS);
      assert.equal(r.running, 7);
      assert.equal(r.kv_capacity_tokens, 16 * 29837, "the label past 2^53-1 is unreadable: the documented fallback");
    }
    assert.equal(events.filter((e) => e.event === "router_failing").length, 0);
    const capacity = events.find((e) => e.event === "capacity") as { source: string } | undefined;
    assert.match(capacity?.source ?? "", /block_size x num_gpu_blocks/);
  } finally {
    await agent.stop();
    await engine.stop();
    await router.stop();
  }
});

const REQUIRED = ["--router", "http://r.example", "--region", "us-east", "--node-id", "gpu-1", "--url", "http://10.0.0.5:8000"];

test("args: flags the contract could never carry are refused, naming the flag", () => {
  const long = "m".repeat(MAX_MODEL_NAME + 1);
  assert.throws(
    () => parseAgentArgs([...REQUIRED, "--models", `a,${long}`]),
    /--models: each name must be at most 256 characters, not 257/,
  );
  assert.deepEqual(parseAgentArgs([...REQUIRED, "--models", "m".repeat(MAX_MODEL_NAME)])?.models, ["m".repeat(MAX_MODEL_NAME)]);
  const many = Array.from({ length: MAX_MODELS + 1 }, (_, i) => `m${i}`).join(",");
  assert.throws(() => parseAgentArgs([...REQUIRED, "--models", many]), /--models lists 65 models; a report carries at most 64/);
  const region = ["--region", "r".repeat(MAX_REGION + 1)];
  assert.throws(() => parseAgentArgs([...REQUIRED.slice(0, 2), ...region, ...REQUIRED.slice(4)]), /--region must be at most 64 characters/);
  const url = `http://10.0.0.5:8000/${"p".repeat(MAX_NODE_URL)}`;
  assert.throws(() => parseAgentArgs([...REQUIRED.slice(0, 6), "--url", url]), /--url must be at most 2048 characters/);
  assert.throws(
    () => parseAgentArgs([...REQUIRED, "--kv-capacity-tokens", "1e17"]),
    /--kv-capacity-tokens must be a positive integer, not '1e17'/,
  );
  for (const flag of ["--interval-ms", "--engine-timeout-ms", "--router-timeout-ms", "--max-backoff-ms"]) {
    assert.throws(() => parseAgentArgs([...REQUIRED, flag, String(MAX_TIMER_MS + 1)]), new RegExp(`${flag} must be at most 2147483647`));
    assert.doesNotThrow(() => parseAgentArgs([...REQUIRED, flag, String(MAX_TIMER_MS)]));
  }
  assert.throws(
    () => parseAgentArgs([...REQUIRED, "--url", "ftp://user:s3cret@h"]),
    (e: Error) => e instanceof UsageError && !e.message.includes("s3cret"),
  );
});

test("the command line: a --models name longer than the contract allows exits 2 at startup, naming --models", async () => {
  const child = spawn(
    process.execPath,
    [join(import.meta.dirname, "..", "warmpath-agent.ts"), ...REQUIRED, "--models", `ok,${"m".repeat(MAX_MODEL_NAME + 1)}`],
    { env: { ...process.env, WARMPATH_NODE_TOKEN: "node-token" }, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), WAIT_MS);
  try {
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 2, stderr);
    assert.match(stderr, /warmpath-agent: --models: each name must be at most 256 characters/);
  } finally {
    clearTimeout(timer);
  }
});
