import { describe, expect, it } from "vitest";
import { median, percentile, percentileOf } from "../../src/core/stats.ts";

describe("percentile (nearest rank, sorted input)", () => {
  it("is the value at rank ceil(p * n), clamped to the sample", () => {
    const xs = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    expect(percentile(xs, 0)).toBe(1);
    expect(percentile(xs, 0.5)).toBe(5);
    expect(percentile(xs, 0.9)).toBe(9);
    expect(percentile(xs, 1)).toBe(10);
    expect(percentile([3, 20, 1000], 0.9)).toBe(1000);
  });

  it("p99 of 100 values is the 99th, not the maximum", () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(xs, 0.99)).toBe(99);
  });

  it("is the lower middle value of an even count at p50, never an interpolation", () => {
    expect(percentile([1, 2, 3, 4], 0.5)).toBe(2);
  });

  it("is NaN for an empty sample", () => {
    expect(percentile([], 0.5)).toBeNaN();
  });
});

describe("percentileOf (any order)", () => {
  it("ranks a sorted copy and leaves the input as it was", () => {
    const xs = [5, 1, 4, 2, 3];
    expect(percentileOf(xs, 0)).toBe(1);
    expect(percentileOf(xs, 0.5)).toBe(3);
    expect(percentileOf(xs, 0.99)).toBe(5);
    expect(percentileOf(xs, 1)).toBe(5);
    expect(xs).toEqual([5, 1, 4, 2, 3]);
  });

  it("sorts numerically, not as strings", () => {
    expect(percentileOf([10, 9, 100], 0.5)).toBe(10);
  });

  it("is NaN for an empty sample", () => {
    expect(percentileOf([], 0.5)).toBeNaN();
  });
});

describe("median", () => {
  it("averages the middle pair of an even count and takes the middle of an odd one", () => {
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([7])).toBe(7);
    expect(median([9, 1, 5])).toBe(5);
  });

  it("is NaN for an empty sample", () => {
    expect(median([])).toBeNaN();
  });
});
