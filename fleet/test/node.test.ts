/**
 * A real node over HTTP (time factor 10 so it runs in milliseconds), plus a fake router that
 * records the node's reports.
 */
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { startNode, type NodeHandle } from "../node.ts";

const MODEL = "llama-3.1-8b-instruct";
const received: { method: string; url: string; auth: string | undefined; body: any }[] = [];
let router: Server;
let routerUrl = "";
let node: NodeHandle;

before(async () => {
  router = createServer((req, res) => {
    let b = "";
    req.on("data", (c) => (b += c));
    req.on("end", () => {
      received.push({ method: req.method!, url: req.url!, auth: req.headers.authorization, body: b ? JSON.parse(b) : null });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => router.listen(0, "127.0.0.1", r));
  routerUrl = `http://127.0.0.1:${(router.address() as AddressInfo).port}`;
  node = await startNode({
    id: "n1",
    region: "test-region",
    models: [MODEL],
    kvCapacityTokens: 100_000,
    prefillTokensPerSecond: 5_000,
    decodeTokensPerSecond: 1_000,
    maxRunning: 8,
    timeFactor: 10,
    router: { url: routerUrl, token: "tok", intervalMs: 50 },
  });
});

after(async () => {
  await node.stop();
  router.closeAllConnections();
  await new Promise((r) => router.close(r));
});

const longPrompt = "You are a careful assistant. " + "Reference text about prefix caching and routing. ".repeat(700); // ~8.6k tokens

async function chat(body: Record<string, unknown>, path = "/v1/chat/completions") {
  const t0 = performance.now();
  const res = await fetch(node.url + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  let firstChunkMs = 0;
  let text = "";
  const decoder = new TextDecoder();
  for await (const c of res.body!) {
    if (!firstChunkMs) firstChunkMs = performance.now() - t0;
    text += decoder.decode(c, { stream: true });
  }
  return { status: res.status, headers: res.headers, text, firstChunkMs };
}

function events(text: string): any[] {
  return text
    .split("\n\n")
    .filter((e) => e.startsWith("data: "))
    .map((e) => e.slice(6))
    .map((d) => (d === "[DONE]" ? d : JSON.parse(d)));
}

test("a repeated long prompt is served from the node's cache: cached_tokens > 0 and faster first chunk", async () => {
  const body = {
    model: MODEL,
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: 5,
    messages: [
      { role: "system", content: longPrompt },
      { role: "user", content: "hello" },
    ],
  };
  const cold = await chat(body);
  const warm = await chat(body);
  const coldEv = events(cold.text);
  const warmEv = events(warm.text);
  assert.equal(coldEv.at(-1), "[DONE]");
  const usage = (ev: any[]) => ev.at(-2).usage;
  assert.deepEqual(coldEv.at(-2).choices, []);
  assert.equal(usage(coldEv).prompt_tokens_details.cached_tokens, 0);
  const p = usage(warmEv).prompt_tokens;
  assert.ok(p > 8000, `prompt ${p} tokens`);
  assert.equal(usage(warmEv).prompt_tokens_details.cached_tokens, Math.floor((p - 1) / 16) * 16);
  assert.equal(usage(warmEv).completion_tokens, 5);
  // Cold prefill: ~8.1k tokens / 5000 tok/s / 10 = ~160 ms; warm: under 1 ms of prefill.
  assert.ok(cold.firstChunkMs > 140, `cold first chunk ${cold.firstChunkMs} ms`);
  assert.ok(warm.firstChunkMs < cold.firstChunkMs / 3, `warm ${warm.firstChunkMs} ms vs cold ${cold.firstChunkMs} ms`);
  // Chunk shapes: role on the first delta, finish_reason on the last token.
  const chunks = warmEv.slice(0, -2);
  assert.equal(chunks.length, 5);
  assert.equal(chunks[0].object, "chat.completion.chunk");
  assert.equal(chunks[0].choices[0].delta.role, "assistant");
  assert.deepEqual(
    chunks.map((c) => c.choices[0].finish_reason),
    [null, null, null, null, "length"],
  );
});

test("usage chunk only when asked; non-streamed and text completions carry usage", async () => {
  const streamed = events((await chat({ model: MODEL, stream: true, messages: [{ role: "user", content: "hi" }], max_tokens: 2 })).text);
  assert.ok(streamed.every((e) => e === "[DONE]" || !("usage" in e)));
  const full = JSON.parse((await chat({ model: MODEL, messages: [{ role: "user", content: "hi" }] })).text);
  assert.equal(full.object, "chat.completion");
  assert.equal(full.choices[0].finish_reason, "stop");
  assert.equal(full.usage.completion_tokens, 64, "default answer length");
  assert.equal(full.usage.total_tokens, full.usage.prompt_tokens + 64);
  const comp = JSON.parse((await chat({ model: MODEL, prompt: "Once upon a time", max_tokens: 3 }, "/v1/completions")).text);
  assert.equal(comp.object, "text_completion");
  assert.equal(comp.usage.prompt_tokens, 4);
  assert.equal(comp.choices[0].text.split(" ").length, 3);
});

test("bad requests get OpenAI-shaped errors", async () => {
  const bad = await fetch(node.url + "/v1/chat/completions", { method: "POST", body: "{not json" });
  assert.equal(bad.status, 400);
  const err = (await bad.json()) as any;
  assert.equal(typeof err.error.message, "string");
  assert.equal(err.error.code, 400);
  assert.equal((await chat({ model: "nope", messages: [{ role: "user", content: "x" }] })).status, 404);
  assert.equal((await chat({ model: MODEL, messages: [] })).status, 400);
});

test("faults set at runtime: error rate, extra latency, hang", async () => {
  const post = (path: string, body: unknown) => fetch(node.url + path, { method: "POST", body: JSON.stringify(body) });
  assert.equal((await post("/admin/faults", { error_rate: 2 })).status, 400);
  await post("/admin/faults", { error_rate: 1 });
  const failed = await chat({ model: MODEL, messages: [{ role: "user", content: "x" }] });
  assert.equal(failed.status, 500);
  assert.equal(JSON.parse(failed.text).error.code, 500);

  await post("/admin/faults", { error_rate: 0, extra_latency_ms: 150 });
  const slow = await chat({ model: MODEL, stream: true, max_tokens: 1, messages: [{ role: "user", content: "x" }] });
  assert.equal(slow.status, 200);
  assert.ok(slow.firstChunkMs >= 150, `first chunk after ${slow.firstChunkMs} ms`);

  await post("/admin/faults", { extra_latency_ms: 0, hang: true });
  await assert.rejects(
    fetch(node.url + "/v1/chat/completions", { method: "POST", body: "{}", signal: AbortSignal.timeout(200) }),
    /TimeoutError|aborted/,
  );
  assert.equal((await fetch(node.url + "/admin/state")).status, 200, "admin still answers while hung");
  await post("/admin/faults", { hang: false });
  assert.equal((await fetch(node.url + "/health")).status, 200);
});

/** Reads a stream until `events` data events have arrived; then whether anything more comes within `quietMs`. */
async function readEvents(res: Response, events: number, quietMs: number) {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (text.split("\n\n").filter((e) => e.startsWith("data: ")).length < events) {
    const { done, value } = await reader.read();
    if (done) return { text, more: "end" as const };
    text += decoder.decode(value, { stream: true });
  }
  const next = await Promise.race([reader.read(), new Promise<"quiet">((r) => setTimeout(() => r("quiet"), quietMs))]);
  await reader.cancel();
  return { text, more: next === "quiet" ? ("quiet" as const) : next.done ? ("end" as const) : ("data" as const) };
}

test("hang after first tokens: a stream sends them, then nothing, and is never ended; its slot is freed", async () => {
  const post = (body: unknown) => fetch(node.url + "/admin/faults", { method: "POST", body: JSON.stringify(body) });
  assert.equal((await post({ hang_after_tokens: 0 })).status, 400);
  await post({ hang_after_tokens: 2 });
  const res = await fetch(node.url + "/v1/chat/completions", {
    method: "POST",
    body: JSON.stringify({ model: MODEL, stream: true, max_tokens: 20, messages: [{ role: "user", content: "stall" }] }),
  });
  assert.equal(res.status, 200);
  // 20 tokens at 10,000 a second (time factor 10) would take 2 ms: 500 ms of silence is a hang.
  const seen = await readEvents(res, 2, 500);
  assert.equal(seen.more, "quiet");
  assert.equal(events(seen.text).length, 2);
  assert.equal(node.state().running, 0, "the stalled request holds no batch slot");
  const whole = await chat({ model: MODEL, max_tokens: 20, messages: [{ role: "user", content: "not streamed" }] });
  assert.equal(JSON.parse(whole.text).usage.completion_tokens, 20, "a whole JSON answer is not affected");
  await post({ hang_after_tokens: null });
  const healed = await chat({ model: MODEL, stream: true, max_tokens: 3, messages: [{ role: "user", content: "stall" }] });
  assert.equal(events(healed.text).at(-1), "[DONE]");
});

test("redirect_to: inference requests are answered 307 to that URL, nothing is generated", async () => {
  const post = (body: unknown) => fetch(node.url + "/admin/faults", { method: "POST", body: JSON.stringify(body) });
  assert.equal((await post({ redirect_to: "not a url" })).status, 400);
  assert.equal((await post({ redirect_to: "file:///etc/passwd" })).status, 400);
  const internal = "http://10.0.0.7:8000/v1/chat/completions";
  await post({ redirect_to: internal });
  const before = node.engine.counters.promptTokens;
  const res = await fetch(node.url + "/v1/chat/completions", {
    method: "POST",
    redirect: "manual",
    body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: "[request-tag:redirected]" }] }),
  });
  assert.equal(res.status, 307);
  assert.equal(res.headers.get("location"), internal);
  assert.match(await res.text(), /Redirecting to http:\/\/10\.0\.0\.7:8000/);
  assert.equal(node.engine.counters.promptTokens, before);
  assert.equal(node.state().first_byte_tags["redirected"], undefined);
  assert.equal((await fetch(node.url + "/admin/state")).status, 200, "admin endpoints are not redirected");
  await post({ redirect_to: null });
});

