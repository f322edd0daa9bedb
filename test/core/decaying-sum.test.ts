/** DecayingSum: a sum of exponentially decaying values kept as members change (src/core/region/decaying-sum.ts). */
import { describe, expect, it } from "vitest";
import { DecayingSum } from "../../src/core/region/decaying-sum.ts";
import { decay } from "../../src/core/stats.ts";
import { seededRandom } from "../../src/core/random.ts";

const TAU = 10_000;

/** A set of members and the sum kept of them; `brute` sums the members afresh. */
function harness() {
  const members = new Map<number, { value: number; at: number }>();
  const sum = new DecayingSum(TAU, (visit) => {
    for (const m of members.values()) visit(m.value, m.at);
  });
  const brute = (now: number) => [...members.values()].reduce((s, m) => s + decay(m.value, m.at, now, TAU), 0);
  return { members, sum, brute };
}

describe("DecayingSum", () => {
  it("reads what summing every member's decayed value reads, through churn and hours of time (the epoch moving many times)", () => {
    const { members, sum, brute } = harness();
    const random = seededRandom(7);
    let now = 1_700_000_000_000; // a Durable Object's clock: ms since 1970
    let id = 0;
    let reads = 0;
    for (let step = 0; step < 6_000; step++) {
      now += Math.floor(random() * 4_000);
      sum.advance(now);
      const roll = random();
      const ids = [...members.keys()];
      if (roll < 0.4 || ids.length === 0) {
        // Values from a few tokens to a flood's millions: the rounding the sum carries is the largest's.
        const m = { value: Math.floor(10 ** (1 + random() * 6)), at: now };
        members.set(id++, m);
        sum.add(m.value, m.at);
      } else if (roll < 0.75) {
        const k = ids[Math.floor(random() * ids.length)]!;
        const m = members.get(k)!;
        const next = { value: decay(m.value, m.at, now, TAU) + Math.floor(random() * 50_000), at: now };
        sum.update(m.value, m.at, next.value, next.at);
        members.set(k, next);
      } else {
        const k = ids[Math.floor(random() * ids.length)]!;
        const m = members.get(k)!;
        sum.remove(m.value, m.at);
        members.delete(k);
      }
      expect(sum.size).toBe(members.size);
      const expected = brute(now);
      // Relative to the members' largest value at this instant: what a share compares against.
      const scale = Math.max(1, ...[...members.values()].map((m) => decay(m.value, m.at, now, TAU)));
      expect(Math.abs(sum.read(now) - expected) / scale).toBeLessThan(1e-9);
      reads++;
    }
    expect(now - 1_700_000_000_000).toBeGreaterThan(20 * 40 * TAU); // the epoch moved (every 40 tau) 20 times and more
    expect(reads).toBe(6_000);
  });

  it("is 0 exactly once its last member leaves, whatever rounding the others left", () => {
    const { members, sum } = harness();
    for (let i = 0; i < 100; i++) {
      members.set(i, { value: 1e7 / (i + 3), at: i * 37 });
      sum.add(1e7 / (i + 3), i * 37);
    }
    for (let i = 0; i < 100; i++) sum.remove(1e7 / (i + 3), i * 37);
    expect(sum.size).toBe(0);
    expect(sum.read(5_000)).toBe(0);
    sum.add(5, 10_000);
    expect(sum.read(10_000)).toBe(5);
  });

  it("never reads below 0, nor overflows after days without a member", () => {
    const { members, sum } = harness();
    members.set(1, { value: 1, at: 0 });
    sum.add(1, 0);
    const later = 3 * 86_400_000; // 25,920 time constants: e^25920 is no double
    sum.advance(later);
    expect(sum.read(later)).toBe(0);
    members.set(2, { value: 4, at: later });
    sum.add(4, later);
    expect(sum.read(later)).toBeCloseTo(4, 12);
    expect(Number.isFinite(sum.read(later + TAU))).toBe(true);
  });
});
