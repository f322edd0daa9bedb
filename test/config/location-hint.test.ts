/** Each region's Durable Object is created near its GPUs: the hint from its location, or the configured one. */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.ts";
import { locationHintFor } from "../../src/config/location-hint.ts";
import { TEST_CONFIG } from "../fixtures/config.ts";

const env = (config: unknown) =>
  ({ WARMPATH_CONFIG: config, NODE_TOKEN_TEST: "t", ADMIN_TOKEN_TEST: "a", ORIGIN_TOKEN_TEST: "o" }) as unknown as Env;

describe("location hints", () => {
  it("maps GPU locations to Cloudflare's hint areas", () => {
    const cities: Array<[string, number, number, string]> = [
      ["Ashburn", 39.04, -77.49, "enam"],
      ["San Jose", 37.34, -121.89, "wnam"],
      ["Dublin", 53.35, -6.26, "weur"],
      ["Frankfurt", 50.11, 8.68, "weur"],
      ["Warsaw", 52.23, 21.01, "eeur"],
      ["Istanbul", 41.01, 28.98, "eeur"],
      ["Tokyo", 35.68, 139.69, "apac-ne"],
      ["Singapore", 1.35, 103.82, "apac-se"],
      ["Mumbai", 19.08, 72.88, "apac"],
      ["Sydney", -33.87, 151.21, "oc"],
      ["Sao Paulo", -23.55, -46.63, "sam"],
      ["Johannesburg", -26.2, 28.05, "afr"],
      ["Dubai", 25.2, 55.27, "me"],
    ];
    for (const [city, lat, lon, hint] of cities) expect(`${city}: ${locationHintFor(lat, lon)}`).toBe(`${city}: ${hint}`);
  });

  it("takes a configured hint over the derived one, and refuses an unknown one by name", () => {
    // A fresh document each time (the loaded configuration is cached per document).
    const withHint = (hint?: string) => {
      const config = JSON.parse(JSON.stringify(TEST_CONFIG)) as { regions: Array<Record<string, unknown>> };
      if (hint !== undefined) config.regions[0]!.location_hint = hint;
      return env(config);
    };
    expect(loadConfig(withHint()).regions.map((r) => r.locationHint)).toEqual(["weur", "enam", "apac-ne", "oc", "sam", "weur"]);
    expect(loadConfig(withHint("eeur")).regions[0]!.locationHint).toBe("eeur");
    expect(() => loadConfig(withHint("mars"))).toThrow(/regions\.0\.location_hint/);
  });
});