test("prefill_slowdown: the first chunk waits that many times the prefill", async () => {
  const post = (body: unknown) => fetch(node.url + "/admin/faults", { method: "POST", body: JSON.stringify(body) });
  assert.equal((await post({ prefill_slowdown: 0.5 })).status, 400);
  await post({ prefill_slowdown: 10 });
  // ~2,000 uncached tokens: 40 ms of prefill at 5,000 tokens/s and time factor 10; 400 ms slowed.
  const slow = await chat({ model: MODEL, stream: true, max_tokens: 1, messages: [{ role: "user", content: "slow ".repeat(1_600) }] });
  await post({ prefill_slowdown: 1 });
  assert.equal(events(slow.text).at(-1), "[DONE]");
  assert.ok(slow.firstChunkMs >= 380, `first chunk after ${slow.firstChunkMs} ms`);
});

test("first bytes are recorded by request tag, streamed or not, once per answer", async () => {
  const tagged = (tag: string, stream: boolean) =>
    chat({ model: MODEL, stream, max_tokens: 2, messages: [{ role: "user", content: `[request-tag:${tag}] hello` }] });
  await tagged("t-stream", true);
  await tagged("t-whole", false);
  await tagged("t-whole", false);
  await chat({ model: MODEL, stream: true, max_tokens: 2, messages: [{ role: "user", content: "untagged" }] });
  const tags = node.state().first_byte_tags;
  assert.equal(tags["t-stream"], 1);
  assert.equal(tags["t-whole"], 2, "the same tag answered twice counts twice");
  await fetch(node.url + "/admin/faults", { method: "POST", body: JSON.stringify({ error_rate: 1 }) });
  await tagged("t-failed", true);
  await fetch(node.url + "/admin/faults", { method: "POST", body: JSON.stringify({ error_rate: 0 }) });
  const state = (await (await fetch(node.url + "/admin/state")).json()) as { first_byte_tags: Record<string, number> };
  assert.equal(state.first_byte_tags["t-failed"], undefined, "a 500 sent no generation's first byte");
  assert.equal(state.first_byte_tags["t-stream"], 1, "exposed on GET /admin/state");
});

