/** CompensatedSum: a running sum that keeps what rounding loses (src/core/region/compensated-sum.ts). */
import { describe, expect, it } from "vitest";
import { CompensatedSum } from "../../src/core/region/compensated-sum.ts";
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
