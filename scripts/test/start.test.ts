/**
 * `npm start` boots the whole system, answers a real streamed chat completion, and on Ctrl-C
 * (SIGINT) stops everything: no port left listening, no process left behind. ~10 s. With
 * `--verbose` on a machine offline, its output holds no stack trace and no warning (under wrangler
 * dev it held two `ENOTFOUND workers.cloudflare.com` traces and three "types might be out of date").
 */
import { once } from "node:events";
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { connect, createServer } from "node:net";
import { join } from "node:path";
import { DEV_API_KEY } from "../../src/config/dev-credentials.ts";
import { ROOT } from "../system.ts";
import { freePort } from "../ports.ts";

interface Proc {
  pid: number;
  ppid: number;
  /** Start time (clock ticks since boot): with the pid, identifies a process across pid reuse. */
  start: string;
  cmdline: string;
}

/** Every process on this machine, from /proc. */
function processes(): Proc[] {
  const out: Proc[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The command name (field 2) may contain spaces and parentheses: split after its last ')'.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "Z") continue; // a zombie holds no resources and waits for its parent
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8").replaceAll("\0", " ").trim();
      out.push({ pid: Number(entry), ppid: Number(fields[1]), start: fields[19]!, cmdline });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** The process and all its descendants. */
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

function alive(p: Proc): boolean {
  return processes().some((q) => q.pid === p.pid && q.start === p.start);
}

/** Whether something accepts TCP connections on 127.0.0.1:port. */
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

test("npm start boots, serves a streamed completion, and leaves nothing behind on SIGINT", { timeout: 90_000 }, async () => {
  const port = await freePort();
  // What `npm start` runs (node scripts/start.ts), with this test's Node 22; its own process group,
  // so that SIGINT to the group is what Ctrl-C in a terminal sends.
  // A state folder of its own (npm start's default, .warmpath/state, is the developer's).
  const stateDir = mkdtempSync(join(tmpdir(), "warmpath-start-test-"));
  const args = ["--port", String(port), "--time-factor", "10", "--state", stateDir, "--verbose"];
  const child = spawn(process.execPath, [join(ROOT, "scripts", "start.ts"), ...args], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  let spawned: Proc[] = [];
  try {
    const deadline = Date.now() + 60_000;
    while (!stdout.includes("warmpath is up")) {
      if (child.exitCode !== null) assert.fail(`npm start exited (${child.exitCode}):\n${stdout}\n${stderr}`);
      if (Date.now() > deadline) assert.fail(`npm start not up after 60 s:\n${stdout}\n${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 200)); // the rest of the banner
    const url = `http://127.0.0.1:${port}`;
    assert.ok(stdout.includes(`${url}/v1`), stdout);
    const nodePorts = [...stdout.matchAll(/^\s+(?:Nodes\s+)?[a-z0-9-]+\/[a-z0-9-]+ http:\/\/127\.0\.0\.1:(\d+)$/gm)].map((m) =>
      Number(m[1]),
    );
    assert.equal(nodePorts.length, 6, `six nodes in the banner:\n${stdout}`);

    // Everything npm start runs: itself, the workers' host (its own process group), and one
    // workerd running the edge and every region's worker: no wrangler dev.
    spawned = tree(child.pid!);
    const listed = spawned.map((p) => p.cmdline).join("\n");
    assert.equal(spawned.filter((p) => /\/workerd serve/.test(p.cmdline)).length, 1, listed);
    assert.ok(!spawned.some((p) => /wrangler(-dist\/cli\.js)? dev\b/.test(p.cmdline)), listed);
    // A clean start says nothing alarming (offline, as here: no fetch of Request.cf, no types check).
    const output = stdout + stderr;
    assert.doesNotMatch(output, /ENOTFOUND|types might be out of date|\n\s+at /, output);

    // The dashboard, from the host's asset worker (src/edge/api/local-assets.ts); a file it does
    // not have is the edge's 404 in OpenAI's shape, as deployed.
    const page = await fetch(`${url}/dashboard/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-type") ?? "", /text\/html/);
    assert.match(await page.text(), /dashboard\.js/);
    const bare = await fetch(`${url}/dashboard`, { redirect: "manual" });
    assert.equal(bare.status, 307);
    assert.equal(bare.headers.get("location"), "/dashboard/");
    const missing = await fetch(`${url}/dashboard/missing.js`);
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as { error: { code: string } }).error.code, "route_not_found");

    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${DEV_API_KEY}`, "content-type": "application/json", "x-session-id": "start-test" },
      body: JSON.stringify({
        model: "llama-3.1-8b-instruct",
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 8,
        messages: [
          { role: "system", content: "You are a concise assistant. ".repeat(40) },
          { role: "user", content: "Hello!" },
        ],
      }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
    assert.equal(res.headers.get("x-warmpath-region"), "us-east");
    assert.match(res.headers.get("x-warmpath-node") ?? "", /^use1-[abc]$/);
    assert.ok(res.headers.get("x-warmpath-decision"));
    assert.match(res.headers.get("x-warmpath-prefix-match") ?? "", /^\d+\/\d+$/);
    assert.ok(res.headers.get("x-request-id"));
    const text = await res.text();
    const events = text
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .map((l) => l.slice(6));
    assert.equal(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as { choices: { delta?: { content?: string } }[]; usage?: unknown });
    const content = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    assert.ok(content.trim().length > 0, "an answer");
    const usage = chunks.at(-1)!.usage as {
      prompt_tokens: number;
      completion_tokens: number;
      prompt_tokens_details: { cached_tokens: number };
    };
    assert.ok(usage.prompt_tokens > 250);
    assert.equal(usage.completion_tokens, 8);
    assert.equal(typeof usage.prompt_tokens_details.cached_tokens, "number");

    // Ctrl-C.
    process.kill(-child.pid!, "SIGINT");
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), 20_000)));
    const end = await Promise.race([exited, timeout]);
    clearTimeout(timer);
    assert.notEqual(end, "timeout", `npm start did not exit within 20 s of SIGINT:\n${stdout}\n${stderr}`);
    assert.deepEqual(end, { code: 0, signal: null });
    assert.match(stdout, /warmpath: stopped\./);

    // Nothing left: no process, no listening port.
    await new Promise((r) => setTimeout(r, 300));
    const left = spawned.filter(alive);
    assert.deepEqual(
      left.map((p) => p.cmdline),
      [],
    );
    const mentioning = processes().filter((p) => p.cmdline.includes(`127.0.0.1:${port}`) || p.cmdline.includes(`--port ${port}`));
    assert.deepEqual(
      mentioning.map((p) => p.cmdline),
      [],
    );
    for (const p of [port, ...nodePorts]) assert.equal(await listening(p), false, `port ${p} still accepts connections`);
  } finally {
    // On failure, end what this test started (its own process group, and wrangler's).
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

test("npm start on a port in use says so in one line and exits 1, without a stack trace", { timeout: 30_000 }, async () => {
  const port = await freePort();
  const holder = createServer().listen(port, "127.0.0.1");
  await once(holder, "listening"); // rejects if the port was taken meanwhile, rather than throwing later
  try {
    const child = spawn(process.execPath, [join(ROOT, "scripts", "start.ts"), "--port", String(port)], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
    assert.equal(code, 1);
    assert.match(stderr, new RegExp(`port ${port} is in use`));
    assert.doesNotMatch(stderr, /\n\s+at /, "no stack trace");
  } finally {
    holder.close();
  }
});
