/** The node's circuit breaker (src/core/region/node-table.ts), driven through the RegionRouter. */
import { describe, expect, it } from "vitest";
import { DEFAULT_REGION_SETTINGS, RegionRouter, type RegionSettings } from "../../src/core/region/index.ts";

const settings = (over: Partial<RegionSettings> = {}): RegionSettings => ({
  ...DEFAULT_REGION_SETTINGS,
  name: "r",
  blockTokens: 128,
  failureCooldownMs: 1_000,
  requestTimeoutMs: 60_000,
  ...over,
});
const hashes = (p: string) => Array.from({ length: 4 }, (_, i) => `${p}:${i}`.padEnd(16, "0"));
const req = (p: string) => ({ requestId: p, model: "m", hashes: hashes(p), promptTokens: 512 });

function oneNode(over: Partial<RegionSettings> = {}) {
  const r = new RegionRouter(settings(over));
  r.upsertNode({ id: "a", url: "http://a", models: ["m"], kvCapacityTokens: 100_000, static: true, lastSeen: 0 }, 0);
  return r;
}
const placed = (r: RegionRouter, p: string, now: number) => {
  const res = r.route(req(p), now);
  if (!res.ok) throw new Error(res.message);
  return res;
};
const breaker = (r: RegionRouter, now: number) => r.snapshot(now).nodes[0]!.breaker;

describe("circuit breaker", () => {
  it("opens on a failure, lets one trial through after the cool-down, and closes on its success", () => {
    const r = oneNode();
    r.complete(placed(r, "x", 0).ticket, { status: "failed", reason: "timeout" }, 10);
    expect(breaker(r, 20)).toBe("open");
    expect(r.route(req("y"), 500)).toMatchObject({ ok: false, reason: "saturated" });
    // Cool-down over: half-open, one trial only.
    expect(breaker(r, 1_100)).toBe("half-open");
    const trial = placed(r, "y", 1_100);
    expect(r.route(req("z"), 1_150)).toMatchObject({ ok: false });
    r.complete(trial.ticket, { status: "ok" }, 1_200);
    expect(breaker(r, 1_200)).toBe("closed");
    expect(r.route(req("z"), 1_250).ok).toBe(true);
  });

  it("a failed trial opens it again for twice as long; a failure mid-stream counts", () => {
    const r = oneNode();
    r.complete(placed(r, "x", 0).ticket, { status: "stream-error" }, 10);
    expect(breaker(r, 20)).toBe("open");
    const trial = placed(r, "y", 1_100);
    r.complete(trial.ticket, { status: "failed", reason: "http-5xx" }, 1_200);
    expect(breaker(r, 2_500)).toBe("open"); // 2 s now, not 1 s
    expect(breaker(r, 3_300)).toBe("half-open");
  });

  it("stays open whatever the node's reports say, and a trial that says nothing (refused, cancelled) frees the next one", () => {
    const r = new RegionRouter(settings());
    const report = (now: number) =>
      r.report(
        { node_id: "a", region: "r", url: "http://a", models: ["m"], kv_capacity_tokens: 100_000, running: 0, waiting: 0, kv_usage: 0 },
        now,
      );
    report(0);
    r.complete(placed(r, "x", 0).ticket, { status: "failed", reason: "connection" }, 10);
    report(500); // healthy-looking report
    expect(r.snapshot(500).nodes[0]!.available).toBe(false);
    report(1_100);
    const trial = placed(r, "y", 1_100);
    r.complete(trial.ticket, { status: "cancelled" }, 1_150);
    expect(breaker(r, 1_160)).toBe("half-open");
    expect(r.route(req("z"), 1_160).ok).toBe(true); // the next trial
  });

  it("an abandoned trial (its end never reported) does not hold the breaker half-open forever", () => {
    const r = oneNode({ requestTimeoutMs: 5_000 });
    r.complete(placed(r, "x", 0).ticket, { status: "failed", reason: "timeout" }, 10);
    placed(r, "y", 1_100); // the trial; its worker is lost
    expect(r.route(req("z"), 2_000).ok).toBe(false);
    r.expire(7_000);
    expect(r.route(req("z"), 7_000).ok).toBe(true);
  });
});
