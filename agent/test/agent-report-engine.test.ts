/**
 * The report's `engine` field (src/contracts/node.ts): every report names the engine the agent
 * detected (`vllm`, `sglang`, `llama.cpp`), or the one `--engine` forced. The router decides from
 * it whether a stream that broke can be continued on the node. Each engine is a fake HTTP server
 * serving the fixtures written from that engine's source (agent/test/fixtures/README.md).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { EventEmitter, once } from "node:events";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { nodeMaxRunningSchema, nodeReportSchema } from "../../src/contracts/node.ts";
import { startAgent, type AgentEvent, type AgentOptions } from "../agent.ts";
import { MAX_RUNNING_REPORTED } from "../args.ts";
import type { EngineName } from "../engines/types.ts";
import { FixtureEngine, FakeRouter, WAIT_MS, testAgentOptions, waitFor, type FixturePages } from "./fixtures/fakes.ts";

const fixture = (name: string) => readFileSync(join(import.meta.dirname, "fixtures", name), "utf8");

const PAGES: Record<EngineName, FixturePages> = {
  vllm: { metrics: fixture("vllm-0.10-metrics.txt"), models: fixture("vllm-models.json") },
  sglang: { metrics: fixture("sglang-metrics.txt"), models: fixture("sglang-models.json") },
  llamacpp: { metrics: fixture("llamacpp-metrics.txt"), models: fixture("llamacpp-models.json"), props: fixture("llamacpp-props.json") },
};

/** Runs an agent against `pages` until `until` returns a value; stops everything, returns it. */
async function withAgent<T>(
  pages: FixturePages,
  engine: AgentOptions["engine"],
  until: (router: FakeRouter, events: AgentEvent[]) => T | undefined,
  what: string,
  extra: Partial<AgentOptions> = {},
): Promise<{ value: T; router: FakeRouter; events: AgentEvent[] }> {
  const fake = new FixtureEngine(pages);
  const router = new FakeRouter();
  await fake.start();
  await router.start();
  const bus = new EventEmitter();
  const events: AgentEvent[] = [];
  router.on("request", () => bus.emit("event"));
  fake.on("request", () => bus.emit("event"));
  const agent = startAgent(
    testAgentOptions(fake.url, router.url, {
      engine,
      log: (e) => {
        events.push(e);
        bus.emit("event");
      },
      ...extra,
    }),
  );
  try {
    const value = await waitFor(bus, "event", () => until(router, events), what);
    return { value, router, events };
  } finally {
    await agent.stop();
    await fake.stop();
    await router.stop();
  }
}

/** The first `n` accepted reports, once there are that many. */
const reports = (n: number) => (router: FakeRouter) => (router.reports().length >= n ? router.reports().slice(0, n) : undefined);

/** Each engine, its name in the report, and its KV capacity in the fixtures (how it was read). */
const DETECTED: Array<[EngineName, string, number]> = [
  ["vllm", "vllm", 16 * 29837],
  ["sglang", "sglang", 311328],
  ["llamacpp", "llama.cpp", 32768],
];

for (const [name, reported, capacity] of DETECTED) {
  test(`detected ${name}: every report carries engine "${reported}", which the router's contract keeps`, async () => {
    const { value, events } = await withAgent(PAGES[name], "auto", reports(3), "three reports");
    for (const r of value) {
      assert.equal(r.engine, reported);
      assert.equal(r.kv_capacity_tokens, capacity);
      assert.equal(nodeReportSchema.parse(r).engine, reported, "a name the router knows (not turned into `other`)");
    }
    assert.deepEqual(
      events.filter((e) => e.event === "engine_ok").map((e) => (e as { engine: string }).engine),
      [name],
    );
  });
}

