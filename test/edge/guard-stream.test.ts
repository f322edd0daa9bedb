import { describe, expect, it } from "vitest";
import { guardStream, type GuardedEnd } from "../../src/edge/guard-stream.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A region worker's body: these chunks, then its end, or an error (the region lost mid-answer). */
function regionBody(chunks: string[], then: "end" | "error" | "hang", seen?: { pulls: number; cancelled: unknown[] }) {
  let i = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (seen) seen.pulls++;
        if (i < chunks.length) return controller.enqueue(enc.encode(chunks[i++]!));
        if (then === "end") controller.close();
        else if (then === "error") controller.error(new Error("region worker gone"));
        else await new Promise(() => {}); // never answers again
      },
      cancel(reason) {
        seen?.cancelled.push(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  let out = "";
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return out;
    out += dec.decode(value, { stream: true });
  }
}

/** Waits until `ends` has an entry (the guard reports its end after the pipe settles). */
async function ended(ends: GuardedEnd[]): Promise<GuardedEnd[]> {
  for (let i = 0; i < 100 && ends.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  return ends;
}

const event = (i: number) => `data: {"choices":[{"index":0,"delta":{"content":"w${i}"}}]}\n\n`;

describe("guardStream", () => {
  it("passes the region's bytes through unchanged, in order, and reports a clean end", async () => {
    const ends: GuardedEnd[] = [];
    const chunks = [0, 1, 2, 3].map(event).concat("data: [DONE]\n\n");
    const text = await readAll(guardStream(regionBody(chunks, "end"), "r1", (e) => ends.push(e)));
    expect(text).toBe(chunks.join(""));
    expect(await ended(ends)).toEqual(["ok"]);
  });

  it("ends a stream whose region worker is lost mid-answer with the OpenAI-shaped error event, after what it sent", async () => {
    const ends: GuardedEnd[] = [];
    const text = await readAll(guardStream(regionBody([event(0), event(1)], "error"), "r2", (e) => ends.push(e)));
    expect(text.startsWith(event(0) + event(1))).toBe(true);
    const last = text.slice((event(0) + event(1)).length);
    expect(last.startsWith("data: ")).toBe(true);
    const error = JSON.parse(last.slice(6).trim()) as { error: { code: string; message: string } };
    expect(error.error.code).toBe("region_stream_lost");
    expect(await ended(ends)).toEqual(["region-stream-lost"]);
  });

  it("cancels the region's body when the client goes, and reports the client's cancel (not a lost region)", async () => {
    const ends: GuardedEnd[] = [];
    const seen = { pulls: 0, cancelled: [] as unknown[] };
    const guarded = guardStream(regionBody([event(0), event(1), event(2)], "hang", seen), "r3", (e) => ends.push(e));
    const reader = guarded.getReader();
    expect(dec.decode((await reader.read()).value)).toBe(event(0));
    await reader.cancel(new Error("client went"));
    expect(await ended(ends)).toEqual(["cancelled"]);
    for (let i = 0; i < 100 && seen.cancelled.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(seen.cancelled.length).toBe(1);
  });

  it("reads nothing far ahead of the client: a client that stops reading stops the region's body", async () => {
    const seen = { pulls: 0, cancelled: [] as unknown[] };
    const guarded = guardStream(regionBody([0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(event), "end", seen), "r4");
    const reader = guarded.getReader();
    await reader.read();
    await new Promise((r) => setTimeout(r, 50));
    // The chunk read, at most one waiting to be written and one being read: never the whole body.
    expect(seen.pulls).toBeLessThanOrEqual(3);
    await reader.cancel();
  });
});
