/** Whether a trace the edge starts is sampled (src/edge/middleware/trace.ts): at `trace_sample_rate`, never above the decision log's rate. */
import { describe, expect, it } from "vitest";
import { sampledAt } from "../../../src/edge/middleware/trace.ts";
import { configSchema, DEFAULT_TRACE_SAMPLE_RATE } from "../../../src/config/schema.ts";
import { TEST_CONFIG } from "../../fixtures/config.ts";

describe("sampledAt", () => {
  it("samples the draws below the trace rate", () => {
    const rates = { trace_sample_rate: 0.01, decision_log_sample_rate: 1 };
    expect(sampledAt(rates, 0.009)).toBe(true);
    expect(sampledAt(rates, 0.01)).toBe(false);
    expect(sampledAt(rates, 0.5)).toBe(false);
  });

  it("never samples more traces than the decision log logs lines", () => {
    const rates = { trace_sample_rate: 1, decision_log_sample_rate: 0.2 };
    expect(sampledAt(rates, 0.19)).toBe(true);
    expect(sampledAt(rates, 0.2)).toBe(false);
    expect(sampledAt({ trace_sample_rate: 1, decision_log_sample_rate: 0 }, 0)).toBe(false);
  });

  it("defaults to 1% of the traces warmpath starts, and refuses a rate outside 0-1 by name", () => {
    const { trace_sample_rate: _set, ...unset } = TEST_CONFIG;
    expect(configSchema.parse(unset).trace_sample_rate).toBe(DEFAULT_TRACE_SAMPLE_RATE);
    expect(DEFAULT_TRACE_SAMPLE_RATE).toBe(0.01);
    const bad = configSchema.safeParse({ ...TEST_CONFIG, trace_sample_rate: 1.5 });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.path).toEqual(["trace_sample_rate"]);
  });
});
