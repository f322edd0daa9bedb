/**
 * The warmpath-agent command (agent/warmpath-agent.ts) as a process: --help, refusals,
 * SIGTERM/SIGINT (deregister, exit 0), and the fatal exit without a KV capacity.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { FakeEngine, FakeRouter, WAIT_MS, waitFor } from "./fixtures/fakes.ts";

const BIN = join(import.meta.dirname, "..", "warmpath-agent.ts");

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function start(args: string[], env: Record<string, string | undefined> = {}) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, WARMPATH_NODE_TOKEN: undefined, WARMPATH_ENGINE_API_KEY: undefined, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = (async (): Promise<Run> => {
    const timer = setTimeout(() => child.kill("SIGKILL"), WAIT_MS);
    const [code, signal] = (await once(child, "exit")) as [number | null, NodeJS.Signals | null];
    clearTimeout(timer);
    return { code, signal, stdout, stderr };
  })();
  return { child, exited, stderr: () => stderr };
}

test("--help prints the usage, flags, defaults and the environment, and exits 0", async () => {
  const r = await start(["--help"]).exited;
  assert.equal(r.code, 0);
  for (const text of ["Usage:", "--router URL", "--kv-capacity-tokens N", "(default 1000)", "WARMPATH_NODE_TOKEN", "--down-after N"]) {
    assert.ok(r.stdout.includes(text), `--help mentions ${text}`);
  }
});

test("refuses a token on the command line and a missing WARMPATH_NODE_TOKEN (exit 2)", async () => {
  const args = ["--router", "http://127.0.0.1:9", "--region", "r", "--node-id", "n", "--url", "http://127.0.0.1:9"];
  const withFlag = await start([...args, "--token", "s3cret"], { WARMPATH_NODE_TOKEN: "x" }).exited;
  assert.equal(withFlag.code, 2);
  assert.match(withFlag.stderr, /never from the command line/);
  assert.ok(!withFlag.stderr.includes("s3cret"), "the token is not echoed");
  const noEnv = await start(args).exited;
  assert.equal(noEnv.code, 2);
  assert.match(noEnv.stderr, /set WARMPATH_NODE_TOKEN/);
});

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  test(`${signal}: deregisters the node and exits 0`, async () => {
    const engine = new FakeEngine();
    const router = new FakeRouter();
    await engine.start();
    await router.start();
    try {
      const agent = start(
        ["--router", router.url, "--region", "us-east", "--node-id", "gpu-1", "--url", engine.url, "--interval-ms", "50"],
        { WARMPATH_NODE_TOKEN: "node-token" },
      );
      await waitFor(router, "request", () => router.reports()[0], "the agent's first report");
      agent.child.kill(signal);
      const r = await agent.exited;
      assert.equal(r.code, 0, r.stderr);
      const del = router.deletes();
      assert.equal(del.length, 1);
      assert.equal(del[0]?.path, "/v1/nodes/us-east/gpu-1");
      const secret = router.requests.find((r) => r.method === "POST" && r.authorization !== "Bearer node-token")?.authorization;
      assert.match(del[0]?.authorization ?? "", /^Bearer [A-Za-z0-9_-]{43}$/, "the node leaves with its own secret");
      if (secret) assert.equal(del[0]?.authorization, secret);
      assert.ok(!r.stderr.includes(del[0]!.authorization!.slice(7)), "the node secret never reaches the log");
      assert.match(r.stderr, /registered with the router: node secret received, kept in memory/);
      assert.match(r.stderr, /us-east\/gpu-1: engine ok: vllm at http:\/\/127\.0\.0\.1:\d+\/metrics/);
      assert.match(r.stderr, /KV capacity 16000 tokens, from vllm:cache_config_info \(block_size x num_gpu_blocks\)/);
      assert.match(r.stderr, /deregistered from the router \(shutdown\)/);
      assert.ok(!r.stderr.includes("node-token"), "the token never reaches the log");
    } finally {
      await engine.stop();
      await router.stop();
    }
  });
}

test("no KV capacity anywhere: exits 1 with an error naming --kv-capacity-tokens", async () => {
  const engine = new FakeEngine();
  const router = new FakeRouter();
  engine.state.cacheConfig = false;
  await engine.start();
  await router.start();
  try {
    const r = await start(["--router", router.url, "--region", "us-east", "--node-id", "gpu-1", "--url", engine.url], {
      WARMPATH_NODE_TOKEN: "t",
    }).exited;
    assert.equal(r.code, 1);
    assert.match(r.stderr, /fatal: cannot read the KV cache capacity from vllm .*pass --kv-capacity-tokens/);
    assert.equal(router.reports().length, 0);
  } finally {
    await engine.stop();
    await router.stop();
  }
});
