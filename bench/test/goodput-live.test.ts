/**
 * bench:goodput-live (bench/goodput-live/): the naive router's affinity, the client's reading of
 * every kind of answer, and a --quick run end to end through the real workers and the naive
 * router, in which no request may be lost and every error must be in OpenAI's shape. Nothing here
 * asserts a timing or a goodput: those depend on the machine.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { pickNode, promptText, startNaiveRouter } from "../goodput-live/naive-router.ts";
import { replay, type Outcome } from "../goodput-live/client.ts";
import { DEFAULT_TRACE, loadSlice } from "../goodput-live/workload.ts";
import { summarise, total } from "../goodput-live/score.ts";
import { byStatusAndCode, clientRefusals, counted, edgeRefusals, refusalMismatches } from "../goodput-live/refusals.ts";
import { renderReading } from "../goodput-live/reading.ts";
import type { Report, RunResult } from "../goodput-live/run.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
const RUN = join(HERE, "..", "goodput-live", "run.ts");

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

describe("naive router", () => {
  const nodes = ["gpu-0", "gpu-1", "gpu-2", "gpu-3"].map((id) => ({ id, url: "" }));

  test("the same key always goes to the same node, and keys spread over every node", () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 4000; i++) {
      const key = `conversation ${i}`;
      const n = pickNode(key, nodes);
      assert.equal(pickNode(key, nodes), n);
      counts.set(n.id, (counts.get(n.id) ?? 0) + 1);
    }
    assert.equal(counts.size, 4);
    for (const [id, c] of counts) assert.ok(c > 800 && c < 1200, `${id} got ${c} of 4000 keys`);
  });

  test("rendezvous hashing: removing a node moves only its own keys", () => {
    const fewer = nodes.filter((n) => n.id !== "gpu-2");
    for (let i = 0; i < 1000; i++) {
      const before = pickNode(`k${i}`, nodes);
      if (before.id !== "gpu-2") assert.equal(pickNode(`k${i}`, fewer).id, before.id);
    }
  });

  test("the key is the messages' contents in order (text parts joined), or the completion prompt", () => {
    const body = {
      messages: [
        { role: "system", content: "abc" },
        { role: "user", content: [{ type: "text", text: "def" }, { type: "image_url" }, { type: "text", text: "g" }] },
      ],
    };
    assert.equal(promptText(body), "abcdefg");
    assert.equal(promptText({ prompt: "xyz" }), "xyz");
    assert.equal(promptText({ prompt: ["first", "second"] }), "first");
    assert.equal(promptText(null), "");
  });

  test("forwards by the prompt's first characters, streams the node's answer, and answers 502 in OpenAI's shape for a dead node", async () => {
    const seen: Array<{ node: string; body: string }> = [];
    const mk = (id: string) =>
      createServer((req, res) => {
        let body = "";
        req.on("data", (c) => (body += c));
        req.on("end", () => {
          seen.push({ node: id, body });
          res.writeHead(200, { "content-type": "text/event-stream" });
          res.write(`data: {"node":"${id}"}\n\n`);
          res.end("data: [DONE]\n\n");
        });
      });
    const servers = [mk("a"), mk("b"), mk("c")];
    const urls = await Promise.all(servers.map(listen));
    const dead = { id: "dead", url: "http://127.0.0.1:9" };
    const live = ["a", "b", "c"].map((id, i) => ({ id, url: urls[i]! }));
    const router = await startNaiveRouter([...live, dead], { prefixChars: 8 });
    try {
      const post = (content: string) =>
        fetch(`${router.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ messages: [{ role: "user", content }] }),
        });
      // Find prefixes the router sends to live nodes, and one it sends to the dead one.
      const prefixes = Array.from({ length: 40 }, (_, i) => `prefix${String(i).padStart(2, "0")}`);
      const all = [...live, dead];
      const toLive = prefixes.filter((p) => pickNode(p, all).id !== "dead").slice(0, 5);
      const toDead = prefixes.find((p) => pickNode(p, all).id === "dead")!;
      for (const p of toLive) {
        const nodesFor = new Set<string>();
        for (const tail of [" one", " two", " three"]) {
          const res = await post(p + tail);
          assert.equal(res.status, 200);
          const text = await res.text();
          const node = res.headers.get("x-naive-node")!;
          assert.ok(text.includes(`"node":"${node}"`) && text.endsWith("data: [DONE]\n\n"), text);
          assert.equal(node, pickNode(p, all).id);
          nodesFor.add(node);
        }
        assert.equal(nodesFor.size, 1, `${p}: one node for every request with that prefix`);
      }
      assert.ok(
        seen.every((s) => JSON.parse(s.body).messages[0].content.startsWith("prefix")),
        "bodies forwarded unchanged",
      );
      const res = await post(toDead + " x");
      assert.equal(res.status, 502);
      const err = (await res.json()) as { error: { message: string; type: string; code: string } };
      assert.equal(err.error.code, "upstream_unreachable");
      assert.equal(typeof err.error.message, "string");
    } finally {
      await router.close();
      for (const s of servers) {
        s.closeAllConnections();
        s.close();
      }
    }
  });
});

describe("client", () => {
  test("reads every kind of answer: in time, refused, unshaped error, error event, cut stream, a reset before any status (saying why), silence", async () => {
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const scenario = (JSON.parse(body) as { scenario: string }).scenario;
        const chunk = (o: unknown) => res.write(`data: ${JSON.stringify(o)}\n\n`);
        const content = { choices: [{ index: 0, delta: { role: "assistant", content: "Hi" } }] };
        const usage = { choices: [], usage: { prompt_tokens: 10, prompt_tokens_details: { cached_tokens: 4 } } };
        switch (scenario) {
          case "ok":
            res.writeHead(200, { "content-type": "text/event-stream", "x-warmpath-node": "n1", "x-warmpath-queued-ms": "12" });
            chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "" } }] });
            setTimeout(() => {
              chunk(content);
              chunk(usage);
              res.end("data: [DONE]\n\n");
            }, 30);
            return;
          case "shed":
            res.writeHead(429, { "content-type": "application/json", "retry-after": "3" });
            return res.end(
              JSON.stringify({ error: { message: "late", type: "rate_limit_error", code: "objective_unreachable", param: null } }),
            );
          case "unshaped":
            res.writeHead(503, { "content-type": "text/plain" });
            return res.end("busy");
          case "error-event":
            res.writeHead(200, { "content-type": "text/event-stream" });
            chunk(content);
            chunk({ error: { message: "Internal server error", code: 500 } });
            return res.end("data: [DONE]\n\n");
          case "cut":
            res.writeHead(200, { "content-type": "text/event-stream" });
            chunk(content);
            return setTimeout(() => res.socket!.destroy(), 20);
          case "no-done":
            res.writeHead(200, { "content-type": "text/event-stream" });
            chunk(content);
            chunk(usage);
            return res.end();
          case "reset":
            return req.socket.destroy(); // no status at all: the connection is reset
          case "silent":
            return; // never answers: the client gives up
        }
      });
    });
    const url = await listen(server);
    const scenarios = ["ok", "shed", "unshaped", "error-event", "cut", "no-done", "reset", "silent"];
    try {
      const result = await replay(
        { url, headers: {} },
        scenarios.map((scenario, id) => ({ id, dueMs: id * 5, body: JSON.stringify({ scenario }), giveUpMs: 500 })),
      );
      const by = (s: string) => result.records[scenarios.indexOf(s)]!;
      const expected: Record<string, Outcome> = {
        ok: "answered",
        shed: "refused",
        unshaped: "refused",
        "error-event": "error",
        cut: "lost",
        "no-done": "lost",
        reset: "lost",
        silent: "gave-up",
      };
      for (const s of scenarios) assert.equal(by(s).outcome, expected[s], `${s}: ${JSON.stringify(by(s))}`);
      const ok = by("ok");
      assert.ok(ok.ttftMs! >= 25, `the first token is the first content chunk, not the empty one: ${ok.ttftMs}`);
      assert.deepEqual([ok.node, ok.queuedMs, ok.promptTokens, ok.cachedTokens], ["n1", 12, 10, 4]);
      assert.deepEqual([by("shed").code, by("shed").retryAfter, by("shed").shaped], ["objective_unreachable", "3", true]);
      assert.equal(by("unshaped").shaped, false);
      // Lost before any status: the error's code and message say why (ECONNRESET, "socket hang up").
      assert.equal(by("reset").code, "transport");
      assert.match(by("reset").detail ?? "", /^ECONNRESET: socket hang up/);
      const summary = summarise(
        scenarios.map((_, id) => ({ id, promptTokens: 10, objectiveMs: id === 0 ? 1000 : 1 })),
        result.records,
      );
      assert.deepEqual(
        [summary.within, summary.answered, summary.refused429, summary.refused429WithRetryAfter, summary.gaveUp, summary.unshapedErrors],
        [1, 1, { objective_unreachable: 1 }, 1, 1, 1],
      );
      // The cut stream is lost however the socket's end surfaces (an "aborted" error, or a close mid-answer).
      assert.equal(summary.lost.no_done, 1);
      assert.equal(summary.lost.transport, 1);
      assert.equal(total(summary.lost), 3, JSON.stringify(summary.lost));
      assert.equal(summary.goodput, 1 / 8);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe("refusals", () => {
  // As GET /metrics renders them (src/edge/api/prometheus.ts), among other metrics.
  const metrics = [
    "# HELP warmpath_edge_refusals_total Requests the edge answered without a node.",
    "# TYPE warmpath_edge_refusals_total counter",
    'warmpath_edge_refusals_total{status="429",code="objective_unreachable",reason="shed"} 7',
    'warmpath_edge_refusals_total{status="429",code="rate_limit_exceeded",reason="rate-limited"} 2',
    'warmpath_edge_refusals_total{status="404",code="model_not_found",reason="unknown-model"} 1',
    'warmpath_rejections_total{region="us-east",reason="shed"} 7',
  ].join("\n");

  test("are read from the edge's counter, whatever its log lines (bounded per second) say", () => {
    const after = edgeRefusals(metrics);
    assert.deepEqual(after, {
      "429 objective_unreachable shed": 7,
      "429 rate_limit_exceeded rate-limited": 2,
      "404 model_not_found unknown-model": 1,
    });
    // Only what the run added: the 404 came before it.
    assert.deepEqual(counted({ "404 model_not_found unknown-model": 1, "429 objective_unreachable shed": 3 }, after), {
      "429 objective_unreachable shed": 4,
      "429 rate_limit_exceeded rate-limited": 2,
    });
    assert.deepEqual(byStatusAndCode(after), { "429 objective_unreachable": 7, "429 rate_limit_exceeded": 2, "404 model_not_found": 1 });
  });

  test("are checked against the client's: an error status without a node", () => {
    const client = clientRefusals([
      { status: 429, code: "objective_unreachable" },
      { status: 429, code: "objective_unreachable" },
      { status: 400, code: "context_length", node: "gpu-1" }, // a node's own error: not a refusal
      { status: 200, node: "gpu-0" },
      {}, // lost: no status
    ]);
    assert.deepEqual(client, { "429 objective_unreachable": 2 });
    assert.deepEqual(refusalMismatches({ "429 objective_unreachable shed": 2 }, client), []);
    assert.deepEqual(refusalMismatches({ "429 objective_unreachable shed": 3, "503 no_capacity no-node": 1 }, client), [
      "429 objective_unreachable: router 3, client 2",
      "503 no_capacity: router 1, client 0",
    ]);
  });
});

type Row = [number, string, number | null, number | null, string | null, string | null, number | null, number];
interface QuickResults {
  plan: { start: number; prefixChars: number; nodes: number };
  node: { default_max_tokens: number };
  loads: Array<{ load: number; requests: number }>;
  runs: Array<{
    router: string;
    load: number;
    summary: ReturnType<typeof summarise>;
    records: Row[];
    refusals?: Record<string, number>;
  }>;
}

describe("client connections", () => {
  test("a kept-alive connection idle past the client's own limit is closed by the client, not reused", async () => {
    let connections = 0;
    const server = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(429, { "content-type": "application/json", "retry-after": "1" });
        res.end(JSON.stringify({ error: { message: "busy", type: "rate_limit_error", code: "objective_unreachable", param: null } }));
      });
    });
    // A server that keeps idle connections far longer than the client: only the client's limit can close them.
    server.keepAliveTimeout = 60_000;
    server.on("connection", () => connections++);
    const url = await listen(server);
    const schedule = [0, 800].map((dueMs, id) => ({ id, dueMs, body: "{}", giveUpMs: 5_000 }));
    try {
      const kept = await replay({ url, headers: {} }, schedule, 30_000);
      assert.deepEqual(
        kept.records.map((r) => r.outcome),
        ["refused", "refused"],
      );
      assert.equal(connections, 1, "an idle socket within the limit is reused");
      connections = 0;
      const retired = await replay({ url, headers: {} }, schedule, 150);
      assert.deepEqual(
        retired.records.map((r) => r.outcome),
        ["refused", "refused"],
      );
      assert.equal(connections, 2, "a socket idle past the limit is closed and a new one opened");
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe("reading", () => {
  /** A run with the figures the reading reads; the rest of a RunResult is not looked at. */
  const run = (router: "warmpath" | "naive", load: number, goodput: number, extra: Partial<RunResult> = {}): RunResult =>
    ({
      router,
      load,
      summary: {
        requests: 100,
        within: Math.round(goodput * 100),
        goodput,
        tokenGoodput: goodput,
        answered: 90,
        late: router === "naive" ? 40 : 0,
        refused429: router === "warmpath" ? { objective_unreachable: 10 } : {},
        refused429WithRetryAfter: router === "warmpath" ? 10 : 0,
        refused503: {},
        gaveUp: 0,
        lost: {},
        hitRate: 0.1,
        ttftP99Ms: 40_000,
        queuedP99Ms: router === "warmpath" ? 30_000 : undefined,
      },
      cpu: { other: 0.03, routerMsPerRequest: router === "warmpath" ? 30 : 10 },
      decisions: { "200 prefix-hit": 90 },
      ...(router === "warmpath" ? { refusals: { "429 objective_unreachable shed": 10 } } : {}),
      ...extra,
    }) as unknown as RunResult;
  const report = (runs: RunResult[]): Report =>
    ({
      quick: false,
      durationS: 600,
      plan: { timeFactor: 1 },
      loads: [...new Set(runs.map((r) => r.load))].map((load) => ({ load, traceSpanS: 100 * load, capacity: { speed: 1 }, twin: [] })),
      runs,
    }) as unknown as Report;

  test("says the target is met only when warmpath's goodput is at least twice the naive router's at 2x and at 3x", () => {
    const met = renderReading(report([run("warmpath", 2, 0.8), run("naive", 2, 0.4), run("warmpath", 3, 0.7), run("naive", 3, 0.35)]));
    assert.match(met, /\*\*The proof's target is met\*\*/);
    assert.match(met, /2\.00x at 2x \(80\.0% against 40\.0%\) and 2\.00x at 3x/);
    const missed = renderReading(report([run("warmpath", 2, 0.8), run("naive", 2, 0.4), run("warmpath", 3, 0.7), run("naive", 3, 0.36)]));
    assert.match(missed, /\*\*The proof's target is missed\*\*/);
    const one = renderReading(report([run("warmpath", 2, 0.8), run("naive", 2, 0.1)]));
    assert.match(one, /is met where measured\*\* .*not run at 3x/);
    assert.match(renderReading(report([run("warmpath", 1, 0.9), run("naive", 1, 0.5)])), /cannot be read from this run/);
  });

  test("names each lost request with what its client saw, and whether warmpath's records account for the rest", () => {
    const lost = run("warmpath", 3, 0.7, {
      lostDetails: [{ id: 17, code: "ECONNRESET", detail: "socket hang up (reused socket)" }],
    } as Partial<RunResult>);
    (lost.summary as { lost: Record<string, number> }).lost = { transport: 1 };
    const text = renderReading(report([lost, run("naive", 3, 0.2)]));
    assert.match(text, /warmpath at 3x lost 1 \(transport: 1\): request 17: ECONNRESET \(socket hang up \(reused socket\)\)/);
    assert.match(text, /exactly the answered and refused requests/);
    const unexplained = run("warmpath", 3, 0.7);
    (unexplained.summary as { lost: Record<string, number> }).lost = { transport: 1 };
    assert.match(renderReading(report([unexplained])), /kept no error message/);
    assert.match(renderReading(report([run("warmpath", 2, 0.8), run("naive", 2, 0.3)])), /\*\*Lost\*\*: none, by either router/);
  });
});

