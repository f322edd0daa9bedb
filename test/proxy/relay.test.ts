import { describe, expect, it, vi } from "vitest";
import { relay, type RelayEnd } from "../../src/proxy/relay.ts";
import { UsageEventFilter } from "../../src/proxy/stream-usage.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

const content = (i: number) => `data: {"id":"x","choices":[{"index":0,"delta":{"content":"w${i}"},"finish_reason":null}]}\n\n`;
const usage = `data: {"id":"x","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":8}}}\n\n`;

/** A node's body delivered in exactly these chunks, one per read. */
function upstream(chunks: string[]): ReadableStreamDefaultReader<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (i < chunks.length) controller.enqueue(enc.encode(chunks[i++]!));
        else controller.close();
      },
    },
    { highWaterMark: 0 },
  ).getReader();
}

/**
 * Reads the relayed stream to its end, as the runtime does for the client. A relay that stalls
 * (a pending read nobody will ever answer) shows up as "stalled" rather than as a hung test: the
 * whole read is synchronous work on in-memory chunks, so 5 s is three orders of magnitude of slack.
 */
async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  const text = (async () => {
    let out = "";
    const reader = stream.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return out;
      out += dec.decode(value, { stream: true });
    }
  })();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stalled = new Promise<string>((resolve) => (timer = setTimeout(() => resolve("stalled"), 5_000)));
  const result = await Promise.race([text, stalled]).finally(() => clearTimeout(timer));
  // The relay reports its end in a task of its own, after the stream's last byte.
  await new Promise((r) => setTimeout(r, 0));
  return result;
}

/**
 * A relay of `reader` after its first content chunk, given the client's signal as the region worker
 * gives it its request's (aborted when the edge lets go of the answer), with `options` added.
 */
function relayWithSignal(reader: ReadableStreamDefaultReader<Uint8Array>, options: Partial<Parameters<typeof relay>[0]>) {
  const clientGone = new AbortController();
  const ends: RelayEnd[] = [];
  const stream = relay({
    first: enc.encode(content(0)),
    reader,
    sse: true,
    requestId: "r",
    onEnd: (end) => ends.push(end),
    clientGone: clientGone.signal,
    ...options,
  });
  return { stream, ends, clientGone };
}

function relayOf(chunks: string[], first: string | undefined = undefined) {
  const ends: RelayEnd[] = [];
  const stream = relay({
    first: first === undefined ? undefined : enc.encode(first),
    reader: upstream(chunks),
    sse: true,
    requestId: "r",
    filter: new UsageEventFilter(),
    onEnd: (end) => ends.push(end),
    idleTimeoutMs: 30_000,
  });
  return { stream, ends };
}

describe("relay", () => {
  it("keeps reading when a chunk is only the usage event it takes out (no stalled stream)", async () => {
    const { stream, ends } = relayOf([content(1), usage, "data: [DONE]\n\n"], content(0));
    expect(await readAll(stream)).toBe(content(0) + content(1) + "data: [DONE]\n\n");
    expect(ends).toEqual(["ok"]);
  });

  it("keeps reading when chunks cut an event in pieces that give the client nothing yet", async () => {
    const event = content(1);
    const { stream, ends } = relayOf([event.slice(0, 10), event.slice(10, 20), event.slice(20), "data: [DONE]\n\n"]);
    expect(await readAll(stream)).toBe(event + "data: [DONE]\n\n");
    expect(ends).toEqual(["ok"]);
  });

  it("relays a first chunk that is only a fragment", async () => {
    const event = content(0);
    const { stream, ends } = relayOf([event.slice(7), usage.slice(0, 30), usage.slice(30), "data: [DONE]\n\n"], event.slice(0, 7));
    expect(await readAll(stream)).toBe(event + "data: [DONE]\n\n");
    expect(ends).toEqual(["ok"]);
  });

  it("still ends a stream cut after a swallowed chunk with an error event", async () => {
    const { stream, ends } = relayOf([usage], content(0));
    const text = await readAll(stream);
    expect(text.startsWith(content(0))).toBe(true);
    expect(text).toContain('"code":"upstream_stream_error"');
    expect(ends).toEqual(["stream-error"]);
  });
});

