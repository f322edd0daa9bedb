/**
 * warmpath-agent's whole loop (agent/agent.ts) against a fake vLLM and a fake router,
 * both real HTTP servers on loopback. Waits are event-driven (each fake request, each agent
 * event); the only timing assertion is a lower bound (backoff gaps), which a slow machine only
 * makes larger.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nodeReportSchema } from "../../src/contracts/node.ts";
import { startAgent, type Agent, type AgentEvent, type AgentOptions } from "../agent.ts";
import { NodeCredentials } from "../credentials.ts";
import { formatEvent } from "../log.ts";
import { FakeEngine, FakeRouter, testAgentOptions, waitFor } from "./fixtures/fakes.ts";

interface Harness {
  engine: FakeEngine;
  router: FakeRouter;
  agent: Agent;
  events: AgentEvent[];
  bus: EventEmitter;
  count(kind: AgentEvent["event"]): number;
  close(): Promise<void>;
}

async function harness(options: Partial<AgentOptions> = {}): Promise<Harness> {
  const engine = new FakeEngine();
  const router = new FakeRouter();
  await engine.start();
  await router.start();
  const events: AgentEvent[] = [];
  const bus = new EventEmitter();
  const agent = startAgent(
    testAgentOptions(engine.url, router.url, {
      log: (e) => {
        events.push(e);
        bus.emit("event");
      },
      ...options,
    }),
  );
  // A report or an event may settle a wait.
  router.on("request", () => bus.emit("event"));
  engine.on("request", () => bus.emit("event"));
  return {
    engine,
    router,
    agent,
    events,
    bus,
    count: (kind) => events.filter((e) => e.event === kind).length,
    async close() {
      await agent.stop();
      await engine.stop();
      await router.stop();
    },
  };
}

/** Waits until the router has accepted a report that satisfies `check`; returns it. */
function reportWhere(h: Harness, what: string, check: (r: Record<string, unknown>) => boolean, from = 0) {
  return waitFor(h.bus, "event", () => h.router.reports().slice(from).find(check), what);
}

test("registers, reports load changes, and takes a counter reset for a restart (new boot id, no deregistration)", async () => {
  const h = await harness();
  try {
    const first = await reportWhere(h, "a first report", () => true);
    assert.deepEqual(nodeReportSchema.parse(first), first, "the report is the router's contract, field for field");
    assert.equal(h.router.requests[0]?.authorization, "Bearer node-token");
    assert.deepEqual(
      { ...first, boot_id: "" },
      {
        node_id: "gpu-1",
        region: "us-east",
        url: "http://10.0.0.5:8000",
        models: ["llama-3.1-8b-instruct"],
        kv_capacity_tokens: 16000,
        running: 0,
        waiting: 0,
        kv_usage: 0,
        boot_id: "",
        engine: "vllm",
      },
    );
    const boot = first.boot_id;

    Object.assign(h.engine.state, {
      running: 5,
      waiting: 2,
      kvUsage: 0.5,
      promptTokens: 5000,
      models: ["llama-3.1-8b-instruct", "sql-lora"],
    });
    const busy = await reportWhere(h, "the new load", (r) => r.running === 5);
    assert.deepEqual([busy.waiting, busy.kv_usage, busy.models, busy.boot_id], [2, 0.5, ["llama-3.1-8b-instruct", "sql-lora"], boot]);

    // The engine restarted between two scrapes: same start time exposed, but its counters reset.
    const before = h.router.reports().length;
    h.engine.state.promptTokens = 12;
    const restarted = await reportWhere(h, "a report with a new boot id", (r) => r.boot_id !== boot, before);
    assert.equal(typeof restarted.boot_id, "string");
    assert.equal(h.router.deletes().length, 0, "a restart seen in the counters needs no deregistration");
    assert.match(
      h.events
        .filter((e) => e.event === "boot")
        .map((e) => (e as { reason: string }).reason)
        .join("|"),
      /^agent started\|vllm:prompt_tokens_total went backwards \(5000 -> 12\)$/,
    );
    // Later reports keep the new id.
    const n = h.router.reports().length;
    const later = await reportWhere(h, "a later report", () => true, n);
    assert.equal(later.boot_id, restarted.boot_id);
    assert.equal(h.count("engine_failing"), 0);
  } finally {
    await h.close();
  }
});