test(
  "--quick through the real workers and the naive router: every request answered or refused in OpenAI's shape, none lost",
  {
    skip: existsSync(DEFAULT_TRACE) ? false : `the Mooncake trace is not at ${DEFAULT_TRACE}`,
    timeout: 240_000,
  },
  async () => {
    const out = mkdtempSync(join(tmpdir(), "goodput-live-"));
    try {
      const output: string[] = [];
      const code = await new Promise<number | null>((resolve) => {
        const child = spawn(process.execPath, [RUN, "--quick", "--out", out], { stdio: ["ignore", "pipe", "pipe"] });
        child.stdout.on("data", (c) => output.push(String(c)));
        child.stderr.on("data", (c) => output.push(String(c)));
        child.on("exit", resolve);
      });
      assert.equal(code, 0, output.join(""));
      const results = JSON.parse(readFileSync(join(out, "results.json"), "utf8")) as QuickResults;
      assert.ok(readFileSync(join(out, "RESULTS.md"), "utf8").includes("## Summary"));
      assert.deepEqual(results.runs.map((r) => r.router).sort(), ["naive", "warmpath"]);
      for (const run of results.runs) {
        const s = run.summary;
        const offered = results.loads.find((l) => l.load === run.load)!.requests;
        assert.ok(offered > 0);
        assert.equal(run.records.length, offered, `${run.router}: a record for every request`);
        assert.deepEqual(s.lost, {}, `${run.router}: no request lost`);
        assert.equal(s.unshapedErrors, 0, `${run.router}: every error in OpenAI's shape`);
        for (const [id, outcome, status] of run.records) {
          assert.ok(["answered", "refused", "gave-up"].includes(outcome), `${run.router} request ${id}: ${outcome} (${status})`);
        }
        assert.equal(s.promptTokenMismatches, 0, `${run.router}: usage.prompt_tokens is the count the objective was computed from`);
        // warmpath's refusals say why and when to come back.
        const refused429 = Object.values(s.refused429).reduce((a, b) => a + b, 0);
        assert.equal(s.refused429WithRetryAfter, refused429, `${run.router}: every 429 carries Retry-After`);
        if (run.router === "warmpath") for (const c of Object.keys(s.refused429)) assert.equal(c, "objective_unreachable");
        // warmpath's refusals are counted by the router as its client saw them (a request the client
        // gave up on may have been refused after: the router's alone).
        if (run.router === "warmpath") {
          assert.ok(run.refusals, "warmpath: its refusal counter read");
          const router = byStatusAndCode(run.refusals);
          const client = clientRefusals(
            run.records.map(([, , status, , code, node]) => ({
              status: status ?? undefined,
              code: code ?? undefined,
              node: node ?? undefined,
            })),
          );
          for (const [k, n] of Object.entries(client)) assert.ok((router[k] ?? 0) >= n, `${k}: router ${router[k] ?? 0}, client ${n}`);
          assert.ok(
            total(router) - total(client) <= s.gaveUp,
            `router ${JSON.stringify(router)}, client ${JSON.stringify(client)}, gave up ${s.gaveUp}`,
          );
        }
      }
      // The naive router's affinity, live: every answered request went where rendezvous hashing of its key says.
      const naive = results.runs.find((r) => r.router === "naive")!;
      const slice = loadSlice({
        trace: DEFAULT_TRACE,
        start: results.plan.start,
        count: results.loads.find((l) => l.load === naive.load)!.requests,
        model: "llama-3.1-8b-instruct",
        maxAnswerTokens: results.node.default_max_tokens,
      });
      const nodeIds = Array.from({ length: results.plan.nodes }, (_, i) => ({ id: `gpu-${i}` }));
      const byKey = new Map<string, Set<string>>();
      let answered = 0;
      for (const [id, outcome, , , , node] of naive.records) {
        if (outcome !== "answered") continue;
        answered++;
        const key = promptText(JSON.parse(slice[id]!.body)).slice(0, results.plan.prefixChars);
        assert.equal(node, pickNode(key, nodeIds).id, `request ${id}`);
        byKey.set(key, (byKey.get(key) ?? new Set()).add(node!));
      }
      assert.ok(answered > 0);
      for (const nodes of byKey.values()) assert.equal(nodes.size, 1);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  },
);