describe("relay with resume", () => {
  /** A node's body that sends these chunks, then breaks. */
  function breaking(chunks: string[]): ReadableStreamDefaultReader<Uint8Array> {
    let i = 0;
    return new ReadableStream<Uint8Array>({
      pull(controller) {
        if (i < chunks.length) controller.enqueue(enc.encode(chunks[i++]!));
        else controller.error(new Error("reset"));
      },
    }).getReader();
  }

  it("carries on with the next node's body after a failure, and reports the failure kind it was asked to resume", async () => {
    const kinds: string[] = [];
    const ends: RelayEnd[] = [];
    const stream = relay({
      first: undefined,
      reader: breaking([content(0)]),
      sse: true,
      requestId: "r",
      resume: async (kind) => {
        kinds.push(kind);
        return { first: enc.encode(content(1)), reader: upstream(["data: [DONE]\n\n"]) };
      },
      onEnd: (end) => ends.push(end),
    });
    expect(await readAll(stream)).toBe(content(0) + content(1) + "data: [DONE]\n\n");
    expect(kinds).toEqual(["connection"]);
    expect(ends).toEqual(["ok"]);
  });

  it("ends with the error a resume gives instead of another node (its own message and code)", async () => {
    const ends: RelayEnd[] = [];
    const stream = relay({
      first: undefined,
      reader: breaking([content(0)]),
      sse: true,
      requestId: "r",
      resume: async () => ({ message: "too long to carry on", code: "continuation_too_large" }),
      onEnd: (end) => ends.push(end),
    });
    const text = await readAll(stream);
    expect(text.startsWith(content(0))).toBe(true);
    const error = JSON.parse(
      text
        .slice(content(0).length)
        .replace(/^data: /, "")
        .trim(),
    ) as { error: Record<string, unknown> };
    expect(error.error).toMatchObject({ message: "too long to carry on", code: "continuation_too_large" });
    expect(ends).toEqual(["stream-error"]);
  });

  it("keeps the failure's own code when the resume only says why it did not carry on", async () => {
    const stream = relay({
      first: undefined,
      reader: breaking([content(0)]),
      sse: true,
      requestId: "r",
      resume: async () => ({ message: "nobody can continue it" }),
      onEnd: () => {},
    });
    const text = await readAll(stream);
    const error = JSON.parse(
      text
        .slice(content(0).length)
        .replace(/^data: /, "")
        .trim(),
    ) as { error: Record<string, unknown> };
    expect(error.error).toMatchObject({
      message: "The model node failed while streaming the answer; nobody can continue it",
      code: "upstream_stream_error",
    });
  });

  it("never resumes once the client has gone", async () => {
    let resumes = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const reader = new ReadableStream<Uint8Array>({
      async pull(controller) {
        await held;
        controller.error(new Error("reset"));
      },
    }).getReader();
    const { stream, ends, clientGone } = relayWithSignal(reader, {
      resume: async () => {
        resumes++;
        return { first: enc.encode(content(1)), reader: upstream(["data: [DONE]\n\n"]) };
      },
    });
    const client = stream.getReader();
    await client.read();
    const pending = client.read();
    await client.cancel("gone");
    clientGone.abort(new Error("gone"));
    release();
    await pending.catch(() => {});
    await new Promise((r) => setTimeout(r, 10));
    expect(resumes).toBe(0);
    expect(ends).toEqual(["cancelled"]);
  });

  it("when the client goes while another node is asked to carry on, lets that node's body go and ends once the resume has settled", async () => {
    let release!: (segment: { first: Uint8Array; reader: ReadableStreamDefaultReader<Uint8Array> }) => void;
    let cancelledNext: unknown;
    const next = new ReadableStream<Uint8Array>({
      pull: () => new Promise<void>(() => {}),
      cancel: (reason) => void (cancelledNext = reason ?? "cancelled"),
    }).getReader();
    const failing = new ReadableStream<Uint8Array>({ pull: (c) => c.error(new Error("reset")) }).getReader();
    const { stream, ends, clientGone } = relayWithSignal(failing, {
      resume: () => new Promise((r) => (release = r)),
    });
    const client = stream.getReader();
    await client.read();
    void client.read().catch(() => {});
    await vi.waitFor(() => expect(release).toBeDefined());
    clientGone.abort(new Error("gone"));
    await new Promise((r) => setTimeout(r, 10));
    // Not ended while the resume is out: its end would settle the failed node's part, not the new one's.
    expect(ends).toEqual([]);
    release({ first: enc.encode(content(1)), reader: next });
    await vi.waitFor(() => expect(ends).toEqual(["cancelled"]));
    expect(cancelledNext).toBeDefined();
  });

  it("ends the answer at the request's deadline when the client stops reading, letting the node's body go", async () => {
    let cancelled: unknown;
    // A node with more to say at once: only the client's pace holds the relay.
    const reader = new ReadableStream<Uint8Array>({
      pull: (c) => c.enqueue(enc.encode(content(1))),
      cancel: (reason) => void (cancelled = reason ?? "cancelled"),
    }).getReader();
    const { stream, ends } = relayWithSignal(reader, { deadlineAt: Date.now() + 50, idleTimeoutMs: 30_000 });
    const client = stream.getReader();
    await client.read(); // the first chunk, then nothing more is read
    await vi.waitFor(() => expect(ends).toEqual(["cancelled"]), { timeout: 2_000 });
    expect(cancelled).toBeDefined();
  });

  it("lets go of a silent node's body as soon as the client goes, without waiting for its next chunk", async () => {
    let cancelled: unknown;
    // A node that sends nothing more after its first chunk (and would not for the idle wait's 30 s).
    const reader = new ReadableStream<Uint8Array>({
      pull: () => new Promise<void>(() => {}),
      cancel: (reason) => void (cancelled = reason ?? "cancelled"),
    }).getReader();
    const { stream, ends, clientGone } = relayWithSignal(reader, { idleTimeoutMs: 30_000 });
    const client = stream.getReader();
    await client.read();
    void client.read().catch(() => {});
    clientGone.abort(new Error("gone"));
    await new Promise((r) => setTimeout(r, 10));
    expect(cancelled).toBeDefined();
    expect(ends).toEqual(["cancelled"]);
  });

  it("without the client's signal, sees the client gone at the next chunk: the node's body is let go, nothing more is read", async () => {
    let reads = 0;
    let cancelled = false;
    const reader = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          reads++;
          controller.enqueue(enc.encode(content(reads)));
        },
        cancel: () => void (cancelled = true),
      },
      { highWaterMark: 0 },
    ).getReader();
    const ends: RelayEnd[] = [];
    const stream = relay({ first: enc.encode(content(0)), reader, sse: true, requestId: "r", onEnd: (end) => ends.push(end) });
    const client = stream.getReader();
    await client.read();
    await client.cancel("gone");
    await new Promise((r) => setTimeout(r, 10));
    expect(cancelled).toBe(true);
    expect(ends).toEqual(["cancelled"]);
    // At most the one chunk whose write found the client gone: the node's body is not read on.
    expect(reads).toBeLessThanOrEqual(2);
  });
});