test("engine gone (connection refused): deregistered at once, one log line; back: registered with a new boot id", async () => {
  const h = await harness();
  try {
    const first = await reportWhere(h, "a first report", () => true);
    await h.engine.stop();
    const secret = h.router.secretOf("gpu-1");
    assert.ok(secret, "the first report registered the node and got its secret");
    const del = await waitFor(h.bus, "event", () => h.router.deletes()[0], "the deregistration");
    assert.equal(del.path, "/v1/nodes/us-east/gpu-1");
    assert.equal(del.authorization, `Bearer ${secret}`, "the node leaves with its own secret");
    await waitFor(h.bus, "event", () => (h.count("deregistered") === 1 ? true : undefined), "the deregistered event");
    const reportsAtDelete = h.router.reports().length;

    // The engine comes back on the same port, its counters from zero.
    h.engine.state.promptTokens = 0;
    await h.engine.start();
    const back = await reportWhere(h, "a report after the outage", () => true, reportsAtDelete);
    assert.notEqual(back.boot_id, first.boot_id, "a node that came back after an outage has a new boot id");
    const registration = h.router.requests.filter((r) => r.method === "POST" && r.status === 200)[reportsAtDelete];
    assert.equal(registration?.authorization, "Bearer node-token", "deregistered, it registers again with the region token");
    assert.equal(h.count("engine_failing"), 1, "one line when the engine started failing, not one per scrape");
    assert.equal(h.count("engine_down"), 1);
    assert.equal(h.count("engine_ok"), 2, "one when first seen, one when it recovered");
    assert.equal(h.router.deletes().length, 1);
    const failing = h.events.find((e) => e.event === "engine_failing") as { error: string };
    assert.match(failing.error, /connection refused/);
  } finally {
    await h.close();
  }
});

test("engine answering errors: deregistered only after --down-after failed scrapes in a row", async () => {
  const h = await harness({ downAfter: 3 });
  try {
    await reportWhere(h, "a first report", () => true);
    const scrapesBefore = h.engine.scrapes;
    h.engine.state.failWith = 503;
    await waitFor(h.bus, "event", () => h.router.deletes()[0], "the deregistration");
    assert.ok(h.engine.scrapes - scrapesBefore >= 3, `deregistered after ${h.engine.scrapes - scrapesBefore} failed scrapes`);
    const failing = h.events.find((e) => e.event === "engine_failing") as { error: string };
    assert.match(failing.error, /HTTP 503: engine unavailable/);
    assert.equal(h.count("engine_failing"), 1);
  } finally {
    await h.close();
  }
});

test("router failing: backs off, logs once, never crashes; recovery logs once (HTTP errors, then a refused connection)", async () => {
  const h = await harness({ random: () => 1, intervalMs: 50, maxBackoffMs: 400 });
  try {
    await reportWhere(h, "a first report", () => true);
    const failedPosts = () => h.router.requests.filter((r) => r.method === "POST" && r.status === 503);
    const times: number[] = [];
    h.router.on("request", () => {
      if (h.router.status === 503) times.push(performance.now());
    });
    h.router.status = 503;
    await waitFor(h.bus, "event", () => (failedPosts().length >= 5 ? true : undefined), "five failed reports");
    assert.equal(h.count("router_failing"), 1, "one line when the router started failing, not one per attempt");
    const failing = h.events.find((e) => e.event === "router_failing") as { error: string };
    assert.match(failing.error, /HTTP 503: router unavailable/);
    // random = 1: the waits after failures 1..4 are 50, 100, 200, 400 ms (then capped). A busy
    // machine only lengthens them, so lower bounds (less 20 ms of timer slack) are safe.
    const gaps = times.slice(1, 5).map((t, i) => t - times[i]!);
    [50, 100, 200, 400].forEach((min, i) => assert.ok(gaps[i]! >= min - 20, `gap ${i + 1} was ${gaps[i]} ms, backoff ${min} ms`));

    h.router.status = 200;
    const ok = h.router.reports().length;
    await reportWhere(h, "an accepted report after recovery", () => true, ok);
    await waitFor(h.bus, "event", () => (h.count("router_ok") === 1 ? true : undefined), "the router_ok event");

    // Now unreachable: connection refused.
    await h.router.stop();
    await waitFor(h.bus, "event", () => (h.count("router_failing") === 2 ? true : undefined), "router failing again");
    await h.router.start(); // same port
    const again = h.router.requests.length;
    await waitFor(
      h.bus,
      "event",
      () => (h.router.requests.slice(again).some((r) => r.method === "POST" && r.status === 200) ? true : undefined),
      "a report after the router restarted",
    );
    await waitFor(h.bus, "event", () => (h.count("router_ok") === 2 ? true : undefined), "the second router_ok");
    assert.equal(h.count("router_failing"), 2);
    assert.equal(h.count("engine_failing"), 0, "a router failure is never blamed on the engine");
  } finally {
    await h.close();
  }
});

