/**
 * The body a node is sent (src/region/node-body.ts): usage asked for on a stream whose client did
 * not ask, and the completion budget the node's usage is later checked against (src/region/bill.ts),
 * nested keys of the same name not counted; read from what the edge read of the body it parsed
 * (the dispatch's `bodyFields`), or, from an older edge, in one scan of the client's bytes.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.ts";
import type { DispatchRequest } from "../../src/contracts/region-service.ts";
import { parsedBodyFields } from "../../src/proxy/completion-budget.ts";
import { nodeBody } from "../../src/region/node-body.ts";
import { dispatchMeta } from "../fixtures/dispatch.ts";

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

const request = (askUsage: boolean, stream = askUsage): DispatchRequest =>
  dispatchMeta({ requestId: "nb-1", model: "m-rr", stream, askUsage });

describe("nodeBody", () => {
  // rr: no engine cache isolation, so the body is the client's but for usage.
  const rr = () => loadConfig(env).regionByName.get("rr")!;
  // us: cache_salt isolation, so a salt is added after the opening brace.
  const salted = () => [...loadConfig(env).regions].find((r) => r.config.engine_cache_isolation === "cache_salt")!;

  it("asks a stream for usage and reads its completion budget: the largest top-level budget key, not a nested one", async () => {
    const raw = `{"model":"m-rr","stream":true,"max_tokens":64,"max_completion_tokens":80,"tools":[{"max_tokens":9999}],"messages":[]}`;
    const out = await nodeBody(rr(), request(true), bytes(raw));
    expect(out.completionBudget).toBe(80);
    expect(out.usageInjected).toBe(true);
    expect(JSON.parse(text(out.body))).toEqual({ ...JSON.parse(raw), stream_options: { include_usage: true } });
  });

  it("rewrites a stream_options that did not ask for usage, keeping its other keys and the budget", async () => {
    const raw = `{"model":"m-rr","stream":true,"stream_options":{"continuous_usage_stats":false},"max_output_tokens":12}`;
    const out = await nodeBody(rr(), request(true), bytes(raw));
    expect(out.completionBudget).toBe(12);
    expect(out.usageInjected).toBe(true);
    expect(JSON.parse(text(out.body)).stream_options).toEqual({ continuous_usage_stats: false, include_usage: true });
  });

  it("forwards a body that needs no usage as sent, with its budget (or none), salted where the region salts", async () => {
    const raw = `{"model":"m-rr","messages":[],"max_tokens":33}`;
    const plain = await nodeBody(rr(), request(false), bytes(raw));
    expect(text(plain.body)).toBe(raw);
    expect(plain.usageInjected).toBe(false);
    expect(plain.completionBudget).toBe(33);
    const none = await nodeBody(rr(), request(false), bytes(`{"model":"m-rr","messages":[]}`));
    expect(none.completionBudget).toBeUndefined();
    const withSalt = await nodeBody(salted(), request(true), bytes(`{"model":"m","stream":true,"max_tokens":7}`));
    expect(withSalt.completionBudget).toBe(7);
    expect(withSalt.usageInjected).toBe(true);
    const parsed = JSON.parse(text(withSalt.body)) as Record<string, unknown>;
    expect(parsed.cache_salt).toMatch(/^[0-9a-f]{32}$/);
    expect(parsed.stream_options).toEqual({ include_usage: true });
  });

  it("takes the edge's reading of the body instead of its own scan: the budget it was sent is the one checked", async () => {
    const raw = `{"model":"m-rr","stream":true,"max_tokens":64,"messages":[]}`;
    const told = { completionBudget: 5, hasStreamOptions: false };
    const out = await nodeBody(rr(), { ...request(true), bodyFields: told }, bytes(raw));
    expect(out.completionBudget).toBe(5);
    expect(JSON.parse(text(out.body))).toEqual({ ...JSON.parse(raw), stream_options: { include_usage: true } });
    // An edge that says the body has a stream_options: the region reads it to rewrite it.
    const withOptions = `{"model":"m-rr","stream":true,"stream_options":{"continuous_usage_stats":true}}`;
    const rewritten = await nodeBody(rr(), { ...request(true), bodyFields: { hasStreamOptions: true } }, bytes(withOptions));
    expect(rewritten.completionBudget).toBeUndefined();
    expect(JSON.parse(text(rewritten.body)).stream_options).toEqual({ continuous_usage_stats: true, include_usage: true });
  });

  it("comes to the same body and budget from the edge's reading as from its own scan", async () => {
    const bodies = [
      `{"model":"m-rr","stream":true,"max_tokens":64,"max_completion_tokens":80,"tools":[{"max_tokens":9999}],"messages":[]}`,
      `{"model":"m-rr","stream":true,"stream_options":{"continuous_usage_stats":false},"max_output_tokens":12.7}`,
      `{"model":"m-rr","stream":true,"stream_options":null,"max_tokens":-1,"max_completion_tokens":"9"}`,
      `{"max_tokens":3,"model":"m-rr","max_tokens":4,"stream":true}`,
      `{"model":"m-rr","messages":[{"role":"user","content":"\\\"max_tokens\\\": 7"}],"stream":true}`,
      `{"model":"m-rr","messages":[],"max_tokens":1e400}`,
    ];
    for (const raw of bodies) {
      for (const [region, askUsage] of [
        [rr(), true],
        [rr(), false],
        [salted(), true],
      ] as const) {
        const scanned = await nodeBody(region, request(askUsage), bytes(raw));
        const read = await nodeBody(region, { ...request(askUsage), bodyFields: parsedBodyFields(JSON.parse(raw)) }, bytes(raw));
        expect(read.completionBudget, raw).toBe(scanned.completionBudget);
        expect(read.usageInjected, raw).toBe(scanned.usageInjected);
        // The salt is the same for the same namespace: the bodies are byte for byte the same.
        expect(text(read.body), raw).toBe(text(scanned.body));
      }
    }
  });
});
