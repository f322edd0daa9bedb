/**
 * Mid-stream continuation (src/region/continue.ts, seam.ts): a stream whose node fails after its
 * first byte is finished by another node, and the client reads exactly what one uninterrupted node
 * would have sent. The nodes are story-node.ts engines, which continue deterministically from the
 * text they are given.
 */
import { describe, expect, it, vi } from "vitest";
import { parseLogLine } from "../../src/contracts/decision-line.ts";
import { ACME_KEY, TEST_ADMIN_TOKEN } from "../fixtures/config.ts";
import { STORY_PROMPT_TOKENS, STORY_TOKENS, storyText } from "../fixtures/story-node.ts";
import { HUGE_TEXT_CHUNKS, HUGE_TEXT_CHUNK_CHARS } from "../fixtures/fake-node.ts";
import { call, nodeUrl, registerAll } from "../helpers.ts";

let models = 0;
const US = { "x-warmpath-region": "us" };

interface Parsed {
  events: Array<Record<string, unknown>>;
  done: boolean;
  error: { code: string } | undefined;
  text: string;
  roles: number;
  finish: string | null;
  usage: Record<string, unknown> | undefined;
}

function parse(sse: string, chat: boolean): Parsed {
  const out: Parsed = { events: [], done: false, error: undefined, text: "", roles: 0, finish: null, usage: undefined };
  for (const block of sse.split("\n\n")) {
    const data = block
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .map((l) => l.slice(6))
      .join("\n");
    if (!data) continue;
    if (data === "[DONE]") {
      out.done = true;
      continue;
    }
    const json = JSON.parse(data) as Record<string, unknown>;
    if (json.error) {
      out.error = json.error as { code: string };
      continue;
    }
    out.events.push(json);
    if (json.usage) out.usage = json.usage as Record<string, unknown>;
    for (const c of (json.choices ?? []) as Array<Record<string, unknown>>) {
      const delta = (c.delta ?? {}) as Record<string, unknown>;
      if (delta.role !== undefined) out.roles++;
      const t = chat ? delta.content : c.text;
      if (typeof t === "string") out.text += t;
      if (c.finish_reason != null) out.finish = String(c.finish_reason);
    }
  }
  return out;
}

/** Registers `nodes` (engine vLLM unless said) for a fresh model; returns the model. */
async function fleet(nodes: Array<{ id: string; mode: string; engine?: string | null }>): Promise<string> {
  const model = `m-cont-${models++}`;
  await registerAll(
    nodes.map((n) => ({
      id: n.id,
      region: "us",
      mode: n.mode,
      models: [model],
      ...(n.engine === null ? {} : { engine: n.engine ?? "vllm" }),
    })),
  );
  return model;
}

/**
 * Sends streamed requests (distinct prompts) until one is placed on `first`, and returns that one's
 * answer. Cold prompts are spread over the nodes; any answered by another node is checked whole.
 * `attempts`: enough that missing `first` by chance is negligible: with one node of k taking each
 * cold prompt alike, ((k-1)/k)^attempts. 12 missed one node of eight 20% of the time (the
 * eight-node test below failed that way in CI) and one of two 2.4e-4 of the time, which over the
 * thirty two-node tests here is a failed run in 140; 24 makes it 6e-8 a test.
 */