// The most requests the engine runs at once (`max_running_requests`): the router predicts the wait past it.
test("llama.cpp reports its slots (/props total_slots) as max_running_requests; vLLM and SGLang, which do not say, report none", async () => {
  const llama = await withAgent(PAGES.llamacpp, "auto", reports(2), "two reports");
  assert.deepEqual(
    llama.value.map((r) => r.max_running_requests),
    [4, 4],
  );
  assert.equal(nodeReportSchema.parse(llama.value[0]).max_running_requests, 4, "the router's contract keeps it");
  for (const name of ["vllm", "sglang"] as const) {
    const { value } = await withAgent(PAGES[name], "auto", reports(1), "a report");
    assert.equal(value[0]?.max_running_requests, undefined, name);
  }
});

test("--max-running overrides what the engine says; a figure past the contract's bound (the command line refuses one) is not sent", async () => {
  const vllm = await withAgent(PAGES.vllm, "auto", reports(1), "a report", { maxRunning: 256 });
  assert.equal(vllm.value[0]?.max_running_requests, 256);
  const llama = await withAgent(PAGES.llamacpp, "auto", reports(1), "a report", { maxRunning: 8 });
  assert.equal(llama.value[0]?.max_running_requests, 8, "the flag, not the slots in /props");
  const huge = await withAgent(PAGES.vllm, "auto", reports(1), "a report", { maxRunning: MAX_RUNNING_REPORTED + 1 });
  assert.equal(huge.value[0]?.max_running_requests, undefined);
  assert.equal(nodeReportSchema.safeParse(huge.value[0]).success, true, "the report is still accepted");
});

test("the agent's bound on max_running_requests is the router contract's", () => {
  assert.equal(nodeMaxRunningSchema.safeParse(MAX_RUNNING_REPORTED).success, true);
  assert.equal(nodeMaxRunningSchema.safeParse(MAX_RUNNING_REPORTED + 1).success, false);
});

// One page with two engines' metrics: detection refuses it, so only the flag can name the engine.
const MIXED: FixturePages = { ...PAGES.llamacpp, metrics: PAGES.vllm.metrics + PAGES.sglang.metrics + PAGES.llamacpp.metrics };

test("detection cannot choose (several engines' metrics): nothing is reported", async () => {
  const { router } = await withAgent(
    MIXED,
    "auto",
    (_, events) => events.find((e) => e.event === "engine_failing" && /several engines/.test(e.error)),
    "the engine_failing event",
  );
  assert.equal(router.reports().length, 0);
});

for (const [name, reported, capacity] of DETECTED) {
  test(`--engine ${name} forces the engine: every report carries engine "${reported}"`, async () => {
    const { value } = await withAgent(MIXED, name, reports(2), "two reports");
    assert.equal(value[0]?.kv_capacity_tokens, capacity, `the page was read as ${name}`);
    assert.deepEqual(
      value.map((r) => r.engine),
      [reported, reported],
    );
  });
}

test("the command line: --engine llamacpp reaches the report as engine llama.cpp", async () => {
  const fake = new FixtureEngine(MIXED);
  const router = new FakeRouter();
  await fake.start();
  await router.start();
  const child = spawn(
    process.execPath,
    [
      join(import.meta.dirname, "..", "warmpath-agent.ts"),
      ...["--router", router.url, "--region", "us-east", "--node-id", "gpu-1", "--url", fake.url],
      ...["--engine", "llamacpp", "--interval-ms", "50"],
    ],
    { env: { ...process.env, WARMPATH_NODE_TOKEN: "node-token", WARMPATH_ENGINE_API_KEY: undefined }, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = once(child, "exit");
  const timer = setTimeout(() => child.kill("SIGKILL"), WAIT_MS);
  try {
    const first = await waitFor(router, "request", () => router.reports()[0], "the agent's first report");
    assert.equal(first.engine, "llama.cpp");
    assert.equal(first.kv_capacity_tokens, 32768, "read as llama.cpp (/props)");
    child.kill("SIGTERM");
    const [code] = (await exited) as [number | null];
    assert.equal(code, 0, stderr);
    assert.match(stderr, /engine ok: llamacpp at /);
  } finally {
    clearTimeout(timer);
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await fake.stop();
    await router.stop();
  }
});