test("stop(): deregisters the node and ends the loop", async () => {
  const h = await harness();
  try {
    await reportWhere(h, "a first report", () => true);
    await h.agent.stop();
    await h.agent.done;
    assert.equal(h.router.deletes().length, 1);
    assert.equal(h.count("deregistered"), 1);
    const n = h.router.requests.length;
    h.engine.state.running = 9; // nothing reports it any more
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.equal(h.router.requests.length, n);
  } finally {
    await h.close();
  }
});

test("no KV capacity from the engine and none given: a fatal error naming the flag; --kv-capacity-tokens overrides", async () => {
  const h = await harness();
  try {
    await h.agent.stop();
    h.engine.state.cacheConfig = false;
    const events: AgentEvent[] = [];
    const bare = startAgent(
      testAgentOptions(h.engine.url, h.router.url, {
        nodeId: "gpu-2",
        nodeUrl: h.engine.url,
        engine: "vllm",
        models: ["m"],
        token: "t",
        log: (e) => events.push(e),
      }),
    );
    await assert.rejects(bare.done, /cannot read the KV cache capacity from vllm .*pass --kv-capacity-tokens/);
    assert.equal(events.filter((e) => e.event === "fatal").length, 1);
    assert.ok(!h.router.reports().some((r) => r.node_id === "gpu-2"), "nothing reported without a capacity");

    const given = startAgent(
      testAgentOptions(h.engine.url, h.router.url, {
        nodeId: "gpu-3",
        nodeUrl: h.engine.url,
        models: ["m"],
        kvCapacityTokens: 70000,
        token: "t",
      }),
    );
    const r = await waitFor(h.bus, "event", () => h.router.reports().find((x) => x.node_id === "gpu-3"), "gpu-3's report");
    assert.equal(r.kv_capacity_tokens, 70000);
    assert.deepEqual(r.models, ["m"]);
    await given.stop();
  } finally {
    await h.close();
  }
});

test("identity: registers with the region token, then every report and the deregistration carry the node secret", async () => {
  const h = await harness();
  try {
    await reportWhere(h, "a first report", () => true);
    assert.equal(h.router.requests[0]?.authorization, "Bearer node-token");
    const secret = h.router.secretOf("gpu-1")!;
    assert.match(secret, /^[A-Za-z0-9_-]{43}$/);
    await waitFor(h.bus, "event", () => (h.router.reports().length >= 4 ? true : undefined), "more reports");
    const later = h.router.requests.filter((r) => r.method === "POST").slice(1);
    assert.ok(
      later.every((r) => r.authorization === `Bearer ${secret}`),
      "later reports carry the node secret, not the region token",
    );
    assert.equal(h.count("registered"), 1, "one registration");
    await h.agent.stop();
    assert.equal(h.router.deletes()[0]?.authorization, `Bearer ${secret}`);
    assert.equal(h.count("deregistered"), 1);
    for (const e of h.events) assert.ok(!JSON.stringify(e).includes(secret), "the secret is never in an event (log line)");
  } finally {
    await h.close();
  }
});

test("identity: a secret the router no longer knows (the node expired): registered again at once", async () => {
  const h = await harness();
  try {
    await reportWhere(h, "a first report", () => true);
    const first = h.router.secretOf("gpu-1")!;
    h.router.forgetSecrets();
    const n = h.router.requests.length;
    await waitFor(h.bus, "event", () => h.router.secretOf("gpu-1"), "a new registration");
    const after = h.router.requests.slice(n);
    assert.equal(after[0]?.status, 401, "the forgotten secret is refused");
    assert.equal(after[1]?.authorization, "Bearer node-token", "and the same tick registers again with the region token");
    assert.notEqual(h.router.secretOf("gpu-1"), first);
    assert.equal(h.count("identity_refused"), 0);
    assert.equal(h.count("router_failing"), 0, "not a router failure");
  } finally {
    await h.close();
  }
});

