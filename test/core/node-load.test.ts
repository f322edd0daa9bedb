import { describe, expect, it } from "vitest";
import { NodeLoad } from "../../src/core/node-load.ts";

describe("NodeLoad: work ahead in uncached prefill tokens", () => {
  it("queues dispatches FIFO and credits the head's progress at the prefill rate", () => {
    const load = new NodeLoad(10_000);
    load.useEstimate(0.1, 0); // 10,000 tokens/s, prefill times measured exact
    const a = load.dispatch(0, 20_000, 20_000); // 2 s of prefill
    const b = load.dispatch(0, 10_000, 10_000); // 1 s more, behind it
    expect(a).toEqual({ startAt: 0, prefillEnd: 2000 });
    expect(b).toEqual({ startAt: 2000, prefillEnd: 3000 });
    expect(load.workAhead(0)).toBe(30_000);
    expect(load.workAhead(1000)).toBe(20_000);
    expect(load.estimateTtftSeconds(1000, 5_000)).toBeCloseTo(2.5);
    load.firstByte(2000, 0, a, 20_000);
    expect(load.workAhead(2000)).toBe(10_000); // b starts at a's first byte, with all of its prefill ahead
    load.firstByte(3000, 0, b, 10_000);
    expect(load.workAhead(3000)).toBe(0);
  });

  it("does not treat a prefill that overruns its prediction as finished, the less so the more times spread", () => {
    const ahead = (spread: number) => {
      const load = new NodeLoad(10_000);
      load.useEstimate(0.1, spread);
      load.dispatch(0, 10_000, 10_000); // predicted 1 s
      return load.workAhead(3000); // 3 s later, no first byte yet
    };
    expect(ahead(0)).toBe(0); // exact predictions: an overrun cannot happen, so it is done
    expect(ahead(0.5)).toBeGreaterThan(1_000);
    // Sigma 1: a job 3x over its prediction is expected to need about twice its prediction again.
    expect(ahead(1)).toBeGreaterThan(15_000);
    expect(ahead(1)).toBeLessThan(30_000);
    // Before it overruns, a heavy tail also leaves more than the linear remainder.
    const load = new NodeLoad(10_000);
    load.useEstimate(0.1, 1);
    load.dispatch(0, 10_000, 10_000);
    expect(load.workAhead(500)).toBeGreaterThan(5_000);
  });

  it("a big cold prompt weighs more than many decoding requests", () => {
    const busyDecoding = new NodeLoad(10_000);
    for (let i = 0; i < 30; i++) {
      const p = busyDecoding.dispatch(0, 100, 100);
      busyDecoding.firstByte(10, 0, p, 100); // prefilled; now only decoding
    }
    const oneColdPrompt = new NodeLoad(10_000);
    oneColdPrompt.dispatch(0, 100_000, 100_000);
    expect(busyDecoding.inflight).toBe(30);
    expect(busyDecoding.workAhead(20)).toBe(0);
    expect(oneColdPrompt.workAhead(20)).toBeGreaterThan(90_000);
  });

  it("corrects the backlog when the first byte comes earlier than modelled", () => {
    const load = new NodeLoad(10_000);
    const a = load.dispatch(0, 10_000, 10_000); // modelled end 1000
    load.dispatch(0, 10_000, 10_000); // modelled end 2000
    load.firstByte(400, 0, a, 10_000); // a finished 600 ms early: b moves up too
    expect(load.workAhead(400)).toBeCloseTo(10_000, -2);
  });

  it("learns the prefill rate from measured prefill times", () => {
    const load = new NodeLoad(10_000);
    for (let i = 0; i < 200; i++) {
      const t = i * 10_000;
      const p = load.dispatch(t, 20_000, 20_000);
      load.firstByte(t + 4000, t, p, 20_000); // the node really does 5,000 tokens/s
      load.complete(20_000);
    }
    expect(load.prefillRate).toBeGreaterThan(4_900);
    expect(load.prefillRate).toBeLessThan(5_200);
  });

  it("keeps a decaying sum of recent prefill work", () => {
    const load = new NodeLoad(10_000);
    load.dispatch(0, 6_000, 6_000);
    load.dispatch(0, 4_000, 4_000);
    expect(load.recentPrefill(0)).toBe(10_000);
    expect(load.recentPrefill(60_000)).toBeCloseTo(10_000 / Math.E);
    expect(load.recentPrefill(600_000)).toBeLessThan(1);
  });

  it("takes a reported queue this router did not send as a floor, and releases failed dispatches", () => {
    const load = new NodeLoad(10_000);
    load.report({ running: 64, waiting: 10, kvUsage: 0.9, at: 0 });
    expect(load.workAhead(0)).toBeGreaterThan(0);
    // A queue the router knows about already (its own dispatches) is not counted twice.
    const own = new NodeLoad(10_000);
    own.dispatch(0, 10_000, 10_000);
    own.report({ running: 1, waiting: 1, kvUsage: 0.1, at: 0 });
    expect(own.workAhead(0)).toBe(10_000);
    const fresh = new NodeLoad(10_000);
    const p = fresh.dispatch(0, 50_000, 50_000);
    fresh.releaseBeforeFirstByte(100, p);
    fresh.complete(50_000);
    expect(fresh.workAhead(100)).toBe(0);
    expect(fresh.inflight).toBe(0);
    expect(fresh.activeTokens).toBe(0);
  });
});

