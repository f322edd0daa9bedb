/**
 * `npm start`'s state lasts (scripts/system.ts `stateDir`, what npm start passes): the usage
 * ledger, the spent budgets and the node table are there after a stop and a start on the same
 * state folder, and `fresh` empties it. And npm start's workers end when npm start is killed with
 * SIGKILL (scripts/watchdog.ts). And a reload (a changed wrangler.toml) starts the workers again on
 * the same stores. ~60 s: three boots of the system as npm start runs it (runtime `workerd-single`),
 * one of npm start.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parse } from "smol-toml";
import { DEV_API_KEY_2, DEV_NODE_TOKEN } from "../../src/config/dev-credentials.ts";
import type { UsageRow } from "../../src/contracts/usage.ts";
import { freePort } from "../ports.ts";
import { ROOT, startSystem, type System } from "../system.ts";

const BUDGET = 1_000;
/** Past this close to UTC midnight the test waits for the new day: a day's budget would reset midway. */
const RUN_MS = 180_000;
const DAY_MS = 86_400_000;
const utcDay = (at: number) => new Date(at).toISOString().slice(0, 10);

/**
 * wrangler.toml's development configuration, with tenant dev-2 on a 1,000-token daily budget, and
 * nodes kept for 5 minutes without a report (a node registered in one run is still there in the next).
 */
function budgetConfig() {
  const toml = parse(readFileSync(join(ROOT, "wrangler.toml"), "utf8")) as { vars: { WARMPATH_CONFIG: Record<string, unknown> } };
  const config = structuredClone(toml.vars.WARMPATH_CONFIG) as {
    tenants: Array<Record<string, unknown>>;
    regions: Array<Record<string, unknown>>;
    usage?: unknown;
  };
  config.tenants.find((t) => t.id === "dev-2")!.budget = { tokens_per_day: BUDGET };
  for (const r of config.regions) r.node_silence_ms = 300_000;
  config.usage = { flush_interval_ms: 250 };
  return config;
}

/** Registers a node the fleet does not know (the fleet deregisters its own when it stops, as agents do). */
async function registerStray(system: System): Promise<void> {
  const res = await fetch(`${system.url}/v1/nodes/report`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEV_NODE_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({
      node_id: "stray-1",
      region: "eu-west",
      url: "http://127.0.0.1:9",
      models: ["llama-3.1-8b-instruct"],
      kv_capacity_tokens: 10_000,
      running: 0,
      waiting: 0,
      kv_usage: 0,
    }),
  });
  assert.equal(res.status, 200, await res.text());
}