test("identity refused (403 node_identity_mismatch): one log line, registration tried again after the router's Retry-After", async () => {
  const h = await harness({ random: () => 0, maxBackoffMs: 30_000 });
  try {
    h.router.refuseRegistrations = { retryAfterSeconds: 1 };
    const refused = () => h.router.requests.filter((r) => r.status === 403);
    await waitFor(h.bus, "event", () => (refused().length >= 1 ? true : undefined), "a refused registration");
    const at = performance.now();
    await waitFor(h.bus, "event", () => (refused().length >= 2 ? true : undefined), "a second attempt");
    assert.ok(performance.now() - at >= 950, `retried after ${Math.round(performance.now() - at)} ms, Retry-After 1 s`);
    assert.equal(h.count("identity_refused"), 1, "one line, not one per attempt");
    const e = h.events.find((x) => x.event === "identity_refused") as { error: string; retry_in_ms: number };
    assert.match(e.error, /HTTP 403: node_identity_mismatch/);
    assert.equal(e.retry_in_ms, 1000);
    assert.equal(h.count("router_failing"), 0);
    // The holder's entry expired: the next attempt registers.
    h.router.refuseRegistrations = undefined;
    await waitFor(h.bus, "event", () => h.router.secretOf("gpu-1"), "the registration");
    await waitFor(h.bus, "event", () => (h.count("router_ok") === 1 ? true : undefined), "router ok");
    await h.agent.stop();
    assert.equal(h.router.deletes().length, 1);
  } finally {
    await h.close();
  }
});

test("identity refused with Retry-After: 3000000 (past Node's longest timer): waited --max-backoff-ms, not 1 ms", async () => {
  // 3e9 ms given to setTimeout would fire after 1 ms (TimeoutOverflowWarning): a retry every millisecond.
  const h = await harness({ random: () => 0, maxBackoffMs: 1500 });
  try {
    h.router.refuseRegistrations = { retryAfterSeconds: 3_000_000 };
    const refused = () => h.router.requests.filter((r) => r.status === 403);
    await waitFor(h.bus, "event", () => (refused().length >= 1 ? true : undefined), "a refused registration");
    const at = performance.now();
    await waitFor(h.bus, "event", () => (refused().length >= 2 ? true : undefined), "a second attempt");
    const gap = performance.now() - at;
    assert.ok(gap >= 1000, `the next attempt came after ${Math.round(gap)} ms`);
    const e = h.events.find((x) => x.event === "identity_refused") as { retry_in_ms: number };
    assert.equal(e.retry_in_ms, 1500, "the router's Retry-After, capped at --max-backoff-ms");
  } finally {
    await h.close();
  }
});

test("stop() aborts a report in flight: with a router that never answers, it ends after the 2 s deregistration, not --router-timeout-ms", async () => {
  const h = await harness({ routerTimeoutMs: 60_000 });
  try {
    await waitFor(h.bus, "event", () => (h.count("registered") === 1 ? true : undefined), "the registration");
    h.router.hang = true;
    const n = h.router.requests.length;
    await waitFor(
      h.bus,
      "event",
      () => (h.router.requests.slice(n).some((r) => r.method === "POST") ? true : undefined),
      "a report in flight",
    );
    const start = performance.now();
    await h.agent.stop();
    const took = performance.now() - start;
    // The report ends at once; the DELETE (also unanswered) has DEREGISTER_TIMEOUT_MS = 2000.
    assert.ok(took >= 1900 && took < 6000, `stop() took ${Math.round(took)} ms`);
    assert.equal(h.router.requests.slice(n).filter((r) => r.method === "DELETE").length, 1, "the deregistration was tried");
    assert.equal(h.count("router_failing"), 1, "the unanswered DELETE");
  } finally {
    await h.close();
  }
});

test("stop() during a registration to a router that never answers: the registration has the 2 s grace, then stop() ends", async () => {
  const h = await harness({ routerTimeoutMs: 60_000 });
  try {
    h.router.hang = true; // before the first report: it is a registration (no secret yet)
    await waitFor(
      h.bus,
      "event",
      () => (h.router.requests.some((r) => r.method === "POST") ? true : undefined),
      "a registration in flight",
    );
    const start = performance.now();
    await h.agent.stop();
    const took = performance.now() - start;
    assert.ok(took >= 1900 && took < 6000, `stop() took ${Math.round(took)} ms`);
    assert.equal(h.router.deletes().length, 0, "no secret: nothing to deregister with");
    assert.equal(h.count("not_deregistered"), 1);
  } finally {
    await h.close();
  }
});

