/**
 * The shippable agent (docs/AGENT.md): `npm run build:agent` makes one file, and that file ALONE,
 * copied into an empty folder with no node_modules above it, run by a Node older than 22 (the
 * system's /usr/bin/node, 20 here; no type stripping, no dev dependencies), registers a node with
 * a real local router (the deploy bundles in one workerd, scripts/system.ts) from a fake vLLM's
 * /metrics, keeps its secret in a --state-file, and on SIGTERM deregisters it and exits 0. ~15 s,
 * most of it the router's start.
 *
 * WARMPATH_AGENT_TEST_NODE=/path/to/node runs the bundle with another Node (e.g. an 18).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { FakeEngine } from "../../agent/test/fixtures/fakes.ts";
import { DEV_NODE_TOKEN } from "../../src/config/dev-credentials.ts";
import { AGENT_BUNDLE, MAX_BUNDLE_BYTES } from "../build-agent.ts";
import { ROOT, startSystem, type System } from "../system.ts";

const OLD_NODE = process.env.WARMPATH_AGENT_TEST_NODE || "/usr/bin/node";
const REGION = "us-east";
const NODE_ID = "bundle-test-1";
/** How long the router is given to show a change the agent made (a few report intervals). */
const WAIT_MS = 15_000;

interface StateNode {
  id: string;
  url: string;
  engine: string;
  models: string[];
  kvCapacityTokens: number;
  load: { report?: { running: number; waiting: number; kvUsage: number } };
}

async function regionNodes(system: System): Promise<StateNode[]> {
  // A local development router on loopback needs no admin token (src/edge/api/admin.ts).
  const res = await fetch(`${system.url}/admin/state/${REGION}`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { nodes: StateNode[] }).nodes;
}

