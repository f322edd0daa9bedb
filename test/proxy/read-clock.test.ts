import { describe, expect, it } from "vitest";
import { ReadClock } from "../../src/proxy/read-clock.ts";

const enc = new TextEncoder();

/** A body that sends one chunk and then nothing, noting why it was cancelled. */
function silentAfterOne(): { reader: ReadableStreamDefaultReader<Uint8Array>; cancelled: () => unknown } {
  let reason: unknown;
  const reader = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        controller.enqueue(enc.encode("data: 1\n\n"));
      },
      cancel(r) {
        reason = r;
      },
    },
    { highWaterMark: 0 },
  ).getReader();
  return { reader, cancelled: () => reason };
}

describe("ReadClock", () => {
  it("passes chunks through untimed when there is no idle wait or deadline", async () => {
    const { reader } = silentAfterOne();
    const clock = new ReadClock(undefined, undefined);
    const first = await clock.read(reader);
    expect(first.done).toBe(false);
    expect(clock.timedOut).toBeUndefined();
  });

  it("ends a read the idle wait outlasts by cancelling the body, and says it was the idle wait", async () => {
    const { reader, cancelled } = silentAfterOne();
    const clock = new ReadClock(50, undefined);
    expect((await clock.read(reader)).done).toBe(false);
    clock.settled();
    const started = Date.now();
    const second = await clock.read(reader);
    expect(second.done).toBe(true);
    expect(clock.timedOut).toBe("idle");
    expect(String(cancelled())).toContain("idle timeout");
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    clock.restart();
    expect(clock.timedOut).toBeUndefined();
    clock.stop();
  });

  it("says the deadline when it comes before the idle wait", async () => {
    const { reader } = silentAfterOne();
    const clock = new ReadClock(10_000, Date.now() + 40);
    await clock.read(reader);
    clock.settled();
    expect((await clock.read(reader)).done).toBe(true);
    expect(clock.timedOut).toBe("deadline");
    clock.stop();
  });

  it("does not time out a read that settled, however long the next one is asked for later", async () => {
    const { reader, cancelled } = silentAfterOne();
    const clock = new ReadClock(30, undefined);
    await clock.read(reader);
    clock.settled();
    // The timer armed for the first read fires with nothing waiting: nothing is cancelled.
    await new Promise((r) => setTimeout(r, 80));
    expect(clock.timedOut).toBeUndefined();
    expect(cancelled()).toBeUndefined();
    clock.stop();
  });

  it("calls a wait for the client past the request's deadline, and never delays a later read's idle wait", async () => {
    const clock = new ReadClock(40, Date.now() + 60_000);
    // A wait for the client first, due at the deadline (a minute away), then taken.
    let stalled = false;
    clock.writing(() => (stalled = true));
    clock.settled();
    const { reader, cancelled } = silentAfterOne();
    expect((await clock.read(reader)).done).toBe(false);
    clock.settled();
    const started = Date.now();
    expect((await clock.read(reader)).done).toBe(true);
    // The idle wait's 40 ms, not the deadline's minute.
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(clock.timedOut).toBe("idle");
    expect(cancelled()).toBeDefined();
    expect(stalled).toBe(false);
    clock.stop();

    const short = new ReadClock(undefined, Date.now() + 30);
    const called = new Promise<boolean>((resolve) => short.writing(() => resolve(true)));
    expect(await called).toBe(true);
  });
});
