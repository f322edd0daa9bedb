import { describe, expect, it } from "vitest";
import { distanceKm, orderRegions, roundTripMs } from "../../src/core/region-select.ts";

const regions = [
  { name: "us-east", location: { lat: 39.04, lon: -77.49, continent: "NA" }, models: ["a", "b"] },
  { name: "eu-west", location: { lat: 53.35, lon: -6.26, continent: "EU" }, models: ["a"] },
  { name: "ap-ne", location: { lat: 35.68, lon: 139.69, continent: "AS" }, models: ["a"] },
];

describe("orderRegions", () => {
  it("orders by great-circle distance", () => {
    expect(orderRegions(regions, "a", { lat: 48.85, lon: 2.35 }).map((r) => r.name)).toEqual(["eu-west", "us-east", "ap-ne"]);
    expect(orderRegions(regions, "a", { lat: 37.56, lon: 126.97 }).map((r) => r.name)[0]).toBe("ap-ne");
  });
  it("only includes regions serving the model", () => {
    expect(orderRegions(regions, "b", { lat: 48.85, lon: 2.35 }).map((r) => r.name)).toEqual(["us-east"]);
  });
  it("falls back to the continent, then configuration order", () => {
    expect(orderRegions(regions, "a", { continent: "AS" }).map((r) => r.name)).toEqual(["ap-ne", "us-east", "eu-west"]);
    expect(orderRegions(regions, "a", {}).map((r) => r.name)).toEqual(["us-east", "eu-west", "ap-ne"]);
  });
  it("estimates the round trip from the client's coordinates, and not without them", () => {
    // Paris to Dublin (about 780 km) and to Virginia (about 6,200 km): about 12 ms and 93 ms.
    expect(roundTripMs(regions[1]!, { lat: 48.85, lon: 2.35 })).toBeCloseTo(11.7, 0);
    expect(roundTripMs(regions[0]!, { lat: 48.85, lon: 2.35 })).toBeGreaterThan(85);
    expect(roundTripMs(regions[0]!, { lat: 48.85, lon: 2.35 })).toBeLessThan(100);
    expect(roundTripMs(regions[0]!, { continent: "EU" })).toBeUndefined();
  });
  it("computes distances", () => {
    expect(distanceKm(51.5, -0.12, 40.71, -74.0)).toBeGreaterThan(5500);
    expect(distanceKm(51.5, -0.12, 40.71, -74.0)).toBeLessThan(5600);
  });
});
