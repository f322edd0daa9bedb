/** The edge's trace (src/edge/trace.ts): whether a trace it starts is sampled, and that a client's flag wins. */
import { describe, expect, it } from "vitest";
import { EdgeTrace } from "../../src/edge/trace.ts";

const CLIENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7";

describe("EdgeTrace sampling", () => {
  it("a trace the edge starts is sampled as the configuration says", () => {
    const off = new EdgeTrace(new Headers(), "r1", "POST", "/v1/chat/completions", false);
    expect(off.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(off.scope(off.root).flags).toBe(0);
    const on = new EdgeTrace(new Headers(), "r2", "POST", "/v1/chat/completions", true);
    expect(on.scope(on.root).flags).toBe(1);
  });

  it("a client's traceparent keeps its own sampled flag, whatever the edge would choose", () => {
    const sampled = new EdgeTrace(new Headers({ traceparent: `${CLIENT}-01` }), "r3", "POST", "/v1/completions", false);
    expect(sampled.traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    expect(sampled.scope(sampled.root).flags).toBe(1);
    const unsampled = new EdgeTrace(new Headers({ traceparent: `${CLIENT}-00` }), "r4", "POST", "/v1/completions", true);
    expect(unsampled.scope(unsampled.root).flags).toBe(0);
  });
});