describe("relay timeouts (one timer per body, not per read)", () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /** A node's body that sends `chunks`, waiting `gapsMs[i]` before chunk i (the last gap before its end). */
  function paced(chunks: string[], gapsMs: number[]): ReadableStreamDefaultReader<Uint8Array> {
    let i = 0;
    return new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          await sleep(gapsMs[i] ?? 0);
          if (i < chunks.length) controller.enqueue(enc.encode(chunks[i++]!));
          else controller.close();
        },
      },
      { highWaterMark: 0 },
    ).getReader();
  }
  function timed(reader: ReadableStreamDefaultReader<Uint8Array>, idleTimeoutMs: number, deadlineAt?: number) {
    const ends: RelayEnd[] = [];
    const stream = relay({ first: undefined, reader, sse: true, requestId: "r", onEnd: (e) => ends.push(e), idleTimeoutMs, deadlineAt });
    return { stream, ends };
  }

  it("never cuts a stream whose chunks each come within the idle wait, though the whole lasts several idle waits", async () => {
    const chunks = [0, 1, 2, 3, 4, 5, 6, 7].map(content).concat("data: [DONE]\n\n");
    const { stream, ends } = timed(
      paced(
        chunks,
        chunks.map(() => 60),
      ),
      150,
    );
    const text = await readAll(stream);
    expect(text).toBe(chunks.join(""));
    expect(ends).toEqual(["ok"]);
  });

  it("ends a stream whose node goes silent for longer than the idle wait mid-answer, though earlier chunks came quickly", async () => {
    const { stream, ends } = timed(paced([content(0), content(1), content(2)], [0, 10, 600]), 150);
    const text = await readAll(stream);
    expect(text.startsWith(content(0) + content(1))).toBe(true);
    expect(text).not.toContain(content(2));
    expect(text).toContain('"code":"upstream_stream_timeout"');
    expect(ends).toEqual(["stream-error"]);
  });

  it("times the next node's body afresh after a silent node is resumed, and cancels the silent one", async () => {
    let cancelled: unknown;
    const silent = new ReadableStream<Uint8Array>(
      {
        start(controller) {
          controller.enqueue(enc.encode(content(0)));
        },
        cancel(reason) {
          cancelled = reason;
        },
      },
      { highWaterMark: 0 },
    ).getReader();
    const kinds: string[] = [];
    const ends: RelayEnd[] = [];
    const stream = relay({
      first: undefined,
      reader: silent,
      sse: true,
      requestId: "r",
      idleTimeoutMs: 100,
      resume: async (kind) => {
        kinds.push(kind);
        // The next node is slower than nothing but within the idle wait between its chunks.
        return { first: undefined, reader: paced([content(1), content(2), "data: [DONE]\n\n"], [60, 60, 60, 0]) };
      },
      onEnd: (end) => ends.push(end),
    });
    expect(await readAll(stream)).toBe(content(0) + content(1) + content(2) + "data: [DONE]\n\n");
    expect(kinds).toEqual(["idle-timeout"]);
    expect(String(cancelled)).toContain("idle timeout");
    expect(ends).toEqual(["ok"]);
  });

  it("ends a stream at the request's deadline even while chunks keep coming within the idle wait", async () => {
    const chunks = Array.from({ length: 40 }, (_, i) => content(i));
    const { stream, ends } = timed(
      paced(
        chunks,
        chunks.map(() => 40),
      ),
      1_000,
      Date.now() + 250,
    );
    const text = await readAll(stream);
    expect(text).toContain('"code":"request_deadline_exceeded"');
    expect(text).not.toContain(content(39));
    expect(ends).toEqual(["stream-error"]);
  });
});
