import { describe, expect, it } from "vitest";
import { Exposition } from "../../../src/edge/api/exposition.ts";

describe("Exposition (Prometheus text format 0.0.4)", () => {
  it("writes each family's help and type once, before all its samples, in first-seen order", () => {
    const e = new Exposition();
    e.add("a_total", "counter", "A's help.", { region: "us" }, 1);
    e.add("b", "gauge", "B's help.", {}, 2.5);
    e.add("a_total", "counter", "ignored: the family has its help", { region: "eu" }, 3);
    expect(e.text()).toBe(
      [
        "# HELP a_total A's help.",
        "# TYPE a_total counter",
        'a_total{region="us"} 1',
        'a_total{region="eu"} 3',
        "# HELP b B's help.",
        "# TYPE b gauge",
        "b 2.5",
        "",
      ].join("\n"),
    );
  });

  it("escapes backslashes, quotes and newlines in label values, and writes the special numbers by name", () => {
    const e = new Exposition();
    e.add("x", "gauge", "h", { tenant: 'a\\b"c\nd' }, NaN);
    e.add("x", "gauge", "h", { tenant: "up" }, Infinity);
    e.add("x", "gauge", "h", { tenant: "down" }, -Infinity);
    const lines = e.text().split("\n");
    expect(lines).toContain('x{tenant="a\\\\b\\"c\\nd"} NaN');
    expect(lines).toContain('x{tenant="up"} +Inf');
    expect(lines).toContain('x{tenant="down"} -Inf');
  });

  it("renders a histogram as cumulative buckets with +Inf, its sum and count, bounds scaled", () => {
    const e = new Exposition();
    // Bounds in ms, exported in seconds; counts per bucket, the last one past every bound.
    e.histogram("lat_seconds", "h", { region: "us" }, [10, 100], [2, 3, 1], 450, 0.001);
    expect(e.text().split("\n").slice(2, -1)).toEqual([
      'lat_seconds_bucket{region="us",le="0.01"} 2',
      'lat_seconds_bucket{region="us",le="0.1"} 5',
      'lat_seconds_bucket{region="us",le="+Inf"} 6',
      'lat_seconds_sum{region="us"} 0.45',
      'lat_seconds_count{region="us"} 6',
    ]);
  });
});
