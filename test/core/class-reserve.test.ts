/** ClassReserve: the nodes the classes below an active one may keep busy (src/core/region/class-reserve.ts). */
import { describe, expect, it } from "vitest";
import { ClassReserve, DEMAND_TAU_MS } from "../../src/core/region/class-reserve.ts";

const RATE = 10_000;
/** Tokens arriving over the demand window that make `nodes` nodes' worth of prefill a second. */
const worth = (nodes: number) => nodes * RATE * (DEMAND_TAU_MS / 1000);

describe("ClassReserve", () => {
  it("lets a lower class take every node when nothing above it asks", () => {
    const r = new ClassReserve();
    for (let i = 0; i < 4; i++) {
      expect(r.mayTake(2, 4, RATE, 0)).toBe(true);
      r.placed(`n${i}`, 2);
    }
    expect(r.mayTake(2, 4, RATE, 0)).toBe(false); // all four are busy with it
  });

  it("keeps for the classes above the nodes their demand needs, and gives them back as it fades", () => {
    const r = new ClassReserve();
    r.arrived(0, worth(1.5), 0); // interactive needs 1.5 of 4 nodes
    r.placed("n0", 2);
    r.placed("n1", 2);
    expect(r.mayTake(2, 4, RATE, 0)).toBe(true); // 2 busy < 2.5 left
    r.placed("n2", 2);
    expect(r.mayTake(2, 4, RATE, 0)).toBe(false); // 3 busy: the rest is interactive's
    // Standard is below interactive too, and counts batch's nodes as its own class's and below.
    expect(r.mayTake(1, 4, RATE, 0)).toBe(false);
    r.prefillDone("n2", 2);
    expect(r.mayTake(2, 4, RATE, 0)).toBe(true);
    r.placed("n2", 2);
    // Ten seconds on, the demand has decayed to e^-1 of 1.5 nodes.
    expect(r.mayTake(2, 4, RATE, DEMAND_TAU_MS)).toBe(true);
    r.forgetNode("n0");
    r.forgetNode("n1");
    expect(r.mayTake(2, 4, RATE, 0)).toBe(true);
  });

  it("never starves a class for a trickle above it", () => {
    const r = new ClassReserve();
    r.arrived(0, worth(0.1), 0);
    expect(r.mayTake(1, 1, RATE, 0)).toBe(true);
  });
});