async function poll<T>(what: string, check: () => Promise<T | undefined>, diagnostics: () => string): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) assert.fail(`timed out after ${WAIT_MS} ms waiting for ${what}\n${diagnostics()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** No node_modules in the folder or any folder above it: nothing to resolve a package from. */
function assertNoNodeModulesAbove(dir: string): void {
  for (let d = dir; ; d = dirname(d)) {
    assert.ok(!existsSync(join(d, "node_modules")), `${join(d, "node_modules")} exists: the bundle would not run alone`);
    if (dirname(d) === d) return;
  }
}

test(
  "the built agent runs alone on Node < 22: registers a node with a real router, deregisters on SIGTERM",
  { timeout: 120_000 },
  async () => {
    let nodeVersion: string;
    try {
      nodeVersion = execFileSync(OLD_NODE, ["--version"], { encoding: "utf8" }).trim();
    } catch (e) {
      assert.fail(`cannot run ${OLD_NODE} (${(e as Error).message}): set WARMPATH_AGENT_TEST_NODE to a Node 18-21 binary`);
    }
    const major = Number(/^v(\d+)\./.exec(nodeVersion)?.[1]);
    assert.ok(major < 22, `${OLD_NODE} is ${nodeVersion}: the test must run the bundle on a Node without type stripping`);

    // What `npm run build:agent` runs.
    const built = execFileSync(process.execPath, [join(ROOT, "scripts", "build-agent.ts")], { cwd: ROOT, encoding: "utf8" });
    const bytes = statSync(AGENT_BUNDLE).size;
    assert.ok(bytes < MAX_BUNDLE_BYTES, `${bytes} bytes`);
    assert.ok(built.includes(`${bytes} bytes`), built);
    const content = readFileSync(AGENT_BUNDLE);
    assert.ok(built.includes(createHash("sha256").update(content).digest("hex")), `the printed sha256 is the file's:\n${built}`);
    assert.ok(content.toString("utf8").startsWith("#!/usr/bin/env node\n"));
    assert.equal(statSync(AGENT_BUNDLE).mode & 0o111, 0o111, "executable");

    const dir = mkdtempSync(join(tmpdir(), "warmpath-agent-bundle-"));
    const bin = join(dir, "warmpath-agent.mjs");
    copyFileSync(AGENT_BUNDLE, bin);
    assert.deepEqual(readdirSync(dir), ["warmpath-agent.mjs"]);
    assert.equal(statSync(bin).mode & 0o111, 0o111, "still executable");
    const env = { PATH: `${dirname(OLD_NODE)}:/usr/bin:/bin` };
    assert.equal(execFileSync("node", ["--version"], { env, encoding: "utf8" }).trim(), nodeVersion, "env node finds OLD_NODE");
    assertNoNodeModulesAbove(dir);
    const stateFile = join(dir, "agent-state.json");

    const engine = new FakeEngine();
    engine.state.running = 2;
    engine.state.waiting = 1;
    engine.state.kvUsage = 0.25;
    await engine.start();
    let system: System | undefined;
    let agent: ReturnType<typeof spawn> | undefined;
    let stderr = "";
    try {
      // The lightest local router: the deploy bundles in one workerd process, no simulated fleet.
      system = await startSystem({ port: 0, fleetFile: null, runtime: "workerd-single" });
      const router = system;
      assert.deepEqual(await regionNodes(router), []);

      const args = ["--router", router.url, "--region", REGION, "--node-id", NODE_ID, "--url", engine.url];
      // Run as an executable (its #!/usr/bin/env node line finds OLD_NODE first on PATH), with
      // nothing from this repository's environment: no NODE_OPTIONS, NODE_PATH, or its Node 22.
      agent = spawn(bin, [...args, "--interval-ms", "250", "--state-file", stateFile], {
        cwd: dir,
        env: { ...env, WARMPATH_NODE_TOKEN: DEV_NODE_TOKEN },
        stdio: ["ignore", "pipe", "pipe"],
      });
      agent.stderr!.setEncoding("utf8").on("data", (s: string) => (stderr += s));
      const exited = once(agent, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
      const diagnostics = () => `agent (${nodeVersion}) stderr:\n${stderr}`;

      const node = await poll(
        `${NODE_ID} in ${REGION} with engine vllm`,
        async () => {
          if (agent!.exitCode !== null) assert.fail(`the agent exited (${agent!.exitCode})\n${diagnostics()}`);
          // The router lists the node as soon as it registers; the agent writes its state file and
          // logs only once the router's answer reaches it, a few ms later.
          if (!/registered with the router/.test(stderr)) return undefined;
          return (await regionNodes(router)).find((n) => n.id === NODE_ID && n.engine === "vllm" && n.load.report);
        },
        diagnostics,
      );
      assert.equal(node.url, engine.url);
      assert.deepEqual(node.models, ["llama-3.1-8b-instruct"]);
      assert.equal(node.kvCapacityTokens, 16_000, "vllm:cache_config_info: 16 x 1000");
      assert.deepEqual(
        { running: node.load.report!.running, waiting: node.load.report!.waiting, kvUsage: node.load.report!.kvUsage },
        { running: 2, waiting: 1, kvUsage: 0.25 },
      );
      assert.match(stderr, /registered with the router: node secret received, kept in the state file/);
      const state = JSON.parse(readFileSync(stateFile, "utf8")) as Record<string, string>;
      assert.deepEqual(
        { router: state.router, region: state.region, node_id: state.node_id },
        { router: router.url, region: REGION, node_id: NODE_ID },
      );
      assert.match(state.node_secret ?? "", /^[A-Za-z0-9_-]{43}$/);
      assert.equal(statSync(stateFile).mode & 0o777, 0o600);
      assert.ok(!stderr.includes(state.node_secret!) && !stderr.includes(DEV_NODE_TOKEN), "no credential in the log");

      agent.kill("SIGTERM");
      const [code, signal] = await exited;
      assert.deepEqual({ code, signal }, { code: 0, signal: null }, diagnostics());
      assert.match(stderr, /deregistered from the router \(shutdown\)/);
      assert.deepEqual(
        (await regionNodes(router)).map((n) => n.id),
        [],
        "the node left at once",
      );
      assert.equal(existsSync(stateFile), false, "the revoked secret is not kept");
    } finally {
      if (agent && agent.exitCode === null && agent.signalCode === null) agent.kill("SIGKILL");
      await system?.stop();
      await engine.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
