/** SortedByKey: items in ascending key order (src/core/region/sorted-by-key.ts). */
import { describe, expect, it } from "vitest";
import { SortedByKey } from "../../src/core/region/sorted-by-key.ts";
import { seededRandom } from "../../src/core/random.ts";

const items = (s: SortedByKey<{ key: number; id: number }>) => Array.from({ length: s.size }, (_, i) => s.at(i)!);

describe("SortedByKey", () => {
  it("keeps items in key order through random inserts and removes, removing the very item among equal keys", () => {
    const s = new SortedByKey<{ key: number; id: number }>();
    const held: { key: number; id: number }[] = [];
    const random = seededRandom(3);
    for (let i = 0; i < 2_000; i++) {
      if (random() < 0.6 || held.length === 0) {
        // Few distinct keys: many ties, and -Infinity (a tenant with no demand: ln 0).
        const item = { key: random() < 0.1 ? -Infinity : Math.floor(random() * 20), id: i };
        s.insert(item);
        held.push(item);
      } else {
        const [item] = held.splice(Math.floor(random() * held.length), 1);
        expect(s.remove(item!)).toBe(true);
        expect(s.remove(item!)).toBe(false); // gone: not another item of its key
      }
      const list = items(s);
      if (list.length !== held.length || list.some((it, k) => k > 0 && it.key < list[k - 1]!.key))
        throw new Error(`out of order at step ${i}`);
    }
    expect(new Set(items(s))).toEqual(new Set(held));
  });

  it("finds how many keys are at most a key", () => {
    const s = new SortedByKey<{ key: number }>();
    for (const key of [5, 1, 3, 3, 9]) s.insert({ key });
    expect([0, 1, 3, 4, 9, 10].map((k) => s.upperBound(k))).toEqual([0, 1, 3, 3, 5, 5]);
  });
});