async function ask(system: System) {
  const res = await fetch(`${system.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${DEV_API_KEY_2}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "llama-3.1-8b-instruct",
      max_tokens: 5,
      messages: [{ role: "user", content: `state ${Math.random()} ` + "spend it. ".repeat(40) }],
    }),
  });
  const body = (await res.json()) as { error?: { code: string } };
  return { status: res.status, code: body.error?.code };
}

async function ledger(system: System, day: string): Promise<number> {
  const res = await fetch(`${system.url}/admin/usage?tenant=dev-2&from=${day}&to=${day}`);
  assert.equal(res.status, 200);
  const rows = ((await res.json()) as { data: UsageRow[] }).data;
  return rows.reduce((n, r) => n + r.prompt_tokens + r.completion_tokens + r.estimated_prompt_tokens + r.estimated_completion_tokens, 0);
}

async function nodeIds(system: System): Promise<string[]> {
  const body = (await (await fetch(`${system.url}/admin/state`)).json()) as { regions: Array<{ nodes: Array<{ id: string }> }> };
  return body.regions.flatMap((r) => r.nodes.map((n) => n.id)).sort();
}

test(
  "the usage ledger, spent budgets and node table survive a stop and start on the state folder; fresh empties it",
  { timeout: 2 * RUN_MS },
  async () => {
    const toMidnight = DAY_MS - (Date.now() % DAY_MS);
    if (toMidnight < RUN_MS) await sleep(toMidnight + 1_000);
    const day = utcDay(Date.now());
    const stateDir = mkdtempSync(join(tmpdir(), "warmpath-state-test-"));
    const config = budgetConfig();
    try {
      let spent: number;
      // As npm start runs it: every worker in one workerd process (scripts/start.ts).
      const runtime = "workerd-single";
      let system = await startSystem({ port: 0, runtime, timeFactorScale: 20, config, stateDir });
      try {
        let refused: { status: number; code: string | undefined } | undefined;
        for (let i = 0; i < 40 && !refused; i++) {
          const r = await ask(system);
          if (r.status !== 200) refused = r;
        }
        assert.deepEqual(refused, { status: 429, code: "insufficient_quota" }, "refused once the budget was spent");
        // The ledger settles within a few flush intervals.
        spent = 0;
        for (let i = 0; i < 40 && spent <= BUDGET; i++, await sleep(250)) spent = await ledger(system, day);
        assert.ok(spent > BUDGET, `the ledger holds the spend (${spent})`);
        await registerStray(system);
        assert.equal((await nodeIds(system)).length, 7);
      } finally {
        await system.stop();
      }

      // Started again on the same state, with no fleet: what the first run left is there.
      system = await startSystem({ port: 0, runtime, fleetFile: null, config, stateDir });
      try {
        // The fleet's six deregistered when it stopped; the stray one never did.
        assert.deepEqual(await nodeIds(system), ["stray-1"], "the node table");
        assert.equal(await ledger(system, day), spent, "the usage ledger");
        assert.deepEqual(await ask(system), { status: 429, code: "insufficient_quota" }, "the spent budget");
        // A reload (what a changed wrangler.toml sets off) runs the workers again on the same stores.
        const before = system.router.pid;
        const { upAt } = await system.reload();
        assert.notEqual(system.router.pid, before, "a new workers process");
        assert.ok(upAt <= Date.now());
        assert.deepEqual(await nodeIds(system), ["stray-1"], "the node table after a reload");
        assert.equal(await ledger(system, day), spent, "the usage ledger after a reload");
      } finally {
        await system.stop();
      }

      system = await startSystem({ port: 0, runtime, fleetFile: null, config, stateDir, fresh: true });
      try {
        assert.deepEqual(await nodeIds(system), [], "fresh: no node");
        assert.equal(await ledger(system, day), 0, "fresh: no usage");
      } finally {
        await system.stop();
      }
      assert.ok(existsSync(stateDir), "stop leaves the state folder");
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  },
);

interface Proc {
  pid: number;
  ppid: number;
  start: string;
  cmdline: string;
}

function processes(): Proc[] {
  const out: Proc[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "Z") continue;
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ").trim();
      out.push({ pid: Number(entry), ppid: Number(fields[1]), start: fields[19]!, cmdline });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

function tree(root: number): Proc[] {
  const all = processes();
  const found: Proc[] = [];
  const queue = [root];
  while (queue.length) {
    const pid = queue.shift()!;
    for (const p of all) {
      if (p.pid === pid) found.push(p);
      if (p.ppid === pid) queue.push(p.pid);
    }
  }
  return found;
}

const alive = (p: Proc) => processes().some((q) => q.pid === p.pid && q.start === p.start);

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

test("npm start's workers end when npm start is killed with SIGKILL; --fresh empties --state", { timeout: 120_000 }, async () => {
  const port = await freePort();
  const stateDir = mkdtempSync(join(tmpdir(), "warmpath-state-kill-"));
  const marker = join(stateDir, "left-over", "marker");
  mkdirSync(join(stateDir, "left-over"));
  writeFileSync(marker, "from an earlier run");
  const child = spawn(process.execPath, [join(ROOT, "scripts", "start.ts"), "--port", String(port), "--state", stateDir, "--fresh"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  let spawned: Proc[] = [];
  try {
    const deadline = Date.now() + 60_000;
    while (!stdout.includes("warmpath is up")) {
      if (child.exitCode !== null) assert.fail(`npm start exited (${child.exitCode}):\n${stdout}\n${stderr}`);
      if (Date.now() > deadline) assert.fail(`npm start not up after 60 s:\n${stdout}\n${stderr}`);
      await sleep(100);
    }
    assert.equal(existsSync(marker), false, "--fresh emptied the state folder");
    assert.match(stdout, /State\s+\S+/);
    spawned = tree(child.pid!).filter((p) => p.pid !== child.pid);
    assert.ok(
      spawned.some((p) => p.cmdline.includes("workerd")),
      spawned.map((p) => p.cmdline).join("\n"),
    );
    assert.equal(await listening(port), true);

    // SIGKILL: npm start can clean nothing up; its watchdogs end the workers.
    child.kill("SIGKILL");
    const end = Date.now() + 15_000;
    while (spawned.some(alive) && Date.now() < end) await sleep(100);
    assert.deepEqual(
      spawned.filter(alive).map((p) => p.cmdline),
      [],
      "every worker process ended",
    );
    assert.equal(await listening(port), false, `port ${port} still accepts connections`);
  } finally {
    for (const p of spawned.filter(alive)) {
      try {
        process.kill(p.pid, "SIGKILL");
      } catch {
        // gone
      }
    }
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    rmSync(stateDir, { recursive: true, force: true });
  }
});