test("metrics expose vLLM gauges and prefix cache counters", async () => {
  const text = await (await fetch(node.url + "/metrics")).text();
  const value = (name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(text)?.[1]);
  assert.equal(value("vllm:num_requests_running"), 0);
  assert.equal(value("vllm:num_requests_waiting"), 0);
  assert.ok(value("vllm:prefix_cache_hits_total") > 8000);
  assert.ok(value("vllm:prefix_cache_queries_total") > value("vllm:prefix_cache_hits_total"));
  assert.ok(value("vllm:prompt_tokens_total") > 16000);
  assert.ok(value("vllm:generation_tokens_total") > 0);
  assert.match(text, /^vllm:gpu_cache_usage_perc\{model_name="llama-3.1-8b-instruct"\} 0\.0$/m);
});

test("reports reach the router with the bearer; a restart loses the cache and changes boot_id", async () => {
  const reports = received.filter((r) => r.url === "/v1/nodes/report");
  assert.ok(reports.length > 0);
  const last = reports.at(-1)!;
  assert.equal(last.auth, "Bearer tok");
  assert.deepEqual(Object.keys(last.body).sort(), [
    "boot_id",
    "engine",
    "kv_capacity_tokens",
    "kv_usage",
    "models",
    "node_id",
    "region",
    "running",
    "url",
    "waiting",
  ]);
  assert.equal(last.body.url, node.url);
  assert.equal(last.body.engine, "vllm", "a node that names no engine reports vLLM");

  const oldBoot = node.bootId;
  assert.ok(node.state().cached_tokens > 8000);
  const res = await fetch(node.url + "/admin/restart", { method: "POST" });
  assert.equal(res.status, 200);
  await res.text();
  for (let i = 0; i < 100 && node.bootId === oldBoot; i++) await new Promise((r) => setTimeout(r, 10));
  assert.notEqual(node.bootId, oldBoot);
  assert.equal(node.state().cached_tokens, 0);
  assert.equal(node.state().first_byte_tags["t-stream"], 1, "the first-byte record outlives the process");
  for (let i = 0; i < 100 && !received.some((r) => r.body?.boot_id === node.bootId); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(
    received.some((r) => r.body?.boot_id === node.bootId),
    "router told the new boot_id",
  );
  const again = events(
    (
      await chat({
        model: MODEL,
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 1,
        messages: [
          { role: "system", content: longPrompt },
          { role: "user", content: "hello" },
        ],
      })
    ).text,
  );
  assert.equal(again.at(-2).usage.prompt_tokens_details.cached_tokens, 0);
});

test("a node told report_max_running says its places in its reports (max_running_requests); by default it does not", async () => {
  const told = await startNode({
    id: "n2",
    region: "test-region",
    models: [MODEL],
    kvCapacityTokens: 100_000,
    prefillTokensPerSecond: 5_000,
    decodeTokensPerSecond: 1_000,
    maxRunning: 12,
    reportMaxRunning: true,
    timeFactor: 10,
    router: { url: routerUrl, token: "tok", intervalMs: 50 },
  });
  try {
    const fromTold = () => received.find((r) => r.url === "/v1/nodes/report" && r.body?.node_id === "n2");
    for (let i = 0; i < 100 && !fromTold(); i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(fromTold()?.body.max_running_requests, 12);
    const fromDefault = received.filter((r) => r.url === "/v1/nodes/report" && r.body?.node_id === "n1");
    assert.ok(fromDefault.length > 0);
    for (const r of fromDefault) assert.equal(r.body.max_running_requests, undefined);
  } finally {
    await told.stop();
  }
});
