/** CompensatedSum: a running sum that keeps what rounding loses; MemberSum: such a sum of members' values (src/core/region/compensated-sum.ts). */
import { describe, expect, it } from "vitest";
import { CompensatedSum, MemberSum } from "../../src/core/region/compensated-sum.ts";
import { seededRandom } from "../../src/core/random.ts";

describe("CompensatedSum", () => {
  it("keeps the small terms added beside a large one once the large one is taken out", () => {
    // A quiet tenant's usual rate beside a busy one's: a plain running sum reads 0 here.
    const s = new CompensatedSum();
    s.add(5e4);
    s.add(1e-13);
    s.add(-5e4);
    expect(s.value).toBe(1e-13);
    let plain = 5e4;
    plain += 1e-13;
    plain -= 5e4;
    expect(plain).toBe(0);
  });

  it("reads the sum of the small terms left after thousands of large ones came and went, in any order", () => {
    const random = seededRandom(9);
    const s = new CompensatedSum();
    const small: number[] = [];
    const large: number[] = [];
    for (let i = 0; i < 5_000; i++) {
      if (random() < 0.3) {
        const x = random() * 1e-6;
        small.push(x);
        s.add(x);
      } else {
        const x = random() * 1e8;
        large.push(x);
        s.add(x);
      }
      // Some of the large ones leave as others come.
      if (large.length > 0 && random() < 0.4) s.add(-large.splice(Math.floor(random() * large.length), 1)[0]!);
    }
    for (const x of large) s.add(-x);
    const expected = small.reduce((a, b) => a + b, 0); // all of one magnitude: summed directly to ~1e-16
    expect(Math.abs(s.value - expected) / expected).toBeLessThan(1e-9);
  });

  it("starts again from a value", () => {
    const s = new CompensatedSum();
    s.add(1e20);
    s.add(3);
    s.reset(7);
    expect(s.value).toBe(7);
    s.reset();
    expect(s.value).toBe(0);
  });
});

describe("MemberSum", () => {
  it("reads exactly 0 once the last member leaves, where a weight changed on the way left a rounding", () => {
    // A tenant of weight 0.7 reweighted to 0.1: the difference is not exact, and a compensated sum alone keeps -2.8e-17.
    const plain = new CompensatedSum();
    plain.add(0.7);
    plain.add(0.1 - 0.7);
    plain.add(-0.1);
    expect(plain.value).not.toBe(0);
    const s = new MemberSum();
    s.add(0.7);
    s.update(0.7, 0.1);
    expect(s.value).toBeCloseTo(0.1, 15);
    s.remove(0.1);
    expect(s.value).toBe(0);
    expect(s.size).toBe(0);
  });

  it("keeps the others' sum while a member is left, and counts only members with a value", () => {
    const s = new MemberSum();
    s.add(0.7);
    s.add(0);
    s.add(2);
    expect(s.size).toBe(2);
    s.update(0.7, 0.1);
    s.remove(0.1);
    expect(s.value).toBe(2);
    // The member of value 0 leaving changes nothing; the last with a value leaving empties it.
    s.remove(0);
    expect(s.size).toBe(1);
    s.remove(2);
    expect(s.value).toBe(0);
    expect(s.size).toBe(0);
  });

  it("counts a member updated to or from 0 as leaving or joining", () => {
    const s = new MemberSum();
    s.add(3);
    s.update(3, 0);
    expect(s.size).toBe(0);
    expect(s.value).toBe(0);
    s.update(0, 5);
    expect(s.size).toBe(1);
    expect(s.value).toBe(5);
  });
});