async function streamVia(
  first: string | string[],
  path: "/v1/chat/completions" | "/v1/completions",
  body: Record<string, unknown>,
  attempts = 24,
): Promise<{ res: Response; parsed: Parsed }> {
  const chat = path === "/v1/chat/completions";
  for (let i = 0; i < attempts; i++) {
    const prompt = `question ${i} ${Math.random()}`;
    const res = await call(path, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}`, ...US },
      body: JSON.stringify({ ...body, stream: true, ...(chat ? { messages: [{ role: "user", content: prompt }] } : { prompt }) }),
      cf: { latitude: "39", longitude: "-77", continent: "NA" },
    });
    expect(res.status).toBe(200);
    const parsed = parse(await res.text(), chat);
    if ([first].flat().includes(res.headers.get("x-warmpath-node")!)) return { res, parsed };
  }
  throw new Error(`no request was placed on ${String(first)}`);
}

/** The decision line of the request answered by `res`, from the log. */
async function decisionLine(spy: { mock: { calls: unknown[][] } }, res: Response): Promise<Record<string, unknown>> {
  return vi.waitFor(
    () => {
      const line = spy.mock.calls
        .map((c) => {
          try {
            return JSON.parse(String(c[0])) as Record<string, unknown>;
          } catch {
            return {};
          }
        })
        .find((l) => l.event === "request" && l.request_id === res.headers.get("x-request-id"));
      if (!line) throw new Error("no decision line yet");
      return line;
    },
    { timeout: 5_000, interval: 20 },
  );
}

const bodiesOf = async (id: string, mode: string) =>
  (await (await fetch(`${nodeUrl({ id, mode })}/_bodies`)).json()) as Array<Record<string, unknown>>;

describe("a stream whose node fails after its first byte is finished by another node", () => {
  for (const kind of ["die", "hang", "cut", "error", "malformed"]) {
    for (const path of ["/v1/chat/completions", "/v1/completions"] as const) {
      for (const includeUsage of [false, true]) {
        it(`${kind}, ${path}, ${includeUsage ? "with" : "without"} include_usage: exactly the uninterrupted text`, async () => {
          const a = `a-${kind}-${models}`;
          const model = await fleet([
            { id: a, mode: `story${kind}4` },
            { id: `b-${models}`, mode: "story" },
          ]);
          const { res, parsed } = await streamVia(a, path, {
            model,
            ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
          });
          // The headers describe the first node, sent before it failed.
          expect(res.headers.get("x-warmpath-node")).toBe(a);
          expect(parsed.error).toBeUndefined();
          expect(parsed.done).toBe(true);
          expect(parsed.text).toBe(storyText());
          expect(parsed.finish).toBe("stop");
          if (path === "/v1/chat/completions") expect(parsed.roles).toBe(1);
          // One answer: every chunk has the first node's id, created and model.
          const ids = new Set(parsed.events.map((e) => `${String(e.id)}/${String(e.created)}/${String(e.model)}`));
          expect(ids.size).toBe(1);
          expect([...ids][0]).toContain(a);
          if (includeUsage) {
            expect(parsed.usage).toMatchObject({
              prompt_tokens: STORY_PROMPT_TOKENS,
              completion_tokens: STORY_TOKENS,
              total_tokens: STORY_PROMPT_TOKENS + STORY_TOKENS,
            });
            expect(parsed.events.filter((e) => e.usage).length).toBe(1);
          } else expect(parsed.usage).toBeUndefined();
        });
      }
    }
  }

  it("sends the text so far as a final assistant message to continue, with the token budget less what was spent", async () => {
    const model = await fleet([
      { id: "budget-a", mode: "storydie4" },
      { id: "budget-b", mode: "story" },
    ]);
    const { parsed } = await streamVia("budget-a", "/v1/chat/completions", { model, max_tokens: 8 });
    expect(parsed.text).toBe(storyText(8));
    expect(parsed.finish).toBe("length");
    const sent = (await bodiesOf("budget-b", "story")).filter((b) => b.model === model && b.continue_final_message === true);
    expect(sent).toHaveLength(1);
    const body = sent[0]!;
    expect(body.add_generation_prompt).toBe(false);
    expect(body.max_tokens).toBe(4);
    const messages = body.messages as Array<{ role: string; content: string }>;
    expect(messages.at(-1)).toEqual({ role: "assistant", content: storyText(4) });
    expect(messages.at(-2)!.role).toBe("user");
  });

  it("ends the answer itself when the budget is spent exactly where the node failed", async () => {
    const model = await fleet([
      { id: "spent-a", mode: "storydie4" },
      { id: "spent-b", mode: "story" },
    ]);
    const { parsed } = await streamVia("spent-a", "/v1/completions", { model, max_tokens: 4 });
    // Four tokens were asked for and sent before the failure: nothing is left to continue.
    expect(parsed.text).toBe(storyText(4));
    expect(parsed.error).toBeUndefined();
    expect(parsed.done).toBe(true);
  });

  it("continues at most `continuations` times, then ends with the error event", async () => {
    const model = await fleet([
      { id: "lim-a", mode: "storydie2" },
      { id: "lim-b", mode: "storydie2" },
      { id: "lim-c", mode: "storydie2" },
    ]);
    const { parsed } = await streamVia(["lim-a", "lim-b", "lim-c"], "/v1/chat/completions", { model });
    // Three nodes, each failing after two tokens: two continuations carried six tokens, the third failure ends it.
    expect(parsed.text).toBe(storyText(6));
    expect(parsed.error?.code).toBe("upstream_stream_error");
    expect(parsed.done).toBe(false);
  });

  it("only continues on engines that can (a node that reports none is `other`), and says so: not `saturated`", async () => {
    // Seven idle nodes that report no engine: the decision line said no-node / saturated.
    const model = await fleet([
      { id: "eng-a", mode: "storydie3" },
      ...Array.from({ length: 7 }, (_, i) => ({ id: `eng-b${i}`, mode: "story", engine: null })),
    ]);
    const spy = vi.spyOn(console, "log");
    try {
      // One node of eight: 110 attempts miss it with probability (7/8)^110, about 4e-7.
      const { res, parsed } = await streamVia("eng-a", "/v1/chat/completions", { model }, 110);
      expect(parsed.text).toBe(storyText(3));
      // The failure's own code (clients keep their handling), its message saying why it was not continued.
      expect(parsed.error?.code).toBe("upstream_stream_error");
      expect((parsed.error as unknown as { message: string }).message).toBe(
        "The model node failed while streaming the answer; no other node in the region runs an engine that can continue the stream, so the answer ends here",
      );
      expect(parsed.done).toBe(false);
      const line = await decisionLine(spy, res);
      expect(line.continuations).toEqual([expect.objectContaining({ node: "eng-a", outcome: "no-node", detail: "no-continuable-engine" })]);
    } finally {
      spy.mockRestore();
    }
  });

  it("never asks the next node for more than the client has left, whatever a dying node's usage said", async () => {
    // The dying node's third chunk says `completion_tokens: -100000`: the next node was asked for 100,012.
    const model = await fleet([
      { id: "neg-a", mode: "negdie" },
      { id: "neg-b", mode: "story" },
    ]);
    const { parsed } = await streamVia("neg-a", "/v1/chat/completions", { model, max_tokens: 12 });
    expect(parsed.error).toBeUndefined();
    const sent = (await bodiesOf("neg-b", "story")).filter((b) => b.model === model && b.continue_final_message === true);
    expect(sent).toHaveLength(1);
    // Three chunks of text reached the client: 12 - 3 left.
    expect(sent[0]!.max_tokens).toBe(9);
  });

  it("ends with `continuation_too_large` when the text so far is more than a continuation may carry", async () => {
    const model = await fleet([
      { id: "huge-a", mode: "hugedie" },
      { id: "huge-b", mode: "story" },
    ]);
    const spy = vi.spyOn(console, "log");
    try {
      const { res, parsed } = await streamVia("huge-a", "/v1/chat/completions", { model });
      // All of the text the node sent (300 KB, past the tests' 256 KiB body limit) reached the client, then the error.
      expect(parsed.text).toBe("y".repeat(HUGE_TEXT_CHUNKS * HUGE_TEXT_CHUNK_CHARS));
      expect(parsed.error?.code).toBe("continuation_too_large");
      expect(parsed.done).toBe(false);
      expect((await bodiesOf("huge-b", "story")).filter((b) => b.model === model && b.continue_final_message === true)).toHaveLength(0);
      const line = await decisionLine(spy, res);
      expect(line.continuations).toEqual([expect.objectContaining({ node: "huge-a", outcome: "not-continuable", detail: "body-limit" })]);
    } finally {
      spy.mockRestore();
    }
  });

  it("does not continue what it cannot continue exactly (logprobs)", async () => {
    const model = await fleet([
      { id: "lp-a", mode: "storydie3" },
      { id: "lp-b", mode: "story" },
    ]);
    const { parsed } = await streamVia("lp-a", "/v1/chat/completions", { model, logprobs: true });
    expect(parsed.error?.code).toBe("upstream_stream_error");
    expect((await bodiesOf("lp-b", "story")).filter((b) => b.model === model && b.continue_final_message)).toHaveLength(0);
  });

  it("records each continuation in the decision line: the failed node, why, tokens carried, the new node and its first byte", async () => {
    const model = await fleet([
      { id: "log-a", mode: "storydie5" },
      { id: "log-b", mode: "story" },
    ]);
    const spy = vi.spyOn(console, "log");
    try {
      const { res, parsed } = await streamVia("log-a", "/v1/chat/completions", { model });
      expect(parsed.text).toBe(storyText());
      await new Promise((r) => setTimeout(r, 50));
      const line = spy.mock.calls
        .map((c) => {
          try {
            return JSON.parse(String(c[0])) as Record<string, unknown>;
          } catch {
            return {};
          }
        })
        .find((l) => l.event === "request" && l.request_id === res.headers.get("x-request-id"))!;
      expect(line).toMatchObject({ node: "log-a", end: "ok" });
      const continuations = line.continuations as Array<Record<string, unknown>>;
      expect(continuations).toHaveLength(1);
      expect(continuations[0]).toMatchObject({ node: "log-a", tokens_carried: 5, outcome: "continued", to_node: "log-b" });
      // The fake node's broken body reaches the worker through miniflare's outbound service as a
      // clean end without [DONE] (a transport turning a reset into an end, as a proxy may).
      expect(["connection", "truncated"]).toContain(continuations[0]!.reason);
      expect(continuations[0]!.first_byte_ms).toEqual(expect.any(Number));
      // Both lines are the contract's (src/contracts/decision-line.ts), as scripts/faults/ and scripts/llama/ parse them.
      const contract = spy.mock.calls
        .map((c) => parseLogLine(String(c[0])))
        .filter((p) => p?.json.request_id === res.headers.get("x-request-id"));
      expect(contract.map((p) => p?.invalid)).toEqual(contract.map(() => undefined));
      expect(contract.find((p) => p?.decision)?.decision?.continuations?.[0]).toMatchObject({ node: "log-a", outcome: "continued" });
      expect(contract.find((p) => p?.continued)?.continued).toMatchObject({
        event: "stream_continued",
        node: "log-a",
        to_node: "log-b",
        tokens_carried: 5,
      });
    } finally {
      spy.mockRestore();
    }
  });

  it("counts continuations by reason and outcome in the metrics", async () => {
    const model = await fleet([
      { id: "met-a", mode: "storyerror2" },
      { id: "met-b", mode: "story" },
    ]);
    await streamVia("met-a", "/v1/chat/completions", { model });
    await new Promise((r) => setTimeout(r, 100));
    const text = await (await call("/metrics", { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })).text();
    const line = text
      .split("\n")
      .find((l) => l.startsWith('warmpath_stream_continuations_total{region="us",reason="error-event",outcome="continued"}'));
    expect(line).toBeDefined();
    expect(Number(line!.split(" ").at(-1))).toBeGreaterThanOrEqual(1);
  });
});

describe("a non-streamed answer that breaks off part-way", () => {
  it("has sent the client nothing: it is tried whole on another node", async () => {
    const model = await fleet([
      { id: "whole-a", mode: "storydie1" },
      { id: "whole-b", mode: "story" },
    ]);
    for (let i = 0; i < 6; i++) {
      const res = await call("/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${ACME_KEY}`, ...US },
        body: JSON.stringify({ model, messages: [{ role: "user", content: `whole ${i}` }] }),
        cf: { latitude: "39", longitude: "-77", continent: "NA" },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-warmpath-node")).toBe("whole-b");
      const json = await res.json<{ choices: Array<{ message: { content: string } }> }>();
      expect(json.choices[0]!.message.content).toBe(storyText());
    }
  });
});