describe("NodeLoad: a sharded region's other shards", () => {
  it("adds the work other shards queued ahead, draining at the node's rate from when it was shared", () => {
    const load = new NodeLoad(10_000);
    load.useEstimate(0.1, 0);
    load.dispatch(0, 5_000, 5_000);
    load.shareForeign({ queued: 20_000, recent: 30_000 }, 0);
    expect(load.ownWorkAhead(0)).toBe(5_000);
    expect(load.workAhead(0)).toBe(25_000);
    expect(load.workAhead(250)).toBe(2_500 + 17_500); // both drained for 250 ms at 10,000 tokens/s
    expect(load.workAhead(2_500)).toBe(0);
    // Their recent work counts in who has been busy (and in the fleet's utilisation), decaying as the node's own.
    expect(load.recentPrefill(0)).toBe(35_000);
    expect(load.ownRecentPrefill(0)).toBe(5_000);
    load.shareForeign({ queued: 0, recent: 0 }, 100);
    expect(load.workAhead(100)).toBe(4_000);
  });
});

describe("NodeLoad: the wait for a place when the node runs at most maxRunning requests", () => {
  /** A node at 10,000 tokens/s whose requests ran `decodeMs` after their first byte, with `running` of them decoding now. */
  const decoding = (maxRunning: number | undefined, running: number, decodeMs = 8_000) => {
    const load = new NodeLoad(10_000);
    load.useEstimate(0.1, 0);
    load.maxRunning = maxRunning;
    // One request learns the decode time: dispatched, first byte, completed decodeMs later.
    const first = load.dispatch(0, 1_000, 1_000);
    load.firstByte(100, 0, first, 1_000);
    load.complete(1_000, decodeMs);
    for (let i = 0; i < running; i++) {
      const p = load.dispatch(200, 1_000, 1_000);
      load.firstByte(300 + i * 100, 200, p, 1_000);
    }
    return load;
  };

  it("learns how long a request holds its place from the time between its first byte and its end", () => {
    const load = decoding(4, 0, 8_000);
    expect(load.meanDecodeMs).toBe(8_000);
    load.complete(1_000, 28_000); // one sample moves the average by 1/20 of the difference
    expect(load.meanDecodeMs).toBeCloseTo(9_000);
    load.complete(1_000, undefined); // failed before its first byte: not a sample
    expect(load.meanDecodeMs).toBeCloseTo(9_000);
  });

  it("no wait while a place is free, nor when the node's places are not known", () => {
    expect(decoding(4, 3).slotWaitMs()).toBe(0);
    expect(decoding(4, 3).workAhead(2_000)).toBe(0);
    expect(decoding(undefined, 40).slotWaitMs()).toBe(0);
    expect(decoding(undefined, 40).workAhead(5_000)).toBe(0);
  });

  it("with every place taken, a request waits for as many to finish as are in flight past the places, one every meanDecodeMs / maxRunning", () => {
    const full = decoding(4, 4, 8_000);
    expect(full.slotWaitMs()).toBe(2_000); // one must finish: 8 s / 4 places
    // The wait counts as work ahead at the node's rate: 2 s at 10,000 tokens/s.
    expect(full.workAhead(5_000)).toBe(20_000);
    expect(full.estimateTtftSeconds(5_000, 5_000)).toBeCloseTo(2.5);
    // Two more sent and still before their first byte: they take the next two places first.
    full.dispatch(5_000, 1_000, 1_000);
    full.dispatch(5_000, 1_000, 1_000);
    expect(full.slotWaitMs()).toBe(6_000);
    // A completion frees a place.
    full.complete(1_000, 8_000);
    expect(full.slotWaitMs()).toBe(4_000);
  });

  it("a sharded region's other objects hold places too: their requests in flight, as last shared, count", () => {
    const load = decoding(4, 1, 8_000);
    expect(load.slotWaitMs()).toBe(0);
    load.shareForeign({ queued: 0, recent: 0, inflight: 3 }, 1_000);
    expect(load.slotWaitMs()).toBe(2_000); // 1 + 3 in flight, 4 places: one must end first
    load.shareForeign({ queued: 0, recent: 0 }, 2_000); // none said any more
    expect(load.slotWaitMs()).toBe(0);
  });

  it("the prefill queued ahead still counts when it is the longer wait", () => {
    const load = decoding(4, 4, 400); // a place frees every 100 ms
    load.dispatch(5_000, 50_000, 50_000); // 5 s of prefill queued
    expect(load.slotWaitMs()).toBe(200);
    expect(load.workAhead(5_000)).toBe(50_000);
  });
});