test("an engine URL with a password: the password is in no log line", async () => {
  const h = await harness();
  const events: AgentEvent[] = [];
  let agent: Agent | undefined;
  try {
    await h.agent.stop();
    const withPassword = h.engine.url.replace("http://", "http://scraper:s3cret-pw@");
    agent = startAgent(
      testAgentOptions(withPassword, h.router.url, {
        nodeId: "gpu-2",
        downAfter: 100,
        log: (e) => {
          events.push(e);
          h.bus.emit("event");
        },
      }),
    );
    const count = (kind: AgentEvent["event"]) => events.filter((e) => e.event === kind).length;
    await waitFor(h.bus, "event", () => (count("engine_ok") === 1 ? true : undefined), "engine ok");
    h.engine.state.failWith = 503;
    await waitFor(h.bus, "event", () => (count("engine_failing") === 1 ? true : undefined), "engine failing");
    const ok = events.find((e) => e.event === "engine_ok") as { url: string };
    assert.equal(ok.url, `${h.engine.url}/metrics`, "the URL without its user and password");
    const failing = events.find((e) => e.event === "engine_failing") as { error: string };
    assert.ok(failing.error.startsWith(`GET ${h.engine.url}/metrics: HTTP 503`), failing.error);
    for (const e of events) assert.ok(!/s3cret-pw|scraper/.test(formatEvent(e)), formatEvent(e));
  } finally {
    await agent?.stop();
    await h.close();
  }
});

test("identity refused with nothing registered: stop() sends no DELETE (it would be refused)", async () => {
  const h = await harness();
  try {
    h.router.refuseRegistrations = { retryAfterSeconds: 30 };
    await waitFor(h.bus, "event", () => (h.count("identity_refused") === 1 ? true : undefined), "the refusal");
    await h.agent.stop();
    assert.equal(h.router.deletes().length, 0);
  } finally {
    await h.close();
  }
});

test("--state-file: the node secret survives a restart of the agent (file mode 0600), and is dropped on deregistration", async () => {
  const dir = mkdtempSync(join(tmpdir(), "warmpath-agent-"));
  const stateFile = join(dir, "gpu-1.json");
  const h = await harness({ stateFile });
  try {
    await waitFor(h.bus, "event", () => (h.count("registered") === 1 ? true : undefined), "the registration");
    const secret = h.router.secretOf("gpu-1")!;
    assert.equal(statSync(stateFile).mode & 0o777, 0o600);
    assert.equal(JSON.parse(readFileSync(stateFile, "utf8")).node_secret, secret);
    // A crash (no deregistration): a new agent process with the same state file.
    const events: AgentEvent[] = [];
    const n = h.router.requests.length;
    const second = startAgent(testAgentOptions(h.engine.url, h.router.url, { stateFile, log: (e) => events.push(e) }));
    await waitFor(
      h.bus,
      "event",
      () => h.router.requests.slice(n).find((r) => r.method === "POST" && r.status === 200),
      "the restarted agent's report",
    );
    assert.equal(h.router.requests.slice(n).find((r) => r.method === "POST")?.authorization, `Bearer ${secret}`);
    assert.equal(events.filter((e) => e.event === "registered").length, 0, "no new registration");
    await second.stop();
    assert.throws(() => statSync(stateFile), /ENOENT/, "deregistered: the secret is gone with the node");
  } finally {
    await h.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("--state-file: the temporary file's predictable name cannot redirect the secret (a planted symlink or file is replaced)", () => {
  const dir = mkdtempSync(join(tmpdir(), "warmpath-agent-"));
  const stateFile = join(dir, "state.json");
  const tmp = `${stateFile}.${process.pid}.tmp`;
  const victim = join(dir, "victim");
  const secret = "A".repeat(43);
  try {
    writeFileSync(victim, "untouched\n", { mode: 0o644 });
    symlinkSync(victim, tmp);
    const identity = { routerUrl: "http://r.example", region: "us-east", nodeId: "gpu-1" };
    const credentials = new NodeCredentials("node-token", { stateFile, identity });
    credentials.remember(secret);
    assert.equal(readFileSync(victim, "utf8"), "untouched\n", "the symlink's target was not written");
    assert.equal(JSON.parse(readFileSync(stateFile, "utf8")).node_secret, secret);
    assert.equal(lstatSync(stateFile).isFile(), true, "the state file is a file of its own, not the symlink");
    assert.equal(statSync(stateFile).mode & 0o777, 0o600);
    assert.throws(() => lstatSync(tmp), /ENOENT/);
    // A leftover regular file (world-readable) at the temporary name: replaced, mode 0600.
    writeFileSync(tmp, "old\n", { mode: 0o644 });
    credentials.remember("B".repeat(43));
    assert.equal(JSON.parse(readFileSync(stateFile, "utf8")).node_secret, "B".repeat(43));
    assert.equal(statSync(stateFile).mode & 0o777, 0o600);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
